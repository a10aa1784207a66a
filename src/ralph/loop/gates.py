"""Gates: the project's own checks (tests, lint), run by the orchestrator after the agent.

Each gate writes a receipt (argv, cwd, exit code, duration, and its output in the content
store with its hash): the evidence behind a verdict."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import orjson

from ralph.fsutil import atomic_write_bytes
from ralph.loop.events import EventSink
from ralph.proc import ProcessError, run_shell

GATE_OUTPUT_BYTES = 1024 * 1024  # the end of a gate's output kept as evidence
TAIL_LINES = 20  # the end of a gate's output shown with its verdict (events, receipts)
TAIL_CHARS = 2000


def tail_lines(data: bytes, lines: int = TAIL_LINES, chars: int = TAIL_CHARS) -> str:
    """The last `lines` lines of an output, at most `chars` characters (whole lines where
    they fit; a last line longer than that keeps its end), without trailing blank lines."""
    text = data[-(chars * 4 + 1):].decode("utf-8", "replace").replace("\r\n", "\n")
    kept = text.rstrip().split("\n")[-lines:]
    out: list[str] = []
    size = 0
    for line in reversed(kept):
        if size + len(line) + 1 > chars:
            if not out:
                out.append(line[-chars:])
            break
        out.append(line)
        size += len(line) + 1
    return "\n".join(reversed(out))


@dataclass(frozen=True)
class GateReceipt:
    index: int
    command: str
    argv: list[str]
    cwd: str
    exit_code: int | None
    ok: bool
    timed_out: bool
    duration_s: float
    started_at: str
    finished_at: str
    output_hash: str | None
    output_bytes: int
    output_truncated: bool
    error: str | None = None
    output_tail: str = ""  # its last lines (TAIL_LINES), for the verdict and the next prompt

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


async def run_gates(commands: list[str], *, cwd: Path, timeout_s: float, receipts_dir: Path,
                    emit: EventSink,
                    on_start: Callable[[int], None] | None = None) -> list[GateReceipt]:
    """Run every gate in order (all of them, even after a failure: the receipts say which).
    `on_start(pgid)` is called as each gate's process group starts.

    The output goes to the content store as the `gate.finished` event's content, so the
    receipt's hash stays referenced (and survives gc) as long as that event does."""
    receipts_dir.mkdir(parents=True, exist_ok=True)
    receipts = []
    for index, command in enumerate(commands, start=1):
        emit("gate.started", {"index": index, "command": command})
        receipt, output = await _run_gate(index, command, cwd, timeout_s, on_start)
        frame = emit("gate.finished", receipt.to_dict(), content=output or None)
        receipt = replace(receipt, output_hash=frame.hash)
        atomic_write_bytes(receipts_dir / f"gate-{index}.json",
                           orjson.dumps(receipt.to_dict(), option=orjson.OPT_INDENT_2),
                           durable=False)
        receipts.append(receipt)
    return receipts


async def _run_gate(index: int, command: str, cwd: Path, timeout_s: float,
                    on_start: Callable[[int], None] | None) -> tuple[GateReceipt, bytes]:
    argv = ["/bin/sh", "-c", command]
    try:
        result = await run_shell(command, cwd=cwd, timeout_s=timeout_s,
                                 tail_bytes=GATE_OUTPUT_BYTES, on_start=on_start,
                                 contain=True)
    except ProcessError as exc:
        return GateReceipt(index, command, argv, str(cwd), None, False, False, 0.0, "", "",
                           None, 0, False, str(exc)), b""
    return GateReceipt(index, command, argv, str(cwd), result.exit_code,
                       result.exit_code == 0 and not result.timed_out, result.timed_out,
                       result.duration_s, result.started_at, result.finished_at, None,
                       result.output_bytes, result.output_bytes > len(result.tail),
                       output_tail=tail_lines(result.tail)), result.tail

"""Running an agent: one owned process, its output streamed to a log file and to events."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ralph.agents import adapter_for
from ralph.agents.base import (
    AgentError,
    AgentEvent,
    AgentStatus,
    OutputKind,
    OutputParser,
    Usage,
)
from ralph.agents.opencode import OpencodeAdapter
from ralph.agents.program import check_program
from ralph.config import ResolvedAgent
from ralph.proc import ProcessError, run_process

log = logging.getLogger("ralph.agents")
Emit = Callable[[str, dict[str, Any]], object]  # (topic, meta): appends an event to the run

# A longer line is passed on in pieces (memory stays bounded). Large enough for a CLI's
# biggest JSON event (a whole file in a tool result, a long final answer).
MAX_LINE_BYTES = 8 * 1024 * 1024
# agent.output events carry the beginning of their text, this long at most: the log holds
# all of it (`log_offset` says where), so the store does not hold the output a second time.
EXCERPT_CHARS = 1000
# Events (the CLI's events, plain lines) a stream gives an agent.output event each; later
# ones are joined by kind into events of up to COALESCE_CHARS of text (see _Framer), so an
# agent printing hundreds of megabytes makes a few thousand events. An event costs 0.8 KB of
# store and index for a short line (its fields, its index row), 1.5 KB with EXCERPT_CHARS of
# text: 10,000 of them cost 8 to 15 MB, which put a chatty agent's 20 MB at 1.4 to 1.7 bytes
# on disk per byte of output; 1,000 keep it near 1.1 (docs/benchmarks.md, storage).
LINE_EVENTS = 1_000
COALESCE_CHARS = 64 * 1024
HOLD_S = 0.5  # held text waits at most about this long before it is sent
TAIL_CHARS = 16 * 1024  # the end of the output kept for classification and signals
# Anywhere in a line ("Done. EXIT_SIGNAL: true"); the last one said counts.
_EXIT_SIGNAL = re.compile(r"\bEXIT_SIGNAL\**\s*:\s*\**`?(true|false)\b", re.IGNORECASE)


@dataclass(frozen=True)
class AgentOutcome:
    """How an agent run ended, with what the loop needs from its output."""

    status: AgentStatus
    exit_code: int | None
    message: str
    exit_signal: bool | None  # the agent's EXIT_SIGNAL hint, None if it printed none
    session_id: str | None
    reset_at: str | None
    retry_after_s: float | None
    duration_s: float
    started_at: str
    finished_at: str
    log_path: Path
    argv: list[str]
    tail: str
    usage: Usage | None


class _Lines:
    """Splits one stream's chunks into lines, holding at most MAX_LINE_BYTES of a line.

    Each line comes with the log offset of its first byte: `feed` is told where its chunk
    begins in the log. A line begins either where the held piece began (its first byte came
    in an earlier chunk, perhaps with the other stream's chunks logged in between) or after
    a newline of this chunk; so is every cut of a long line, since the held piece is never
    longer than MAX_LINE_BYTES.
    """

    def __init__(self) -> None:
        self._pending = b""
        self._start = 0  # log offset of the held piece's first byte

    def feed(self, chunk: bytes, at: int) -> list[tuple[str, int]]:
        """The lines `chunk` completes, with their log offsets; the log holds `chunk` from
        byte `at`."""
        held = len(self._pending)
        data = self._pending + chunk if held else chunk
        parts = data.split(b"\n")
        rest = parts.pop()
        lines: list[tuple[str, int]] = []
        pos = 0  # in data: data[i] is at log offset at + i - held for i >= held
        for part in parts:
            if len(part) <= MAX_LINE_BYTES:
                lines.append((part.decode("utf-8", "replace").rstrip("\r"),
                              at + pos - held if pos >= held else self._start))
            else:  # cut where a line still arriving would be cut, whatever the reads
                lines += self._cut(part, pos, held, at)
            pos += len(part) + 1
        while len(rest) > MAX_LINE_BYTES:
            lines += self._cut(rest[:MAX_LINE_BYTES], pos, held, at)
            rest = rest[MAX_LINE_BYTES:]
            pos += MAX_LINE_BYTES
        self._start = at + pos - held if pos >= held else self._start
        self._pending = rest
        return lines

    def _cut(self, part: bytes, pos: int, held: int, at: int) -> list[tuple[str, int]]:
        return [(part[i:i + MAX_LINE_BYTES].decode("utf-8", "replace").rstrip("\r"),
                 at + pos + i - held if pos + i >= held else self._start)
                for i in range(0, len(part), MAX_LINE_BYTES)]

    def flush(self) -> list[tuple[str, int]]:
        rest, self._pending = self._pending, b""
        return [(rest.decode("utf-8", "replace"), self._start)] if rest else []


def resolve_program(argv: list[str], agent: ResolvedAgent, hint: str | None) -> None:
    """Fail early, in one line naming the agent, the path and the fix, when the agent's
    program cannot start: not there, not executable, a format the kernel does not run."""
    problem = check_program(argv[0], hint).problem
    if problem is not None:
        raise AgentError(f"agent '{agent.name}': {problem}")


async def run_agent(agent: ResolvedAgent, prompt: str, *, cwd: Path, prompt_file: Path,
                    log_path: Path, emit: Emit, timeout_s: float | None = None,
                    on_start: Callable[[int], None] | None = None,
                    attach: tuple[str, str] | None = None,
                    context_env: Mapping[str, str] | None = None,
                    silence_warning_s: float = 0) -> AgentOutcome:
    """Run `agent` on `prompt`; cancellation ends the agent's whole process group.

    `on_start(pgid)` learns the agent's process group as soon as it runs. `attach` (url,
    title): run attached to the agent's server (opencode's server mode). `context_env`:
    variables telling the agent where it is (`RALPH_TASK_ID`, ...); the agent's own `env`
    wins over them. `silence_warning_s` > 0: an `agent.silent` event when the agent printed
    nothing for that long, again after twice as long, and so on."""
    adapter = adapter_for(agent.adapter)
    command = adapter.build(list(agent.argv), agent.model, prompt, str(prompt_file))
    if attach is not None and isinstance(adapter, OpencodeAdapter):
        url, title = attach
        command = replace(command, argv=adapter.attached_argv(command.argv, url, title),
                          shown=adapter.attached_argv(command.shown, url, title))
    resolve_program(command.argv, agent, adapter.install_hint)
    parser = adapter.parser()
    reader = _Reader(parser, emit, _size(log_path))
    heard = [time.monotonic()]  # when the agent last printed something

    def on_output(stream: str, chunk: bytes) -> None:
        heard[0] = time.monotonic()
        reader.feed(stream, chunk)

    emit("agent.started", {"agent": agent.name, "adapter": agent.adapter,
                           "argv": command.shown, "session_id": None})
    timeout = timeout_s if timeout_s is not None else agent.timeout_seconds
    loop = asyncio.get_running_loop()
    helpers = [loop.create_task(reader.flush_when_old())]
    if silence_warning_s > 0:
        helpers.append(loop.create_task(_warn_of_silence(heard, silence_warning_s, emit)))
    try:
        result = await run_process(command.argv, cwd=cwd,
                                   env={**(context_env or {}), **agent.env, **command.env},
                                   stdin_data=command.stdin, timeout_s=timeout,
                                   on_output=on_output, log_path=log_path,
                                   on_start=on_start, contain=True)
    except ProcessError as exc:
        raise AgentError(f"agent '{agent.name}': {exc}") from None
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):  # the lines held so far were printed: keep them
            reader.flush()
        raise
    finally:
        for helper in helpers:
            helper.cancel()
    reader.finish()
    verdict = adapter.classify(result.exit_code, parser)
    text_tail = reader.said.text()
    status: AgentStatus = "timeout" if result.timed_out else verdict.status
    message = f"timed out after {timeout:g} s" if result.timed_out else verdict.message
    usage = _report_usage(emit, priced(parser.usage, parser.model or agent.model, agent),
                          parser.model or agent.model)
    session_id = verdict.session_id or parser.session_id
    emit("agent.finished", {"status": status, "exit_code": result.exit_code,
                            "session_id": session_id, "reset_at": verdict.reset_at,
                            "message": message, "duration_s": round(result.duration_s, 4),
                            "not_json_lines": parser.not_json, "pid": result.pid})
    return AgentOutcome(status, result.exit_code, message, _exit_signal(text_tail), session_id,
                        verdict.reset_at, verdict.retry_after_s, result.duration_s,
                        result.started_at, result.finished_at, log_path, command.argv,
                        text_tail, usage)


def _report_usage(emit: Emit, usage: Usage | None, model: str | None) -> Usage | None:
    """An `agent.usage` event for what the run used, if the CLI said; the usage."""
    if usage is not None:
        emit("agent.usage", {"input_tokens": usage.input_tokens,
                             "output_tokens": usage.output_tokens,
                             "cached_tokens": usage.cached_tokens, "cost_usd": usage.cost_usd,
                             "model": model})
    return usage


async def _warn_of_silence(heard: list[float], first_s: float, emit: Emit) -> None:
    """Emit `agent.silent` {seconds} each time the agent has printed nothing for `first_s`,
    then twice as long, four times, ...: a stuck CLI (retrying its network, waiting on a
    prompt no one sees) shows up without flooding. Output resets the back-off."""
    wait = first_s
    since = heard[0]
    while True:
        await asyncio.sleep(max(0.0, since + wait - time.monotonic()))
        if heard[0] != since:  # it spoke meanwhile: start over from its last output
            since, wait = heard[0], first_s
            continue
        silent = time.monotonic() - since
        if silent >= wait:
            try:
                emit("agent.silent", {"seconds": round(silent, 1), "next_warning_s": wait * 2})
            except Exception as exc:  # the store failed: the agent's run goes on regardless
                log.warning("could not record the agent's silence: %s", exc)
            wait *= 2


def _size(path: Path) -> int:
    """The size of the log before the run: it is opened for appending."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def output_meta(kind: OutputKind, text: str, tool: str | None, chars: int, log_offset: int,
                *, delta: bool = False) -> dict[str, Any]:
    """An `agent.output` event's meta: the beginning of its text (`content`, at most
    EXCERPT_CHARS), the whole text's length in characters, and the log offset of the raw
    output it came from; `delta` when the text continues the piece before (streamed)."""
    meta: dict[str, Any] = {"kind": kind, "content": text[:EXCERPT_CHARS], "tool": tool,
                            "chars": chars, "log_offset": log_offset}
    if delta:  # a reader joins it to the text before, as one message
        meta["delta"] = True
    return meta


def priced(usage: Usage | None, model: str | None, agent: ResolvedAgent) -> Usage | None:
    """Usage with its cost: the CLI's own figure, else from ralph.toml [prices] for the
    model it used; None when neither is known (never a guess)."""
    if usage is None or usage.cost_usd is not None or model is None:
        return usage
    price = agent.prices.get(model)
    if price is None or usage.input_tokens is None or usage.output_tokens is None:
        return usage
    return replace(usage, cost_usd=price.cost(usage.input_tokens, usage.output_tokens,
                                              usage.cached_tokens or 0))


class _Reader:
    """The agent's output as it arrives: split into lines that know their log offsets, parsed
    into the CLI's events, framed as `agent.output` events; what the agent said is kept for
    its signals.

    proc's log writer appends every chunk to the log in the order it hands the chunks to
    `on_output`, stdout and stderr alike: a chunk's place in the log is the log's size before
    the run plus the bytes of the chunks before it.
    """

    def __init__(self, parser: OutputParser, emit: Emit, log_start: int) -> None:
        self.said = _Tail()  # what the agent said (its text): EXIT_SIGNAL, the judge's verdict
        self._parser = parser
        self._logged = log_start
        self._splitters = {"stdout": _Lines(), "stderr": _Lines()}

        def send(meta: dict[str, Any]) -> None:
            emit("agent.output", meta)

        def send_stderr(meta: dict[str, Any]) -> None:
            meta["stream"] = "stderr"  # the CLI's diagnostics (event/agent_log remotely)
            emit("agent.output", meta)

        self._framers = {"stdout": _Framer(send), "stderr": _Framer(send_stderr)}

    def feed(self, stream: str, chunk: bytes) -> None:
        at = self._logged
        self._logged += len(chunk)
        self._take(stream, self._splitters[stream].feed(chunk, at))

    def _take(self, stream: str, lines: list[tuple[str, int]]) -> None:
        framer = self._framers[stream]
        for line, offset in lines:
            for event in self._parser.feed_line(stream, line):
                framer.add(event, offset)
                if event.kind == "text" and event.said:
                    self.said.add(event.content, continues=event.delta)

    def finish(self) -> None:
        """The output ended: frame what is left of unfinished lines and held lines."""
        for stream, splitter in self._splitters.items():
            self._take(stream, splitter.flush())
        self.flush()

    def flush(self) -> None:
        """Send the text held to be joined."""
        for framer in self._framers.values():
            framer.flush()

    async def flush_when_old(self) -> None:
        """Until cancelled: send held text once it is HOLD_S old, so that an agent whose
        output is being joined is still seen as it works."""
        while True:
            await asyncio.sleep(HOLD_S / 2)
            for framer in self._framers.values():
                framer.flush_if_older(HOLD_S)


class _Tail:
    """The last TAIL_CHARS characters of a text built from lines or streamed pieces."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._chars = 0

    def add(self, text: str, *, continues: bool = False) -> None:
        piece = text if continues or not self._parts else "\n" + text
        self._parts.append(piece)
        self._chars += len(piece)
        while self._chars > TAIL_CHARS and len(self._parts) > 1:
            self._chars -= len(self._parts.pop(0))

    def text(self) -> str:
        return "".join(self._parts).lstrip("\n")[-TAIL_CHARS:]


def _exit_signal(text: str) -> bool | None:
    """The last `EXIT_SIGNAL: true|false` line of what the agent said (None if none)."""
    found = None
    for match in _EXIT_SIGNAL.finditer(text):
        found = match.group(1).lower() == "true"
    return found


class _Framer:
    """One output stream's events as `agent.output` frames.

    - The first LINE_EVENTS events of a stream are a frame each: an event of the CLI (a JSON
      event: a message, a tool call or result, a streamed piece of text) or a plain-text
      line (the command adapter's output, stderr, a line that is not the CLI's JSON). Which
      lines a pipe read happened to bring together never matters.
    - After that, consecutive events of one kind (and tool) are held and joined (lines by
      newlines, streamed pieces as they are) into frames of at most COALESCE_CHARS, sent
      when the next one would not fit, when another kind comes, when the held text is
      HOLD_S old (`flush_if_older`: the live view and the editors still see it as it
      happens), or at the end. A tool call is always a frame of its own. An agent that
      prints hundreds of megabytes, or tens of thousands of tiny streamed pieces, gives a
      few thousand frames.
    - A frame carries the beginning of its text (EXCERPT_CHARS at most), its length
      (`chars`) and where its raw output begins in the log (`log_offset`; for joined
      events, where the first one begins): the log holds the rest.

    Memory: at most EXCERPT_CHARS characters held.
    """

    def __init__(self, send: Callable[[dict[str, Any]], object]) -> None:
        self._send = send
        self._events = 0  # events framed one by one
        self._held = 0  # events held to be joined
        self._held_chars = 0  # of the held text, joined
        self._held_excerpt = ""  # the beginning of that text
        self._held_offset = 0
        self._held_since = 0.0
        self._held_kind: tuple[OutputKind, str | None] = ("text", None)

    def add(self, event: AgentEvent, offset: int) -> None:
        """Frame `event`, whose raw output begins at `offset` of the log."""
        if (self._events >= LINE_EVENTS and event.kind != "tool_use"
                and len(event.content) <= COALESCE_CHARS):
            self._hold(event, offset)
            return
        self._events += 1
        self.flush()
        self._send(output_meta(event.kind, event.content, event.tool, len(event.content),
                               offset, delta=event.delta))

    def _hold(self, event: AgentEvent, offset: int) -> None:
        kind = (event.kind, event.tool)
        joiner = "" if event.delta else "\n"
        if self._held and (kind != self._held_kind or self._held_chars + len(joiner)
                           + len(event.content) > COALESCE_CHARS):
            self.flush()
        if self._held:
            self._held_chars += len(joiner)
            if len(self._held_excerpt) < EXCERPT_CHARS:
                self._held_excerpt = (self._held_excerpt + joiner
                                      + event.content[:EXCERPT_CHARS])[:EXCERPT_CHARS]
        else:
            self._held_kind = kind
            self._held_offset = offset
            self._held_since = time.monotonic()
            self._held_excerpt = event.content[:EXCERPT_CHARS]
        self._held += 1
        self._held_chars += len(event.content)

    def flush_if_older(self, age_s: float) -> None:
        """Send the held text if it has waited `age_s` or longer."""
        if self._held and time.monotonic() - self._held_since >= age_s:
            self.flush()

    def flush(self) -> None:
        """Send the held text, if any, as one frame."""
        if self._held:
            kind, tool = self._held_kind
            self._send(output_meta(kind, self._held_excerpt, tool, self._held_chars,
                                   self._held_offset))
            self._held = self._held_chars = 0
            self._held_excerpt = ""

"""`agent.output` events depend on what the agent printed, never on how the pipe delivered it.

A pipe hands the runner whatever has arrived: two lines the agent printed a moment apart come
in one read on a busy machine and in two on an idle one. Distinct events of the CLI (two
opencode text parts, say) must stay two events either way; this once made
test_server.py::test_one_server_per_run_and_gone_afterwards flaky.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from ralph.agents import runner
from ralph.agents.runner import EVENT_CHARS, LINE_EVENTS, MAX_LINE_BYTES, _Lines, run_agent
from ralph.config import parse_config
from ralph.proc import ProcessResult

RECORDED = Path(__file__).parent / "recorded"
Chunker = Callable[[bytes], Iterator[bytes]]


def whole(data: bytes) -> Iterator[bytes]:
    if data:
        yield data


def by_line(data: bytes) -> Iterator[bytes]:
    yield from data.splitlines(keepends=True)


def by_byte(data: bytes) -> Iterator[bytes]:
    for i in range(len(data)):
        yield data[i:i + 1]


def at_random(data: bytes) -> Iterator[bytes]:
    rng = random.Random(len(data))
    i = 0
    while i < len(data):
        size = rng.choice((1, 7, 100, 4096, 65536))
        yield data[i:i + size]
        i += size


async def frames(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, adapter: str,
                 chunks: Sequence[tuple[str, bytes]]) -> list[dict[str, Any]]:
    """The agent.output metas of a run whose agent printed `chunks` in this order (stream,
    bytes), each as one pipe read: no process, so nothing depends on timing."""

    async def fake_run_process(argv: list[str], *, on_output: Any, **_: Any) -> ProcessResult:
        for stream, chunk in chunks:
            on_output(stream, chunk)
        return ProcessResult(argv=list(argv), cwd=str(tmp_path), exit_code=0,
                             started_at="2026-01-01T00:00:00.000Z",
                             finished_at="2026-01-01T00:00:01.000Z", duration_s=1.0,
                             timed_out=False, cancelled=False, pid=1,
                             output_bytes=sum(len(c) for _, c in chunks), tail=b"")

    monkeypatch.setattr(runner, "run_process", fake_run_process)
    config = parse_config(f'[agents.a]\nadapter = "{adapter}"\n'
                          f"argv = {json.dumps([sys.executable, '-c', 'pass'])}\n")
    events: list[tuple[str, dict[str, Any]]] = []
    await run_agent(config.agent("a"), "prompt", cwd=tmp_path, prompt_file=tmp_path / "p.md",
                    log_path=tmp_path / "log", emit=lambda t, m: events.append((t, m)))
    return [meta for topic, meta in events if topic == "agent.output"]


def opencode_text(text: str) -> bytes:
    return (json.dumps({"type": "text", "sessionID": "s", "part": {"text": text}}) + "\n"
            ).encode()


async def test_two_opencode_texts_stay_two_events_when_they_arrive_together(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The flaky server test's output, in one read (busy machine) and in two (idle one)."""
    first, second = opencode_text("proj - Iteration #1 via http://127.0.0.1:1"), \
        opencode_text("EXIT_SIGNAL: true")
    together = await frames(monkeypatch, tmp_path, "opencode", [("stdout", first + second)])
    apart = await frames(monkeypatch, tmp_path, "opencode",
                         [("stdout", first), ("stdout", second)])
    expected = [{"kind": "text", "content": "proj - Iteration #1 via http://127.0.0.1:1",
                 "tool": None},
                {"kind": "text", "content": "EXIT_SIGNAL: true", "tool": None}]
    assert together == apart == expected


CASES = [f"{cli}-{run}" for cli in ("codex", "claude", "gemini", "opencode")
         for run in ("success", "shell", "429")]


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("chunker", [by_line, by_byte, at_random])
async def test_recorded_cli_output_gives_the_same_events_however_it_is_read(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str, chunker: Chunker) -> None:
    """Each CLI's recorded output, stdout then stderr (gemini's streams its answer in delta
    pieces and prints warnings on stderr), read whole and in pieces."""
    cli = json.loads((RECORDED / f"{name}.json").read_text())["cli"]
    streams = [(s, (RECORDED / f"{name}.{s}").read_bytes()) for s in ("stdout", "stderr")]
    expected = await frames(monkeypatch, tmp_path, cli,
                            [(s, c) for s, data in streams for c in whole(data)])
    assert expected
    got = await frames(monkeypatch, tmp_path, cli,
                       [(s, c) for s, data in streams for c in chunker(data)])
    assert got == expected


async def test_every_json_event_is_an_event_of_its_own(monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    """claude's text blocks and tool calls: one frame each, never joined into one."""
    lines = [{"type": "assistant", "message": {"content": [{"type": "text", "text": "one"},
                                                           {"type": "text", "text": "two"}]}},
             {"type": "assistant", "message": {"content": [{"type": "text", "text": "three"}]}},
             {"type": "assistant", "message": {"content": [
                 {"type": "tool_use", "name": "Bash", "input": {"command": "ls"}}]}},
             {"type": "assistant", "message": {"content": [
                 {"type": "tool_use", "name": "Bash", "input": {"command": "pwd"}}]}}]
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    got = await frames(monkeypatch, tmp_path, "claude", [("stdout", data)])
    assert [(f["kind"], f["content"]) for f in got] == [
        ("text", "one"), ("text", "two"), ("text", "three"),
        ("tool_use", '{"command":"ls"}'), ("tool_use", '{"command":"pwd"}')]


def plain_output() -> bytes:
    """A chatty plain-text agent: more lines than LINE_EVENTS, short ones and long ones."""
    lines = [f"line {i} " + "x" * (i % 300) for i in range(LINE_EVENTS + 5000)]
    lines[LINE_EVENTS + 10] = "y" * (3 * EVENT_CHARS + 5)  # one line longer than an event
    lines[LINE_EVENTS + 20] = ""
    return ("\n".join(lines) + "\nno newline at the end").encode()


@pytest.mark.parametrize("chunker", [by_line, at_random])
async def test_plain_text_gives_the_same_events_however_it_is_read(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, chunker: Chunker) -> None:
    data = plain_output()
    expected = await frames(monkeypatch, tmp_path, "command", [("stdout", data)])
    got = await frames(monkeypatch, tmp_path, "command", [("stdout", c) for c in chunker(data)])
    assert got == expected


async def test_plain_text_lines_are_events_then_blocks(monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    """A stream's first LINE_EVENTS lines are an event each (shown as they come); after that
    lines are joined into events of at most EVENT_CHARS, so megabytes stay few events."""
    data = plain_output()
    got = await frames(monkeypatch, tmp_path, "command", [("stdout", data)])
    lines = data.decode().split("\n")
    assert [f["content"] for f in got[:LINE_EVENTS]] == lines[:LINE_EVENTS]
    assert all(len(f["content"]) <= EVENT_CHARS and f["kind"] == "text" for f in got)
    rest = got[LINE_EVENTS:]
    assert len(rest) < 5000 // 20  # about 40 of these lines fit in an event
    assert [len(f["content"]) for f in rest[:6]].count(EVENT_CHARS) == 3  # the long line
    # Nothing lost, nothing added: the lines come back joined by newlines (the long line's
    # pieces are consecutive events and join without one).
    pieces = [f["content"] for f in rest]
    long_at = pieces.index("y" * EVENT_CHARS)
    rebuilt = "\n".join([*pieces[:long_at], "".join(pieces[long_at:long_at + 4]),
                         *pieces[long_at + 4:]])
    assert rebuilt == "\n".join(lines[LINE_EVENTS:])


_ONE_WRITE = """
import json, os, sys
sys.stdin.read()
lines = [{"type": "text", "sessionID": "s", "part": {"text": "first"}},
         {"type": "text", "sessionID": "s", "part": {"text": "EXIT_SIGNAL: true"}}]
os.write(1, "".join(json.dumps(line) + "\\n" for line in lines).encode())  # one read for us
"""


async def test_two_lines_in_one_write_through_a_real_pipe(tmp_path: Path) -> None:
    """What a busy machine does to the stand-in opencode, done on purpose: both JSON lines
    in one write() (smaller than PIPE_BUF, so they reach the runner in one read)."""
    script = tmp_path / "opencode.py"
    script.write_text(_ONE_WRITE)
    config = parse_config(f"[agents.opencode]\nargv = {json.dumps([sys.executable, str(script)])}"
                          "\n")
    events: list[tuple[str, dict[str, Any]]] = []
    outcome = await run_agent(config.agent("opencode"), "prompt", cwd=tmp_path,
                              prompt_file=tmp_path / "p.md", log_path=tmp_path / "log",
                              emit=lambda topic, meta: events.append((topic, meta)))
    assert outcome.status == "ok" and outcome.exit_signal is True
    assert [m["content"] for t, m in events if t == "agent.output"] == ["first",
                                                                        "EXIT_SIGNAL: true"]


def test_a_line_longer_than_the_limit_is_cut_alike_however_it_arrives() -> None:
    line = b"x" * (MAX_LINE_BYTES + 70_000) + b"\n"
    whole = _Lines().feed(line)
    pieces = _Lines()
    chunked = [text for i in range(0, len(line), 65_536)
               for text in pieces.feed(line[i:i + 65_536])]
    assert [len(p) for p in whole] == [len(p) for p in chunked] == [MAX_LINE_BYTES, 70_000]

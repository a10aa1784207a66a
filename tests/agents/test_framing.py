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
from ralph.agents.base import AgentEvent
from ralph.agents.runner import (
    COALESCE_CHARS,
    EXCERPT_CHARS,
    LINE_EVENTS,
    MAX_LINE_BYTES,
    _Framer,
    _Lines,
    run_agent,
)
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
                 "tool": None, "chars": 42, "log_offset": 0},
                {"kind": "text", "content": "EXIT_SIGNAL: true", "tool": None, "chars": 17,
                 "log_offset": len(first)}]
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
    lines[LINE_EVENTS + 10] = "y" * (COALESCE_CHARS + 5)  # longer than a joined event
    lines[LINE_EVENTS + 20] = ""
    lines[7] = "z" * (EXCERPT_CHARS + 1)  # longer than an excerpt
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
    lines are joined into events of at most COALESCE_CHARS, so megabytes stay few events.
    Each carries the beginning of its text; `chars` and `log_offset` find all of it in the
    log (here the log is stdout alone)."""
    data = plain_output()
    got = await frames(monkeypatch, tmp_path, "command", [("stdout", data)])
    lines = data.decode().split("\n")
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    assert [(f["content"], f["chars"], f["log_offset"]) for f in got[:LINE_EVENTS]] == [
        (line[:EXCERPT_CHARS], len(line), start)
        for line, start in zip(lines[:LINE_EVENTS], starts, strict=False)]
    assert got[7]["chars"] == EXCERPT_CHARS + 1 and len(got[7]["content"]) == EXCERPT_CHARS
    assert all(len(f["content"]) <= EXCERPT_CHARS and f["kind"] == "text" for f in got)
    rest = got[LINE_EVENTS:]
    assert len(rest) < 5000 // 200  # about 400 of these lines fit in an event
    assert all(f["chars"] <= COALESCE_CHARS for f in rest if f["chars"] != COALESCE_CHARS + 5)
    # Nothing lost, nothing added: each event's text, read from the log where it says, gives
    # back the lines joined by newlines.
    texts = [data[f["log_offset"]:].decode()[:f["chars"]] for f in rest]
    assert all(f["content"] == text[:EXCERPT_CHARS] for f, text in zip(rest, texts,
                                                                        strict=True))
    assert "\n".join(texts) == "\n".join(lines[LINE_EVENTS:])
    assert "y" * (COALESCE_CHARS + 5) in texts  # the long line is an event of its own


def interleave(outputs: dict[str, bytes], seed: int) -> list[tuple[str, bytes]]:
    """stdout's and stderr's bytes in pipe reads of random sizes, in a random order of the
    two streams: what the runner and the log see."""
    rng = random.Random(seed)
    left = {stream: memoryview(data) for stream, data in outputs.items()}
    chunks: list[tuple[str, bytes]] = []
    while any(left.values()):
        stream = rng.choice([s for s, rest in left.items() if rest])
        size = rng.choice((1, 3, 50, 700, 5000))
        chunks.append((stream, bytes(left[stream][:size])))
        left[stream] = left[stream][size:]
    return chunks


def log_offsets(chunks: list[tuple[str, bytes]], stream: str) -> list[int]:
    """Where each byte of `stream` is in the log: the oracle for `log_offset`."""
    where: list[int] = []
    at = 0
    for name, chunk in chunks:
        if name == stream:
            where.extend(range(at, at + len(chunk)))
        at += len(chunk)
    return where


@pytest.mark.parametrize("seed", range(4))
async def test_log_offsets_with_stderr_interleaved(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path, seed: int) -> None:
    """Lines of both streams cut into reads of any size and logged in arrival order: each
    event's `log_offset` is where its line's first byte went, even when its line came in
    pieces with the other stream's output logged between them."""
    rng = random.Random(seed)
    outputs = {stream: "".join(f"{stream} {i} {'é' * rng.randrange(0, 60)}\n"
                               for i in range(300)).encode() for stream in ("stdout", "stderr")}
    chunks = interleave(outputs, seed)
    log = b"".join(chunk for _, chunk in chunks)
    got = await frames(monkeypatch, tmp_path, "command", chunks)
    for stream, data in outputs.items():
        where = log_offsets(chunks, stream)
        starts = [0] + [i + 1 for i, byte in enumerate(data[:-1]) if byte == ord("\n")]
        lines = data.decode().split("\n")[:-1]
        mine = [f for f in got if f["content"].startswith(stream)]
        assert [(f["content"], f["chars"], f["log_offset"]) for f in mine] == [
            (line, len(line), where[start]) for line, start in zip(lines, starts, strict=True)]
        assert all(log[f["log_offset"]] == ord(stream[0]) for f in mine)
    # Whole reads give the same events: only the offsets of the other stream's lines move.
    whole_reads = await frames(monkeypatch, tmp_path, "command", list(outputs.items()))
    assert sorted(f["content"] for f in whole_reads) == sorted(f["content"] for f in got)


_BIG_TOOL_RESULT = "\n".join(f"{i:06d} " + "r" * 90 for i in range(600))  # ~58 KB of text


def claude_lines() -> list[dict[str, Any]]:
    return [{"type": "system", "subtype": "init", "session_id": "s", "model": "m"},
            {"type": "assistant", "message": {"content": [
                {"type": "text", "text": "Reading the file."},
                {"type": "tool_use", "name": "Read", "input": {"path": "big.txt"}}]}},
            {"type": "user", "message": {"content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": _BIG_TOOL_RESULT}]}},
            {"type": "result", "subtype": "success", "is_error": False, "result": "ok",
             "session_id": "s"}]


async def test_json_events_carry_an_excerpt_and_point_at_their_line(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A claude tool result of 58 KB is one event carrying its first EXCERPT_CHARS; every
    event points at the start of the JSON line it came from (two blocks of one line: the
    same line)."""
    encoded = [(json.dumps(line) + "\n").encode() for line in claude_lines()]
    data = b"".join(encoded)
    got = await frames(monkeypatch, tmp_path, "claude", [("stdout", c) for c in at_random(data)])
    line_at = [sum(len(e) for e in encoded[:i]) for i in range(len(encoded))]
    assert [(f["kind"], f["tool"], f["log_offset"]) for f in got] == [
        ("text", None, line_at[1]), ("tool_use", "Read", line_at[1]),
        ("tool_result", "t1", line_at[2])]
    result = got[2]
    assert result["content"] == _BIG_TOOL_RESULT[:EXCERPT_CHARS]
    assert result["chars"] == len(_BIG_TOOL_RESULT)
    assert data[result["log_offset"]:].startswith(b'{"type": "user"')


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
    """Each piece starts where its first byte is in the log (here after 5 bytes logged
    before the run)."""
    line = b"x" * (MAX_LINE_BYTES + 70_000) + b"\n"
    whole = _Lines().feed(line, 5)
    pieces = _Lines()
    chunked = [text for i in range(0, len(line), 65_536)
               for text in pieces.feed(line[i:i + 65_536], 5 + i)]
    assert [(len(p), at) for p, at in whole] == [(len(p), at) for p, at in chunked] == [
        (MAX_LINE_BYTES, 5), (70_000, 5 + MAX_LINE_BYTES)]


_BOTH_STREAMS = """
import os, sys
sys.stdin.read()
for i in range(200):
    os.write(1 if i % 3 else 2, f"line {i} {'w' * (i * 7)}\\n".encode())
os.write(1, b"long " + b"L" * 5000 + b"\\n")
os.write(2, b"no newline at the end")
"""


async def test_log_offsets_in_a_real_log(tmp_path: Path) -> None:
    """A real process writing to both pipes, and a log that already held something: the log
    file at each event's `log_offset` holds that event's line. (Each line below 4 KiB is one
    write, which a pipe never splits; the long line may come in pieces, with stderr logged
    between them: only its start is checked.)"""
    script = tmp_path / "both.py"
    script.write_text(_BOTH_STREAMS)
    log_path = tmp_path / "agent.log"
    log_path.write_bytes(b"an earlier run\n")
    config = parse_config(f"[agents.a]\nargv = {json.dumps([sys.executable, str(script)])}\n")
    events: list[tuple[str, dict[str, Any]]] = []
    outcome = await run_agent(config.agent("a"), "prompt", cwd=tmp_path,
                              prompt_file=tmp_path / "p.md", log_path=log_path,
                              emit=lambda topic, meta: events.append((topic, meta)))
    assert outcome.status == "ok"
    log = log_path.read_bytes()
    outputs = {meta["content"][:9]: meta for topic, meta in events if topic == "agent.output"}
    expected = [f"line {i} {'w' * (i * 7)}" for i in range(200)] + ["no newline at the end"]
    assert len(outputs) == len(expected) + 1
    for line in expected:
        meta = outputs[line[:9]]
        text = log[meta["log_offset"]:meta["log_offset"] + len(line.encode())].decode()
        assert (meta["content"], meta["chars"], text) == (line[:EXCERPT_CHARS], len(line), line)
    assert min(meta["log_offset"] for meta in outputs.values()) == len(b"an earlier run\n")
    long = outputs["long LLLL"]
    assert (long["content"], long["chars"]) == (("long " + "L" * 5000)[:EXCERPT_CHARS], 5005)
    assert log[long["log_offset"]:long["log_offset"] + 5] == b"long "


# -- after LINE_EVENTS: held, joined by kind, and sent within HOLD_S ----------------------------


def framer() -> tuple[_Framer, list[dict[str, Any]]]:
    sent: list[dict[str, Any]] = []
    return _Framer(sent.append), sent


def past_line_events(f: _Framer, sent: list[dict[str, Any]]) -> None:
    """Frame LINE_EVENTS plain lines (one frame each), so that what comes next is held."""
    for i in range(LINE_EVENTS):
        f.add(AgentEvent("text", f"line {i}", said=False), i)
    assert len(sent) == LINE_EVENTS
    sent.clear()


def test_framer_never_holds_a_tool_call_and_never_mixes_kinds() -> None:
    f, sent = framer()
    past_line_events(f, sent)
    f.add(AgentEvent("text", "a"), 1)
    f.add(AgentEvent("text", "b"), 2)
    assert sent == []  # held
    f.add(AgentEvent("tool_use", '{"command": "ls"}', "Bash"), 3)
    # the held text goes first, then the tool call as a frame of its own, at once
    assert [(m["kind"], m["content"], m["tool"]) for m in sent] == [
        ("text", "a\nb", None), ("tool_use", '{"command": "ls"}', "Bash")]
    f.add(AgentEvent("tool_use", '{"command": "pwd"}', "Bash"), 4)
    assert len(sent) == 3 and sent[-1]["content"] == '{"command": "pwd"}'  # never joined
    sent.clear()
    for kind, content, offset in [("text", "t1", 5), ("reasoning", "r1", 6), ("reasoning", "r2", 7),
                                  ("text", "t2", 8), ("tool_result", "x", 9)]:
        f.add(AgentEvent(kind, content), offset)  # type: ignore[arg-type]
    f.flush()
    assert [(m["kind"], m["content"], m["log_offset"]) for m in sent] == [
        ("text", "t1", 5), ("reasoning", "r1\nr2", 6), ("text", "t2", 8),
        ("tool_result", "x", 9)]
    f.add(AgentEvent("tool_result", "from Read", "Read"), 10)
    f.add(AgentEvent("tool_result", "from Bash", "Bash"), 11)
    f.flush()
    assert [(m["content"], m["tool"]) for m in sent[4:]] == [("from Read", "Read"),
                                                             ("from Bash", "Bash")]


def test_framer_joins_cli_text_events_pieces_as_they_are_lines_by_newlines() -> None:
    f, sent = framer()
    past_line_events(f, sent)
    for piece in ("Hel", "lo, ", "world"):  # a CLI's streamed pieces (said, JSON events)
        f.add(AgentEvent("text", piece, delta=True), 100)
    assert sent == []
    f.flush()
    assert [(m["content"], m["chars"], m["log_offset"]) for m in sent] == [
        ("Hello, world", 12, 100)]
    sent.clear()
    for i, text in enumerate(("one", "two", "three")):  # whole CLI messages: lines
        f.add(AgentEvent("text", text), 200 + i)
    f.flush()
    assert [(m["content"], m["chars"], m["log_offset"]) for m in sent] == [
        ("one\ntwo\nthree", 13, 200)]
    f.flush()
    assert len(sent) == 1  # nothing held: nothing sent


def test_framer_flush_if_older_sends_what_is_held() -> None:
    f, sent = framer()
    f.flush_if_older(0)
    assert sent == []  # nothing held
    past_line_events(f, sent)
    f.add(AgentEvent("text", "held", said=False), 7)
    f.flush_if_older(3600)
    assert sent == []  # not that old
    f.flush_if_older(0)
    assert [(m["content"], m["chars"], m["log_offset"]) for m in sent] == [("held", 4, 7)]
    f.flush_if_older(0)
    assert len(sent) == 1  # sent once
    f.add(AgentEvent("text", "next", said=False), 12)
    f.flush()
    assert [m["content"] for m in sent] == ["held", "next"]


def test_framer_chars_count_the_joined_text_and_the_excerpt_is_bounded() -> None:
    f, sent = framer()
    past_line_events(f, sent)
    lines = [f"{i:03d} " + "x" * 296 for i in range(20)]  # 300 characters each
    for i, line in enumerate(lines):
        f.add(AgentEvent("text", line, said=False), 1000 + i * 301)
    f.flush()
    joined = "\n".join(lines)
    assert len(sent) == 1
    assert sent[0]["chars"] == len(joined) == 20 * 300 + 19
    assert sent[0]["content"] == joined[:EXCERPT_CHARS]
    assert len(sent[0]["content"]) == EXCERPT_CHARS
    sent.clear()
    pieces = ["p" * 700, "q" * 700, "r" * 5]
    for piece in pieces:
        f.add(AgentEvent("text", piece, delta=True), 0)
    f.flush()
    assert (sent[0]["chars"], sent[0]["content"]) == (1405, ("p" * 700 + "q" * 700)[:EXCERPT_CHARS])


def gemini_message(text: str, *, delta: bool = True) -> bytes:
    return (json.dumps({"type": "message", "role": "assistant", "content": text,
                        "delta": delta}) + "\n").encode()


async def test_tiny_cli_events_after_line_events_are_joined(monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    """gemini streaming thousands of tiny pieces: the first LINE_EVENTS are a frame each,
    the rest are joined (without a separator) into few frames; a tool call still comes
    alone and in its place."""
    data = b"".join(gemini_message(f"<{i}>") for i in range(LINE_EVENTS + 300))
    tool = (json.dumps({"type": "tool_use", "tool_name": "read_file", "tool_id": "t1",
                        "parameters": {"file_path": "a.py"}}) + "\n").encode()
    after = b"".join(gemini_message(f"[{i}]") for i in range(50))
    got = await frames(monkeypatch, tmp_path, "gemini",
                       [("stdout", c) for c in at_random(data + tool + after)])
    assert [f["content"] for f in got[:LINE_EVENTS]] == [f"<{i}>" for i in range(LINE_EVENTS)]
    rest = got[LINE_EVENTS:]
    assert [f["kind"] for f in rest] == ["text", "tool_use", "text"]
    joined = "".join(f"<{i}>" for i in range(LINE_EVENTS, LINE_EVENTS + 300))
    assert (rest[0]["content"], rest[0]["chars"]) == (joined[:EXCERPT_CHARS], len(joined))
    assert rest[1]["tool"] == "read_file"
    assert rest[2]["content"] == "".join(f"[{i}]" for i in range(50))


_LATE = """
import os, sys, time
sys.stdin.read()
go = sys.argv[1]
for i in range(1005):
    print(f"line {i}")
sys.stdout.flush()
while not os.path.exists(go):
    time.sleep(0.02)
print("late", flush=True)
"""


async def test_held_output_is_sent_while_the_agent_still_runs(tmp_path: Path) -> None:
    """An agent past its LINE_EVENTS-th line that then waits: what it printed is held to be
    joined, and sent within HOLD_S, not when the agent ends. Here the agent waits for a file
    that the test creates only once it has seen line 1001 (held): without the flush by age
    the agent would wait until its timeout."""
    script = tmp_path / "late.py"
    script.write_text(_LATE)
    go = tmp_path / "go"
    config = parse_config(f"[agents.a]\nargv = "
                          f"{json.dumps([sys.executable, str(script), str(go)])}\n")
    outputs: list[dict[str, Any]] = []

    def emit(topic: str, meta: dict[str, Any]) -> None:
        if topic == "agent.output":
            outputs.append(meta)
            if "1001" in meta["content"]:
                go.touch()

    outcome = await run_agent(config.agent("a"), "prompt", cwd=tmp_path,
                              prompt_file=tmp_path / "p.md", log_path=tmp_path / "log",
                              emit=emit, timeout_s=20)
    assert outcome.status == "ok", outcome.message
    assert go.exists()
    assert [m["content"] for m in outputs[:LINE_EVENTS]] == [f"line {i}"
                                                             for i in range(LINE_EVENTS)]
    rest = [m["content"] for m in outputs[LINE_EVENTS:]]
    assert "\n".join(rest) == "\n".join([f"line {i}" for i in range(LINE_EVENTS, 1005)]
                                        + ["late"])
    assert rest[-1] == "late"  # printed after `go`: a frame of its own

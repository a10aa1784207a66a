"""`ralph xs ...`: the xs CLI's command forms over Ralph's store."""

from __future__ import annotations

import hashlib
import json
import os
import queue
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import ralph
from ralph.notes import list_notes
from ralph.store import Store
from tests.cli.helpers import RALPH, TIMEOUT, Cli, assert_error, json_lines, sri

XS_KEYS = ["topic", "id", "hash", "meta", "ttl"]
_ID = re.compile(r"[0-9a-z]{25}")
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")
ABSENT_ID = "0" * 25  # a well-formed id no frame has: it sorts before every real one


def xs_frame(value: Any, *, keys: list[str] = XS_KEYS) -> dict[str, Any]:
    assert isinstance(value, dict), value
    assert list(value) == keys, value
    assert _ID.fullmatch(value["id"]), value
    return value


def append(cli: Cli, store: Path | str, topic: str, *args: str,
           content: bytes = b"") -> dict[str, Any]:
    result = cli("xs", "append", str(store), topic, *args, stdin=content)
    assert result.code == 0, result
    assert result.err == ""
    assert not result.out.endswith("\n"), result.out
    return xs_frame(json.loads(result.out))


def cat(cli: Cli, store: Path | str, *args: str, keys: list[str] = XS_KEYS
        ) -> list[dict[str, Any]]:
    result = cli("xs", "cat", str(store), *args)
    assert result.code == 0, result
    assert result.err == ""
    assert result.out == "" or result.out.endswith("\n")
    return [xs_frame(frame, keys=keys) for frame in json_lines(result.out)]


def topics(frames: list[dict[str, Any]]) -> list[str]:
    return [frame["topic"] for frame in frames]


@pytest.fixture
def seeded(cli_store: Path) -> list[dict[str, Any]]:
    """Five frames: a.one, a.two, b.one, a.one, c.x (meta n = 1..5), as xs shows them."""
    with Store(cli_store) as store:
        frames = [store.append(topic, {"n": n})
                  for n, topic in enumerate(["a.one", "a.two", "b.one", "a.one", "c.x"], start=1)]
    return [{"topic": f.topic, "id": f.id, "hash": f.hash, "meta": f.meta, "ttl": "forever"}
            for f in frames]


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with one frame, for the tests that must not change it."""
    path = tmp_path_factory.mktemp("xs") / "store"
    with Store(path) as store:
        store.append("seed")
    return path


# -- append -----------------------------------------------------------------------------------


def test_append_prints_the_frame_as_xs_does(cli: Cli, cli_store: Path) -> None:
    result = cli("xs", "append", str(cli_store), "t.topic", "--meta", '{"k": [1, "v"]}',
                 stdin=b"hello\n")
    assert result.code == 0 and result.err == "", result
    assert result.out.startswith('{"topic":"t.topic","id":"')
    assert not result.out.endswith("\n")  # as xs: no newline after the one object
    frame = xs_frame(json.loads(result.out))
    assert frame["hash"] == sri(b"hello\n")
    assert frame["meta"] == {"k": [1, "v"]}
    assert frame["ttl"] == "forever"
    with Store(cli_store) as store:
        (stored,) = store.read()
    assert (stored.id, stored.topic, stored.hash, stored.stream) == (
        frame["id"], "t.topic", frame["hash"], "default")
    assert cat(cli, cli_store) == [frame]


def test_append_with_nothing_on_stdin_has_no_content(cli: Cli) -> None:
    frame = append(cli, "./store", "t")  # a relative path starting with `.`
    assert frame["hash"] is None
    assert frame["meta"] == {}
    assert Path("store/streams/default.jsonl").is_file()


def test_append_records_the_ttl_as_given_and_keeps_the_frame(cli: Cli, cli_store: Path) -> None:
    ttls = ["forever", "ephemeral", "time:1000", "time:0", "last:3", "head:1"]
    assert [append(cli, cli_store, "t", "--ttl", ttl)["ttl"] for ttl in ttls] == ttls
    # Ralph keeps every frame until `ralph store gc`, whatever its ttl.
    assert [frame["ttl"] for frame in cat(cli, cli_store)] == ["forever"] * len(ttls)


def test_a_sessions_topics_go_to_its_stream_and_others_to_the_default(
        cli: Cli, cli_store: Path) -> None:
    append(cli, cli_store, "ralph.demo.iteration", "--meta", '{"action": "start", "n": 1}')
    append(cli, cli_store, "ralph.demo.note", "--meta", '{"type": "learning"}', content=b"x")
    append(cli, cli_store, "other.topic")
    append(cli, cli_store, "ralph.demo")  # no session part after it
    with Store(cli_store) as store:
        streams = [(frame.topic, frame.stream) for frame in store.read()]
    assert streams == [("ralph.demo.iteration", "sessions/demo"),
                       ("ralph.demo.note", "sessions/demo"),
                       ("other.topic", "default"), ("ralph.demo", "default")]


def test_notes_appended_through_xs_are_ralphs_notes(cli: Cli, cli_store: Path) -> None:
    task = append(cli, cli_store, "ralph.demo.note", "--meta",
                  '{"type": "remaining", "iteration": 1}', content=b"Write the parser\n")
    started = append(cli, cli_store, "ralph.demo.note", "--meta", json.dumps(
        {"type": "in_progress", "iteration": 1, "resolves": [task["id"]], "extra": "kept"}),
        content=b"Parsing")
    append(cli, cli_store, "ralph.other.note", "--meta", '{"type": "blocked"}',
           content=b"Elsewhere")
    with Store(cli_store) as store:
        notes = list_notes(store, session="demo")
        assert [(n.id, n.type, n.iteration, n.text, n.resolves) for n in notes] == [
            (task["id"], "remaining", 1, "Write the parser\n", ()),
            (started["id"], "in_progress", 1, "Parsing", (task["id"],))]
        assert [n.id for n in list_notes(store, session="demo", open_only=True)] == [
            started["id"]]
    listed = cli("notes", "list", "--name", "demo", "--open", "--store", str(cli_store))
    assert listed.code == 0, listed
    assert "Parsing" in listed.out
    assert "Write the parser" not in listed.out  # settled by the in_progress note
    assert "Elsewhere" not in listed.out
    shown = cli("notes", "list", "--name", "demo", "--open", "--json", "--store", str(cli_store))
    assert [note["id"] for note in shown.json()] == [started["id"]]
    assert cat(cli, cli_store, "-T", "ralph.demo.note")[1]["meta"]["extra"] == "kept"


def test_stdin_piped_through_a_shell_and_read_back_by_cas(tmp_path: Path) -> None:
    data = bytes(range(256)) + b"\r\n\x00end"
    (tmp_path / "blob.bin").write_bytes(data)
    env = {**os.environ, "PY": sys.executable, "HASH": sri(data)}
    script = ('cat blob.bin | "$PY" -m ralph xs append ./store blob.topic > frame.json '
              '&& "$PY" -m ralph xs cas ./store "$HASH" > back.bin')
    proc = subprocess.run(["sh", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                          timeout=TIMEOUT, check=False, start_new_session=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == b""
    raw = (tmp_path / "frame.json").read_bytes()
    assert not raw.endswith(b"\n")
    frame = xs_frame(json.loads(raw))
    assert frame["hash"] == sri(data)
    assert (tmp_path / "back.bin").read_bytes() == data


def test_cas_takes_the_hash_as_frames_show_it_or_in_hex(cli: Cli, cli_store: Path) -> None:
    content = "naïve text\n".encode()
    frame = append(cli, cli_store, "t", content=content)
    assert frame["hash"].startswith("sha256-")
    for form in (frame["hash"], hashlib.sha256(content).hexdigest()):
        result = cli("xs", "cas", str(cli_store), form)
        assert result.code == 0 and result.err == "", result
        assert result.out == content.decode()


# -- cat --------------------------------------------------------------------------------------


def test_cat_prints_every_frame_in_append_order(cli: Cli, cli_store: Path,
                                                seeded: list[dict[str, Any]]) -> None:
    assert cat(cli, cli_store) == seeded
    # Ralph's own events are frames too: all show unless --topic filters.
    cli("notes", "add", "--type", "learning", "a note", "--store", str(cli_store))
    assert topics(cat(cli, cli_store))[-1] == "ralph.default.note"


def test_cat_filters_by_topic_patterns(cli: Cli, cli_store: Path,
                                       seeded: list[dict[str, Any]]) -> None:
    assert topics(cat(cli, cli_store, "-T", "a.one")) == ["a.one", "a.one"]
    assert topics(cat(cli, cli_store, "--topic", "a.*")) == ["a.one", "a.two", "a.one"]
    assert cat(cli, cli_store, "--topic=*") == seeded
    assert topics(cat(cli, cli_store, "-T", "b.one,c.*")) == ["b.one", "c.x"]
    assert topics(cat(cli, cli_store, "-T", "a.two", "-T", "c.x")) == ["a.two", "c.x"]
    assert topics(cat(cli, cli_store, "-Tb.one")) == ["b.one"]
    assert cat(cli, cli_store, "-T", "nothing.here") == []


def test_cat_after_from_last_and_limit(cli: Cli, cli_store: Path,
                                       seeded: list[dict[str, Any]]) -> None:
    second = seeded[1]["id"]
    assert cat(cli, cli_store, "--after", second) == seeded[2:]
    assert cat(cli, cli_store, "--after=" + second) == seeded[2:]
    assert cat(cli, cli_store, "-l", second) == seeded[2:]  # xs 0.8's --last-id
    assert cat(cli, cli_store, "--last-id", second) == seeded[2:]
    assert cat(cli, cli_store, "--from", second) == seeded[1:]
    assert cat(cli, cli_store, "--last", "2") == seeded[3:]
    assert cat(cli, cli_store, "--last", "0") == []
    assert cat(cli, cli_store, "--limit", "2") == seeded[:2]
    assert cat(cli, cli_store, "--limit", "0") == []
    assert cat(cli, cli_store, "--from", second, "--limit", "2") == seeded[1:3]
    assert cat(cli, cli_store, "--last", "3", "--limit", "1") == seeded[2:3]
    assert cat(cli, cli_store, "-T", "a.*", "--last", "2") == [seeded[1], seeded[3]]
    assert cat(cli, cli_store, "-a", seeded[-1]["id"]) == []
    # An id no frame has bounds by id order (ids are time-sortable, as in xs).
    assert cat(cli, cli_store, "--after", ABSENT_ID) == seeded
    assert cat(cli, cli_store, "--after", "z" * 25) == []


def test_dash_a_is_after_before_an_id_and_all_otherwise(cli: Cli, cli_store: Path,
                                                       seeded: list[dict[str, Any]]) -> None:
    first = seeded[0]["id"]
    assert cat(cli, cli_store, "-a", first) == seeded[1:]  # xs 0.9: --after ID
    assert json_lines(cli("xs", "cat", "-a", first, str(cli_store)).out) == seeded[1:]
    assert cat(cli, cli_store, "-a") == seeded  # xs 0.8: --all, a flag
    assert json_lines(cli("xs", "cat", "-a", str(cli_store)).out) == seeded
    assert cat(cli, cli_store, "--all", "-T", "a.two") == [seeded[1]]
    assert cat(cli, cli_store, "-fa", "--limit", "1") == seeded[:1]  # bundled: -f and --all
    assert cat(cli, cli_store, "-c", "0" * 25, "-a") == seeded  # a context: ignored


def test_new_and_tail_skip_the_history(cli: Cli, cli_store: Path,
                                       seeded: list[dict[str, Any]]) -> None:
    for flag in ("-n", "--new", "-t", "--tail"):
        assert cat(cli, cli_store, flag) == []


def test_with_timestamp_adds_the_frames_time(cli: Cli, cli_store: Path,
                                             seeded: list[dict[str, Any]]) -> None:
    frames = cat(cli, cli_store, "--with-timestamp", keys=[*XS_KEYS, "timestamp"])
    with Store(cli_store) as store:
        assert [frame["timestamp"] for frame in frames] == [f.ts for f in store.read()]
    assert all(_RFC3339.fullmatch(frame["timestamp"]) for frame in frames)


def test_follow_stops_by_itself_when_the_history_reaches_the_limit(
        cli: Cli, cli_store: Path, seeded: list[dict[str, Any]]) -> None:
    assert cat(cli, cli_store, "-f", "--limit", "2") == seeded[:2]


def test_follow_prints_a_threshold_then_live_frames_and_pulses(cli: Cli,
                                                               cli_store: Path) -> None:
    before = append(cli, cli_store, "t.live", "--meta", '{"n": 0}')
    append(cli, cli_store, "other")
    proc = subprocess.Popen([*RALPH, "xs", "cat", str(cli_store), "-f", "-p", "50",
                             "-T", "t.*"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    lines: queue.Queue[bytes] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(b"")

    reader = threading.Thread(target=read, daemon=True)
    reader.start()

    def next_frame() -> dict[str, Any]:
        line = lines.get(timeout=TIMEOUT)
        assert line.endswith(b"\n"), (line, proc.poll())
        return xs_frame(json.loads(line))

    try:
        assert next_frame() == before
        assert next_frame() | {"id": ""} == {"topic": "xs.threshold", "id": "", "hash": None,
                                             "meta": None, "ttl": "ephemeral"}
        pulse = next_frame()
        assert (pulse["topic"], pulse["meta"], pulse["ttl"]) == ("xs.pulse", None, "ephemeral")
        append(cli, cli_store, "other")  # not a t.* topic: not shown
        live = append(cli, cli_store, "t.live", "--meta", '{"n": 1}', content=b"live")
        frame = next_frame()
        while frame["topic"] == "xs.pulse":
            frame = next_frame()
        assert frame == live
    finally:
        proc.terminate()
        proc.wait(timeout=TIMEOUT)
        reader.join(timeout=TIMEOUT)
        assert proc.stderr is not None
        stderr = proc.stderr.read()
        proc.stderr.close()
        assert proc.stdout is not None
        proc.stdout.close()
    assert b"Traceback" not in stderr


# -- version, serve, last, head ---------------------------------------------------------------


def test_version_is_ralphs(cli: Cli, cli_store: Path) -> None:
    expected = {"version": ralph.__version__, "implementation": "ralph"}
    result = cli("xs", "version")
    assert result.code == 0 and result.err == "", result
    assert result.json() == expected
    cli_store.mkdir()
    assert cli("xs", "version", str(cli_store)).json() == expected


def test_serve_readies_the_store_and_returns(cli: Cli, cli_store: Path) -> None:
    result = cli("xs", "serve", str(cli_store), "--expose", ":3021")
    assert result.code == 0 and result.out == "", result
    assert result.err == (f"store ready at {cli_store} (Ralph's store is embedded: no server "
                          "runs; xs commands work on it directly)\n")
    assert (cli_store / "streams").is_dir()
    assert cat(cli, cli_store) == []


def test_last_and_head(cli: Cli, cli_store: Path, seeded: list[dict[str, Any]]) -> None:
    assert cat_out(cli, "last", str(cli_store)) == seeded[-1:]
    assert cat_out(cli, "last", str(cli_store), "2") == seeded[-2:]
    assert cat_out(cli, "last", str(cli_store), "a.one") == [seeded[3]]
    assert cat_out(cli, "last", str(cli_store), "a.*", "2") == [seeded[1], seeded[3]]
    assert cat_out(cli, "head", str(cli_store), "a.one") == [seeded[3]]
    assert cat_out(cli, "head", str(cli_store), "no.such") == []


def cat_out(cli: Cli, *args: str) -> list[dict[str, Any]]:
    result = cli("xs", *args)
    assert result.code == 0 and result.err == "", result
    return [xs_frame(frame) for frame in json_lines(result.out)]


# -- bad input ----------------------------------------------------------------------------------


BAD_INPUT: list[tuple[list[str], bytes, int, list[str]]] = [
    (["append", "STORE", "t", "--meta", "{nope"], b"", 2, ["meta", "not valid JSON"]),
    (["append", "STORE", "t", "--meta", "[1, 2]"], b"", 2, ["meta", "object", "array"]),
    (["append", "STORE", "t", "--meta", "42"], b"", 2, ["meta", "object", "number"]),
    (["append", "STORE", "1bad"], b"", 2, ["invalid topic", "1bad"]),
    (["append", "STORE", "a..b"], b"", 2, ["invalid topic"]),
    (["append", "STORE", "t", "--ttl", "sometimes"], b"", 2, ["ttl", "sometimes"]),
    (["append", "STORE", "t", "--ttl", "last:0"], b"", 2, ["ttl"]),
    (["append", "STORE", "ralph.demo.note"], b"text", 2, ["note", "type"]),
    (["append", "STORE", "ralph.demo.note", "--meta", '{"type": "done"}'], b"text", 2,
     ["note type", "done"]),
    (["append", "STORE", "ralph.demo.note", "--meta", '{"type": "completed"}'], b" \n", 2,
     ["note", "text"]),
    (["append", "STORE", "ralph.demo.note", "--meta", '{"type": "completed", "iteration": 0}'],
     b"text", 2, ["iteration"]),
    (["append", "STORE", "ralph.demo.note", "--meta", '{"type": "completed", "resolves": "x"}'],
     b"text", 2, ["resolves"]),
    (["append", "STORE", "ralph.-x.note", "--meta", '{"type": "completed"}'], b"text", 2,
     ["session"]),
    (["append", "STORE", "ralph.demo.note", "--meta",
      '{"type": "completed", "resolves": ["03hbe2npnvcqvbsm8h49y6giv"]}'], b"text", 1,
     ["no note", "03hbe2npnvcqvbsm8h49y6giv"]),
    (["append", "localhost:3021", "t"], b"", 2, ["store directory", "server address",
                                                 "localhost:3021"]),
    (["append", ":3021", "t"], b"", 2, ["server address", ":3021"]),
    (["append", "store", "t"], b"", 2, ["starting with / or .", "server address store"]),
    (["cat", "STORE", "--bogus"], b"", 2, ["no such option", "--bogus"]),
    (["cat", "STORE", "-x"], b"", 2, ["no such option", "-x"]),
    (["cat", "STORE", "-fx"], b"", 2, ["no such option", "-x"]),
    (["cat", "STORE", "--follow=yes"], b"", 2, ["--follow", "value"]),
    (["cat", "STORE", "--limit"], b"", 2, ["--limit", "requires an argument"]),
    (["cat", "STORE", "-T"], b"", 2, ["-T", "requires an argument"]),
    (["cat", "STORE", "--limit", "many"], b"", 2, ["--limit", "many"]),
    (["cat", "STORE", "--pulse", "0"], b"", 2, ["--pulse", "0"]),
    (["cat", "STORE", "--after", "nope"], b"", 2, ["--after", "nope", "frame id"]),
    (["cat", "STORE", "--from", "X" * 25], b"", 2, ["--from", "frame id"]),
    (["cat", "STORE", "-a", "nope"], b"", 2, ["unexpected extra argument", "nope", "-a"]),
    (["cat", "STORE", "-T", "a..b"], b"", 2, ["--topic", "invalid topic"]),
    (["cat", "STORE", "-T", "a,,b"], b"", 2, ["--topic", "topic"]),
    (["cat", "STORE", "--after", ABSENT_ID, "--from", ABSENT_ID], b"", 2, ["--after", "--from"]),
    (["cat"], b"", 2, ["missing argument", "STORE"]),
    (["cat", "host:3021"], b"", 2, ["server address", "host:3021"]),
    (["cat", "./missing"], b"", 1, ["no store at", "./missing"]),
    (["cas", "STORE", "sha256-nope"], b"", 2, ["invalid content hash", "sha256-nope"]),
    (["cas", "STORE", sri(b"never stored")], b"", 1, ["no content", sri(b"never stored")]),
    (["cas", "STORE", "ab" * 32], b"", 1, ["no content"]),
    (["cas", "./missing", sri(b"x")], b"", 1, ["no store at"]),
    (["version", "./missing"], b"", 1, ["no store at: ./missing"]),
    (["version", ":3021"], b"", 2, ["server address"]),
    (["serve", "127.0.0.1:3021"], b"", 2, ["server address"]),
    (["last", "STORE", "1bad"], b"", 2, ["invalid topic"]),
    (["last", "STORE", "0"], b"", 2, ["COUNT"]),
    (["head", "STORE"], b"", 2, ["missing argument", "TOPIC"]),
]


@pytest.mark.parametrize(("args", "stdin", "code", "words"), BAD_INPUT,
                         ids=[" ".join(case[0]) for case in BAD_INPUT])
def test_bad_input_is_one_line_and_an_exit_code(cli: Cli, shared_store: Path, args: list[str],
                                                stdin: bytes, code: int,
                                                words: list[str]) -> None:
    argv = [str(shared_store) if arg == "STORE" else arg for arg in args]
    result = cli("xs", *argv, stdin=stdin)
    assert_error(result, *words)
    assert result.code == code, result
    # Nothing was appended, and no store was made where there was none.
    assert (shared_store / "streams" / "default.jsonl").read_bytes().count(b"\n") == 1
    assert not (shared_store / "streams" / "sessions").exists()
    assert not Path("missing").exists()
    assert not Path("store").exists()

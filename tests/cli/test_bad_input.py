"""Bad input: one `error:` line on stderr naming the problem, nothing on stdout, a nonzero exit,
no traceback, and nothing already stored lost."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli.helpers import Cli, assert_error, run_ralph, sri

STORE = "<store>"  # replaced by the test's store path
UNKNOWN_ID = "03ha3zzzzzzzzzzzzzzzzzzzz"
UNKNOWN_HASH = sri(b"never stored")


@dataclass(frozen=True)
class Seeded:
    """A store with a few frames, and what it looked like before the bad command."""

    path: Path
    cat: str
    streams: dict[Path, bytes]
    hash: str

    def assert_intact(self, cli: Cli) -> None:
        listed = cli("store", "cat", "--store", str(self.path))
        assert listed.code == 0, listed
        assert listed.out == self.cat
        assert {p: p.read_bytes() for p in self.streams} == self.streams
        assert sorted((self.path / "streams").rglob("*.jsonl")) == sorted(self.streams)
        content = cli("store", "cas", self.hash, "--store", str(self.path))
        assert content.out == "kept content"


@pytest.fixture
def seeded(cli: Cli, cli_store: Path) -> Seeded:
    store = str(cli_store)
    first = cli("store", "append", "t", "--meta", '{"n": 1}', "--store", store,
                stdin=b"kept content")
    assert first.code == 0, first
    for args in (["t"], ["a.b", "--stream", "runs/r1"],
                 ["ralph.default.note", "--meta", '{"type": "learning"}', "--stream",
                  "sessions/default"]):
        assert cli("store", "append", *args, "--store", store).code == 0
    listed = cli("store", "cat", "--store", store)
    assert len(listed.frames()) == 4
    streams = {p: p.read_bytes() for p in (cli_store / "streams").rglob("*.jsonl")}
    return Seeded(cli_store, listed.out, streams, first.frames()[0]["hash"])


def _case(name: str, args: list[str], *words: str, stdin: bytes = b"") -> object:
    return pytest.param(args, words, stdin, id=name)


BAD_INPUT = [
    # topics
    _case("topic-starts-with-digit", ["store", "append", "1bad"], "invalid topic", "1bad"),
    _case("topic-double-dot", ["store", "append", "a..b"], "invalid topic", "a..b"),
    _case("topic-space", ["store", "append", "a b"], "invalid topic", "a b"),
    _case("topic-trailing-dot", ["store", "append", "a."], "invalid topic", "a."),
    _case("topic-slash", ["store", "append", "a/b"], "invalid topic", "a/b"),
    _case("topic-empty", ["store", "append", ""], "topic"),
    _case("topic-too-long", ["store", "append", "t" * 300], "topic", "255"),
    _case("topic-with-content", ["store", "append", "bad topic"], "invalid topic",
          stdin=b"content that must not be stored"),
    # meta
    _case("meta-not-json", ["store", "append", "t", "--meta", "{nope"], "meta", "JSON"),
    _case("meta-trailing-garbage", ["store", "append", "t", "--meta", '{"a": 1} x'],
          "meta", "JSON"),
    _case("meta-array", ["store", "append", "t", "--meta", "[1, 2]"], "meta", "object",
          "array"),
    _case("meta-number", ["store", "append", "t", "--meta", "42"], "meta", "object", "number"),
    _case("meta-string", ["store", "append", "t", "--meta", '"text"'], "meta", "object"),
    _case("meta-null", ["store", "append", "t", "--meta", "null"], "meta", "object"),
    _case("meta-empty", ["store", "append", "t", "--meta", ""], "meta"),
    # streams
    _case("stream-dotdot", ["store", "append", "t", "--stream", "../escape"],
          "invalid stream", "../escape"),
    _case("stream-absolute", ["store", "append", "t", "--stream", "/etc/x"],
          "invalid stream", "/etc/x"),
    _case("stream-space", ["store", "append", "t", "--stream", "a b"], "invalid stream"),
    _case("stream-trailing-slash", ["store", "append", "t", "--stream", "runs/"],
          "invalid stream"),
    _case("stream-empty", ["store", "append", "t", "--stream", ""], "stream"),
    _case("cat-bad-stream", ["store", "cat", "--stream", "../x"], "invalid stream"),
    # ids and hashes
    _case("get-unknown-id", ["store", "get", UNKNOWN_ID], "no frame", UNKNOWN_ID),
    _case("get-not-an-id", ["store", "get", "not-an-id"], "no frame", "not-an-id"),
    _case("cas-malformed", ["store", "cas", "sha256-abc"], "hash", "sha256-abc"),
    _case("cas-not-sri", ["store", "cas", "deadbeef"], "hash", "deadbeef"),
    _case("cas-other-algorithm", ["store", "cas", "md5-" + "A" * 22 + "=="], "hash", "md5-"),
    _case("cas-unknown-hash", ["store", "cas", UNKNOWN_HASH], "no content", UNKNOWN_HASH),
    # gc policies
    _case("gc-forever", ["store", "gc", "--policy", "t=forever"], "policy", "forever"),
    _case("gc-last-not-a-number", ["store", "gc", "--policy", "t=last:x"], "policy", "last:x"),
    _case("gc-last-negative", ["store", "gc", "--policy", "t=last:-1"], "policy", "last:-1"),
    _case("gc-time-empty", ["store", "gc", "--policy", "t=time:"], "policy", "time:"),
    _case("gc-missing-equals", ["store", "gc", "--policy", "t"], "retention rule", "'t'"),
    _case("gc-missing-equals-dry-run", ["store", "gc", "--dry-run", "--policy", "last:2"],
          "retention rule"),
    _case("gc-bad-topic", ["store", "gc", "--policy", "1bad=last:2"], "topic", "1bad"),
    _case("gc-one-bad-of-two", ["store", "gc", "--policy", "t=last:1", "--policy", "u=never"],
          "policy", "never"),
    # last, cat
    _case("last-zero", ["store", "last", "t", "0"], "invalid value", "n"),
    _case("last-negative", ["store", "last", "t", "-2"], "n"),
    _case("last-not-a-number", ["store", "last", "t", "many"], "invalid value", "valid integer"),
    _case("last-bad-topic", ["store", "last", "1bad"], "invalid topic", "1bad"),
    _case("cat-bad-topic", ["store", "cat", "--topic", "a..b"], "invalid topic", "a..b"),
    _case("cat-bad-prefix", ["store", "cat", "--topic", "1a.*"], "invalid topic"),
    _case("cat-negative-after", ["store", "cat", "--after", "-1"], "--after"),
    _case("cat-limit-not-a-number", ["store", "cat", "--limit", "ten"], "--limit", "valid integer"),
    # usage
    _case("unknown-store-command", ["store", "frobnicate"], "no such command", "frobnicate"),
    _case("unknown-notes-command", ["notes", "frobnicate"], "no such command", "frobnicate"),
    _case("unknown-option", ["store", "cat", "--bogus"], "no such option", "--bogus"),
    _case("missing-id", ["store", "get"], "missing argument", "ID"),
    _case("missing-hash", ["store", "cas"], "missing argument", "HASH"),
    _case("missing-topic", ["store", "append"], "missing argument", "TOPIC"),
    _case("missing-last-topic", ["store", "last"], "missing argument", "TOPIC"),
    _case("extra-argument", ["store", "sync", "extra"], "unexpected extra argument", "extra"),
    _case("option-without-value", ["store", "append", "t", "--store", STORE, "--meta"],
          "--meta", "requires an argument"),
    # notes
    _case("note-bad-type", ["notes", "add", "--type", "bogus", "text"], "--type", "bogus"),
    _case("note-type-wrong-case", ["notes", "add", "--type", "Learning", "text"], "--type",
          "Learning"),
    _case("note-missing-type", ["notes", "add", "text"], "missing option", "--type"),
    _case("note-empty-text", ["notes", "add", "--type", "learning", ""], "text"),
    _case("note-blank-text", ["notes", "add", "--type", "learning", "  \n\t"], "text"),
    _case("note-missing-text", ["notes", "add", "--type", "learning"], "missing argument",
          "TEXT"),
    _case("note-name-with-dot", ["notes", "add", "--type", "learning", "x", "--name", "a.b"],
          "session", "a.b"),
    _case("note-name-with-space", ["notes", "add", "--type", "learning", "x", "--name", "a b"],
          "session", "a b"),
    _case("note-name-empty", ["notes", "add", "--type", "learning", "x", "--name", ""],
          "session"),
    _case("note-name-slash", ["notes", "add", "--type", "learning", "x", "--name", "../x"],
          "session", "../x"),
    _case("note-iteration-zero", ["notes", "add", "--type", "learning", "x", "--iteration",
                                  "0"], "--iteration"),
    _case("note-iteration-negative", ["notes", "add", "--type", "learning", "x",
                                      "--iteration", "-3"], "--iteration"),
    _case("note-iteration-not-a-number", ["notes", "add", "--type", "learning", "x",
                                          "--iteration", "one"], "--iteration", "valid integer"),
    _case("note-name-leading-dash", ["notes", "add", "--type", "learning", "x", "--name=-x"],
          "session", "-x"),
    _case("note-text-not-utf8", ["notes", "add", "--type", "learning", "bad \udcff"],
          "content is not valid text"),
    _case("note-iteration-too-big", ["notes", "add", "--type", "learning", "x",
                                     "--iteration", "99999999999999999999"], "--iteration"),
    _case("get-not-utf8", ["store", "get", "\udcff"], "no frame with id"),
    _case("gc-non-ascii-digit", ["store", "gc", "--policy", "t=last:\u00b2"], "policy"),
    _case("gc-last-too-big", ["store", "gc", "--policy", "t=last:99999999999999999999"],
          "policy", "at most"),
    _case("gc-time-too-big", ["store", "gc", "--policy", "t=time:999999999999999999999999"],
          "policy", "at most"),
    _case("cat-after-too-big", ["store", "cat", "--after", "99999999999999999999999"],
          "--after"),
    _case("last-too-big", ["store", "last", "t", "99999999999999999999"], "n"),
    _case("append-stream-under-a-stream-file", ["store", "append", "t", "--stream",
                                                "a.jsonl/b"], "stream", ".jsonl"),
    _case("append-stream-part-too-long", ["store", "append", "t", "--stream", "x" * 250],
          "stream", "249"),
    _case("notes-list-bad-type", ["notes", "list", "--type", "bogus"], "--type", "bogus"),
    _case("notes-list-bad-name", ["notes", "list", "--name", "a.b"], "session", "a.b"),
]


@pytest.mark.parametrize(("args", "words", "stdin"), BAD_INPUT)
def test_bad_input(cli: Cli, seeded: Seeded, args: list[str], words: tuple[str, ...],
                   stdin: bytes) -> None:
    if STORE in args:
        argv = [str(seeded.path) if arg == STORE else arg for arg in args]
    else:
        argv = [*args, "--store", str(seeded.path)]
    assert_error(cli(*argv, stdin=stdin), *words)
    seeded.assert_intact(cli)


@pytest.mark.parametrize(("args", "code"), [
    (["store", "append", "1bad"], 1),
    (["store", "append", "t", "--meta", "[1]"], 1),
    (["store", "cas", UNKNOWN_HASH], 1),
    (["store", "last", "t", "0"], 2),
    (["notes", "add", "--type", "nope", "x"], 2),
    (["store", "cat", "--after", "99999999999999999999999"], 2),
    (["store", "last", "t", "99999999999999999999"], 2),
    (["notes", "add", "--type", "learning", "x", "--iteration", "99999999999999999999"], 2),
    (["store", "gc", "--policy", "t=last:99999999999999999999"], 1),
])
def test_exit_codes(cli: Cli, seeded: Seeded, args: list[str], code: int) -> None:
    """1 for a failed operation, 2 for bad usage."""
    assert cli(*args, "--store", str(seeded.path)).code == code


@pytest.mark.parametrize("args", [
    ["store", "append", "a..b"],
    ["store", "append", "t", "--meta", "not json"],
    ["store", "get", UNKNOWN_ID],
    ["store", "cas", "sha256-abc"],
    ["store", "gc", "--policy", "t=forever"],
    ["notes", "add", "--type", "learning", "x", "--name", "a.b"],
    ["store", "nope"],
])
def test_bad_input_in_a_child_process(cli: Cli, seeded: Seeded, args: list[str]) -> None:
    """The same from a real process: stdout stays empty, stderr holds one line."""
    result = run_ralph(*args, "--store", str(seeded.path), input=b"piped content")
    assert_error(result)
    assert result.raw == b""
    seeded.assert_intact(cli)


def test_unknown_top_level_command(cli: Cli) -> None:
    assert_error(cli("frobnicate"), "no such command", "frobnicate")
    assert_error(cli("--bogus"), "no such option", "--bogus")


def test_no_traceback_even_in_debug_mode_for_expected_errors(
        cli: Cli, seeded: Seeded, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RALPH_DEBUG", "1")
    assert_error(cli("store", "append", "1bad", "--store", str(seeded.path)), "topic")


# -- a store that cannot be written -----------------------------------------------------------


UNWRITABLE_VERBS = [
    ["store", "append", "t"],
    ["store", "cat"],
    ["store", "cat", "--follow"],
    ["store", "last", "t"],
    ["store", "get", UNKNOWN_ID],
    ["store", "cas", UNKNOWN_HASH],
    ["store", "sync"],
    ["store", "rebuild"],
    ["store", "stats"],
    ["store", "errors"],
    ["store", "gc", "--policy", "t=last:1"],
    ["notes", "add", "--type", "learning", "x"],
    ["notes", "list"],
]


@pytest.mark.parametrize("args", UNWRITABLE_VERBS, ids=lambda a: "-".join(a[:2]))
def test_store_under_a_regular_file(cli: Cli, tmp_path: Path, args: list[str]) -> None:
    """Running as root, permissions do not stop us: a parent that is a file does."""
    blocker = tmp_path / "plain-file"
    blocker.write_bytes(b"not a directory")
    store = blocker / "store"
    line = assert_error(cli(*args, "--store", str(store), stdin=b"content"),
                        "cannot create the store", str(store))
    assert "Not a directory" in line
    assert blocker.read_bytes() == b"not a directory"


def test_store_under_a_regular_file_exit_code(cli: Cli, tmp_path: Path) -> None:
    blocker = tmp_path / "plain-file"
    blocker.write_bytes(b"")
    assert cli("store", "append", "t", "--store", str(blocker / "s")).code == 1


def _store_is_a_file(store: Path) -> None:
    store.write_bytes(b"x")


def _streams_is_a_file(store: Path) -> None:
    store.mkdir()
    (store / "streams").write_bytes(b"x")


def _head_is_a_directory(store: Path) -> None:
    (store / "head").mkdir(parents=True)


def _index_is_a_directory(store: Path) -> None:
    (store / "index.sqlite").mkdir(parents=True)


@pytest.mark.parametrize(("make", "words"), [
    (_store_is_a_file, ("cannot create the store",)),
    (_streams_is_a_file, ("cannot create the store",)),
    (_head_is_a_directory, ("head",)),
    (_index_is_a_directory, ("index",)),
])
@pytest.mark.parametrize("args", [["store", "append", "t"], ["store", "cat"],
                                  ["notes", "list"]])
def test_store_that_cannot_be_opened(cli: Cli, tmp_path: Path, make: Callable[[Path], None],
                                     words: tuple[str, ...], args: list[str]) -> None:
    store = tmp_path / "broken"
    make(store)
    assert_error(cli(*args, "--store", str(store)), *words)


def test_unwritable_store_from_a_child_process(tmp_path: Path) -> None:
    blocker = tmp_path / "plain-file"
    blocker.write_bytes(b"")
    result = run_ralph("store", "append", "t", "--store", str(blocker / "s"), input=b"data")
    assert result.code == 1
    assert_error(result, "cannot create the store")


def test_disk_full_during_an_append(cli: Cli, seeded: Seeded) -> None:
    """A real ENOSPC (the stream file is /dev/full): one error line, nothing half-written."""
    full = seeded.path / "streams" / "full.jsonl"
    full.symlink_to("/dev/full")
    try:
        result = cli("store", "append", "t", "--stream", "full", "--store", str(seeded.path))
        assert result.code == 1
        assert_error(result, "disk full", "stream full")
    finally:
        full.unlink()
    seeded.assert_intact(cli)
    after = cli("store", "append", "t", "--store", str(seeded.path))
    assert after.code == 0, after

"""`ralph notes add|list` and `ralph demo`."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.cli.helpers import NOTE_KEYS, Cli, check_frame, json_lines, run_ralph, sri

NOTE_TYPES = ["completed", "in_progress", "blocked", "remaining", "learning", "decision"]
_ID = re.compile(r"[0-9a-z]{25}")


def add(cli: Cli, store: Path, note_type: str, text: str, *args: str) -> dict[str, Any]:
    result = cli("notes", "add", "--type", note_type, text, *args, "--store", str(store))
    assert result.code == 0, result
    assert result.err == ""
    (note,) = json_lines(result.out)
    return check_note(note)


def check_note(note: dict[str, Any]) -> dict[str, Any]:
    assert list(note) == NOTE_KEYS
    assert _ID.fullmatch(note["id"])
    assert type(note["seq"]) is int
    assert note["ts"].endswith("Z")
    assert note["type"] in NOTE_TYPES
    assert note["iteration"] is None or type(note["iteration"]) is int
    assert isinstance(note["text"], str)
    return note


def list_json(cli: Cli, store: Path, *args: str) -> list[dict[str, Any]]:
    result = cli("notes", "list", "--json", *args, "--store", str(store))
    assert result.code == 0, result
    assert result.err == ""
    notes = result.json()
    assert isinstance(notes, list)
    return [check_note(note) for note in notes]


def list_text(cli: Cli, store: Path, *args: str) -> str:
    result = cli("notes", "list", *args, "--store", str(store))
    assert result.code == 0, result
    assert result.err == ""
    return result.out


def groups(text: str) -> dict[str, list[str]]:
    """The human listing as {heading: [entry lines]}, in the order printed."""
    found: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("  "):
            assert current is not None, text
            found[current].append(line)
        else:
            current = line
            found[current] = []
    return found


@pytest.fixture
def several(cli: Cli, cli_store: Path) -> list[dict[str, Any]]:
    """A note of every type over two sessions, with and without iterations."""
    return [
        add(cli, cli_store, "remaining", "Write the store"),
        add(cli, cli_store, "in_progress", "Store: append and index", "--iteration", "1"),
        add(cli, cli_store, "learning", "flock serialises appends\nacross processes",
            "--iteration", "1"),
        add(cli, cli_store, "completed", "Event store", "--iteration", "1", "--name", "auth"),
        add(cli, cli_store, "decision", "Notes live in the content store ✓", "--name", "auth"),
        add(cli, cli_store, "blocked", "Waiting for [bold]the loop[/bold]", "--iteration", "3"),
        add(cli, cli_store, "completed", "Notes CLI", "--iteration", "2"),
    ]


# -- add --------------------------------------------------------------------------------------


def test_add_prints_the_note(cli: Cli, cli_store: Path) -> None:
    note = add(cli, cli_store, "learning", "SQLite WAL needs one writer", "--name", "s-1_x",
               "--iteration", "4")
    assert note["session"] == "s-1_x"
    assert note["type"] == "learning"
    assert note["iteration"] == 4
    assert note["text"] == "SQLite WAL needs one writer"
    assert note["seq"] == 1


def test_add_defaults_to_the_default_session_without_iteration(cli: Cli,
                                                               cli_store: Path) -> None:
    note = add(cli, cli_store, "remaining", "todo")
    assert note["session"] == "default"
    assert note["iteration"] is None


@pytest.mark.parametrize("note_type", NOTE_TYPES)
def test_every_note_type(cli: Cli, cli_store: Path, note_type: str) -> None:
    note = add(cli, cli_store, note_type, f"a {note_type} note")
    assert note["type"] == note_type
    assert list_json(cli, cli_store) == [note]


def test_a_note_is_a_frame_with_its_text_in_the_content_store(cli: Cli,
                                                              cli_store: Path) -> None:
    text = "line one\nline two ✓"
    with_iteration = add(cli, cli_store, "decision", text, "--name", "auth", "--iteration", "2")
    without = add(cli, cli_store, "remaining", "later")
    frames = cli("store", "cat", "--store", str(cli_store)).frames()
    assert len(frames) == 2
    check_frame(frames[0], topic="ralph.auth.note", stream="sessions/auth",
                meta={"type": "decision", "iteration": 2}, content=text.encode())
    check_frame(frames[1], topic="ralph.default.note", stream="sessions/default",
                meta={"type": "remaining"}, content=b"later")
    assert "iteration" not in frames[1]["meta"]
    assert [f["id"] for f in frames] == [with_iteration["id"], without["id"]]
    assert [f["seq"] for f in frames] == [with_iteration["seq"], without["seq"]]
    assert [f["ts"] for f in frames] == [with_iteration["ts"], without["ts"]]
    content = cli("store", "cas", frames[0]["hash"], "--store", str(cli_store))
    assert content.out == text


def test_a_frame_appended_like_the_spec_is_a_note(cli: Cli, cli_store: Path) -> None:
    """`xs append ralph.<name>.note --meta {...}` with the text piped: the spec's way."""
    frame = cli("store", "append", "ralph.spec.note", "--meta",
                '{"type": "blocked", "iteration": 5}', "--stream", "sessions/spec",
                "--store", str(cli_store), stdin=b"needs review").frames()[0]
    assert frame["hash"] == sri(b"needs review")
    (note,) = list_json(cli, cli_store)
    assert note == {"id": frame["id"], "seq": frame["seq"], "ts": frame["ts"],
                    "session": "spec", "type": "blocked", "iteration": 5,
                    "text": "needs review", "resolves": []}


# -- resolution --------------------------------------------------------------------------------


def test_a_note_resolves_earlier_notes_and_open_shows_what_is_left(cli: Cli,
                                                                   cli_store: Path) -> None:
    todo = add(cli, cli_store, "remaining", "Write the parser", "--name", "nu")
    docs = add(cli, cli_store, "remaining", "Document it", "--name", "nu")
    stuck = add(cli, cli_store, "blocked", "Needs the schema", "--name", "nu")
    other = add(cli, cli_store, "remaining", "Another session's task", "--name", "other")
    taken = add(cli, cli_store, "in_progress", "Parser under way", "--name", "nu",
                "--resolves", todo["id"])
    assert taken["resolves"] == [todo["id"]]
    done = add(cli, cli_store, "completed", "Parser done", "--name", "nu", "--iteration", "2",
               "--resolves", taken["id"], "--resolves", stuck["id"],
               "--resolves", taken["id"])
    assert done["resolves"] == [taken["id"], stuck["id"]]  # once each, in order
    frames = cli("store", "cat", "--store", str(cli_store)).frames()
    assert frames[-1]["meta"] == {"type": "completed", "iteration": 2,
                                  "resolves": [taken["id"], stuck["id"]]}
    assert [n["id"] for n in list_json(cli, cli_store, "--name", "nu", "--open")] == [
        docs["id"]]
    assert [n["id"] for n in list_json(cli, cli_store, "--open")] == [docs["id"], other["id"]]
    assert list_json(cli, cli_store, "--open", "--type", "blocked") == []
    text = list_text(cli, cli_store, "--name", "nu")
    assert "Write the parser (resolved)" in text and "Needs the schema (resolved)" in text
    assert "Document it (resolved)" not in text
    # The typed-out command line goes the fast way (no Typer): the same answer.
    fast = run_ralph("notes", "list", "--open", "--name", "nu", "--json", "--store",
                     str(cli_store))
    assert fast.code == 0 and [n["id"] for n in fast.json()] == [docs["id"]]


def test_resolving_a_note_that_is_not_there_is_refused(cli: Cli, cli_store: Path) -> None:
    elsewhere = add(cli, cli_store, "remaining", "x", "--name", "other")
    for missing in ("0" * 25, elsewhere["id"]):
        result = cli("notes", "add", "--type", "completed", "done", "--name", "nu",
                     "--resolves", missing, "--store", str(cli_store))
        assert result.code != 0
        assert result.err.strip().splitlines() == [
            f"error: no note {missing} in session 'nu' to resolve: `ralph notes list "
            "--name nu --json` shows their ids"], result.err
    assert len(cli("store", "cat", "--store", str(cli_store)).frames()) == 1  # nothing added


# -- list --------------------------------------------------------------------------------------


def test_list_json_round_trip(cli: Cli, cli_store: Path, several: list[dict[str, Any]]) -> None:
    assert list_json(cli, cli_store) == several
    texts = [note["text"] for note in list_json(cli, cli_store)]
    assert "flock serialises appends\nacross processes" in texts


def test_list_filters_by_type(cli: Cli, cli_store: Path, several: list[dict[str, Any]]) -> None:
    assert list_json(cli, cli_store, "--type", "completed") == [several[3], several[6]]
    assert list_json(cli, cli_store, "--type", "blocked") == [several[5]]
    for note_type in NOTE_TYPES:
        listed = list_json(cli, cli_store, "--type", note_type)
        assert listed == [n for n in several if n["type"] == note_type]


def test_list_filters_by_session(cli: Cli, cli_store: Path,
                                 several: list[dict[str, Any]]) -> None:
    assert list_json(cli, cli_store, "--name", "auth") == several[3:5]
    assert list_json(cli, cli_store, "--name", "default") == [
        n for n in several if n["session"] == "default"]
    assert list_json(cli, cli_store, "--name", "nobody") == []
    assert list_json(cli, cli_store, "--name", "auth", "--type", "completed") == [several[3]]
    assert list_json(cli, cli_store, "--name", "auth", "--type", "blocked") == []


def test_list_ignores_frames_that_are_not_notes(cli: Cli, cli_store: Path) -> None:
    for topic in ("ralph.default.other", "ralph.run.started", "ralph", "notes.note",
                  "ralph.a.b.note"):
        assert cli("store", "append", topic, "--store", str(cli_store)).code == 0
    assert list_json(cli, cli_store) == []
    assert list_text(cli, cli_store) == "no notes\n"
    note = add(cli, cli_store, "learning", "the only note")
    assert list_json(cli, cli_store) == [note]


def test_list_groups_by_type(cli: Cli, cli_store: Path, several: list[dict[str, Any]]) -> None:
    text = list_text(cli, cli_store)
    found = groups(text)
    # Types in the spec's order, each with its count; only types that have notes.
    assert list(found) == ["completed (2)", "in_progress (1)", "blocked (1)", "remaining (1)",
                           "learning (1)", "decision (1)"]
    completed = found["completed (2)"]
    assert "Event store" in completed[0]
    assert "auth" in completed[0]  # several sessions: each entry names its session
    assert "iteration 1" in completed[0]
    assert "Notes CLI" in completed[1]
    assert "default" in completed[1]
    assert "iteration 2" in completed[1]
    (blocked,) = found["blocked (1)"]
    assert "Waiting for [bold]the loop[/bold]" in blocked  # markup in a note is text
    (learning,) = found["learning (1)"]
    assert "flock serialises appends across processes" in learning  # one line per note
    (remaining,) = found["remaining (1)"]
    assert "iteration" not in remaining
    assert " - " in remaining
    for entries in found.values():
        for entry in entries:
            assert re.match(r"  \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}  ", entry), entry


def test_list_of_one_session_omits_the_session(cli: Cli, cli_store: Path,
                                               several: list[dict[str, Any]]) -> None:
    found = groups(list_text(cli, cli_store, "--name", "auth"))
    assert list(found) == ["completed (1)", "decision (1)"]
    assert "auth" not in found["completed (1)"][0]
    assert "Event store" in found["completed (1)"][0]


def test_list_with_a_type_filter(cli: Cli, cli_store: Path,
                                 several: list[dict[str, Any]]) -> None:
    found = groups(list_text(cli, cli_store, "--type", "completed"))
    assert list(found) == ["completed (2)"]


def test_list_without_notes(cli: Cli, cli_store: Path) -> None:
    assert list_text(cli, cli_store) == "no notes\n"
    assert list_json(cli, cli_store) == []
    add(cli, cli_store, "learning", "x")
    assert list_text(cli, cli_store, "--type", "blocked") == "no notes\n"
    assert list_text(cli, cli_store, "--name", "other") == "no notes\n"
    assert list_json(cli, cli_store, "--type", "blocked") == []


def test_notes_from_child_processes(cli_store: Path) -> None:
    added = run_ralph("notes", "add", "--type", "completed", "from a child", "--name", "kid",
                      "--iteration", "7", "--store", str(cli_store))
    assert added.code == 0, added
    assert added.err == ""
    (note,) = json_lines(added.out)
    listed = run_ralph("notes", "list", "--json", "--store", str(cli_store))
    assert listed.code == 0
    assert listed.json() == [note]
    human = run_ralph("notes", "list", "--store", str(cli_store))
    assert human.out.splitlines()[0] == "completed (1)"
    assert "iteration 7" in human.out
    assert "from a child" in human.out
    assert "\x1b" not in human.out  # no colour codes when stdout is not a terminal


def test_notes_use_the_environment_store(cli: Cli, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RALPH_STORE", str(tmp_path / "env-notes"))
    result = cli("notes", "add", "--type", "learning", "via env")
    assert result.code == 0
    listed = cli("notes", "list", "--json")
    assert [n["text"] for n in listed.json()] == ["via env"]
    assert (tmp_path / "env-notes" / "streams" / "sessions" / "default.jsonl").is_file()


# -- demo -------------------------------------------------------------------------------------


def test_demo_runs_the_loop_to_completion(tmp_path: Path) -> None:
    """The loop demo: three tasks, one wrong first attempt caught by the gate, all verified."""
    result = run_ralph("demo", "--dir", str(tmp_path / "demo"), timeout=300)
    assert result.code == 0, result
    assert "Traceback" not in result.err
    assert "replay" in result.err and "no model is called" in result.err
    assert "reopened task 2" in result.err
    assert re.search(r"complete \(all 3 tasks are verified done\)", result.out)
    rows = {m.group(1): m.group(2) for m in re.finditer(r"│ (\d)\s+│.*?│ (\d)\s+│", result.out)}
    assert rows == {"1": "1", "2": "2", "3": "1"}, result.out
    root = tmp_path / "demo" / "calc"
    log = subprocess.run(["git", "-C", str(root), "log", "--format=%s"], capture_output=True,
                         text=True, check=True, timeout=30).stdout.splitlines()
    assert log[0].startswith("ralph: 3 ") and "not verified" in log[2]
    assert (root / ".ralph" / "logs").is_dir()
    assert f"--store {root / '.ralph' / 'store'}" in result.out


def test_demo_cleanup_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "demo"
    result = run_ralph("demo", "--dir", str(target), "--cleanup", "--quiet", timeout=300)
    assert result.code == 0, result
    assert not target.exists()


def test_demo_refuses_a_directory_that_is_not_empty(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    result = cli("demo", "--dir", str(tmp_path / "full"))
    assert result.code == 2
    assert result.err.startswith("error: ") and "not empty" in result.err

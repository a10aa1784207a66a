""".ralph/state.json (ralph.loop.state): loading, saving atomically, setting a damaged file
aside, and staying small whatever the number of iterations (history lives in the store)."""

from __future__ import annotations

import errno
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import asdict, fields
from pathlib import Path

import orjson
import pytest

from ralph.cli.output import write_json
from ralph.loop.models import LastIteration
from ralph.loop.state import (
    ActiveRun,
    InFlight,
    LoopState,
    StateError,
    TaskState,
    load_state,
    save_state,
)
from ralph.store import Store
from tests.loop.conftest import Project


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def warnings_seen() -> Iterator[list[logging.LogRecord]]:
    """Records of the `ralph.loop` logger (the CLI may have turned propagation off)."""
    handler = Records()
    logger = logging.getLogger("ralph.loop")
    logger.addHandler(handler)
    try:
        yield handler.records
    finally:
        logger.removeHandler(handler)


def full_state() -> LoopState:
    return LoopState(
        iteration_count=7, no_progress_streak=2,
        active_run=ActiveRun(run_id="run_x", pid=123, agent="fake", max_iterations=10,
                             started_at="2024-01-01T00:00:00.000Z", paused=True, mode="run"),
        in_flight=InFlight(iteration=7, iteration_id="000007", run_id="run_x", task_id="2",
                           task_title="Second task", attempt_id="2-3",
                           started_at="2024-01-01T00:01:00.000Z", pid=123, agent_pgid=456),
        last=LastIteration(iteration_id="000006", iteration=6, run_id="run_x", task_id="2",
                           task_title="Second task", status="not_done", exit_code=1,
                           started_at="2024-01-01T00:00:30.000Z",
                           finished_at="2024-01-01T00:00:50.000Z", verified=False,
                           reason="gate 'pytest' exited with 1"),
        tasks={"1": TaskState(attempts=1), "2": TaskState(attempts=3, failures=2),
               "3": TaskState(attempts=3, failures=3, blocked="3 attempts failed")},
        agent_starts=[1_700_000_000.5, 1_700_000_100.25],
    )


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name != "state.json")


# -- load / save -----------------------------------------------------------------------------------


def test_missing_file_loads_a_fresh_state(tmp_path: Path) -> None:
    state = load_state(tmp_path / "state.json")
    assert state == LoopState()
    assert state.iteration_count == 0 and state.active_run is None and state.in_flight is None
    assert state.last is None and state.tasks == {} and state.agent_starts == []
    assert not (tmp_path / "state.json").exists()  # loading writes nothing


def test_empty_file_loads_a_fresh_state(tmp_path: Path,
                                        warnings_seen: list[logging.LogRecord]) -> None:
    (tmp_path / "state.json").write_text("  \n")
    assert load_state(tmp_path / "state.json") == LoopState()
    assert not (tmp_path / "state.json.damaged").exists()


def test_scaffolded_state_loads(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text('{"version": 1}')
    assert load_state(tmp_path / "state.json") == LoopState()


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    state = full_state()
    save_state(path, state)
    loaded = load_state(path)
    assert loaded == state
    assert asdict(loaded) == asdict(state)
    body = json.loads(path.read_text())
    assert body["in_flight"]["agent_pgid"] == 456
    assert body["tasks"]["3"]["blocked"] == "3 attempts failed"
    assert path.read_bytes().endswith(b"\n")


def test_save_replaces_the_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    save_state(path, full_state())
    save_state(path, LoopState())
    assert load_state(path) == LoopState()
    assert json.loads(path.read_text())["tasks"] == {}


def test_save_leaves_no_temp_files(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    for count in range(20):
        state = full_state()
        state.iteration_count = count
        save_state(path, state)
    assert leftovers(tmp_path) == []
    assert load_state(path).iteration_count == 19


def test_save_keeps_the_file_mode(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    save_state(path, LoopState())
    path.chmod(0o600)
    save_state(path, full_state())
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_failed_save_raises_state_error_and_leaves_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.mkdir()  # a directory where the file should be: the rename fails
    with pytest.raises(StateError, match="cannot write"):
        save_state(path, full_state())
    assert leftovers(tmp_path) == []
    assert path.is_dir() and list(path.iterdir()) == []


def test_a_save_that_fails_midway_keeps_the_old_content(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "state.json"
    save_state(path, full_state())
    before = path.read_bytes()

    def disk_full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(StateError, match="No space left on device"):
        save_state(path, LoopState())
    monkeypatch.undo()
    assert path.read_bytes() == before  # readers see the old file, never a mix
    assert leftovers(tmp_path) == []
    assert load_state(path) == full_state()


def test_unreadable_file_is_a_state_error(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.mkdir()
    with pytest.raises(StateError, match="cannot read"):
        load_state(path)
    assert path.is_dir()  # not set aside: it is not damaged, just not a file


@pytest.mark.parametrize("content", [
    b"{not json",
    b'{"version": 1, "iteration_count": ',
    b"\xff\xfe\x00garbage",
    b"[]",
    b"null",
    b'"a string"',
    b'{"iteration_count": "seven"}',
    b'{"tasks": {"1": {"attempts": "x"}}}',
    b'{"active_run": {"run_id": 5}}',
    b'{"last": {"iteration_id": "1"}}',
], ids=repr)
def test_damaged_file_is_set_aside_with_a_warning(tmp_path: Path, content: bytes,
                                                  warnings_seen: list[logging.LogRecord]
                                                  ) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(content)
    state = load_state(path)
    assert state == LoopState()
    assert not path.exists()
    aside = tmp_path / "state.json.damaged"
    assert aside.read_bytes() == content  # kept for a person to look at
    warnings = [r for r in warnings_seen if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    message = warnings[0].getMessage()
    assert "damaged" in message and "state.json.damaged" in message
    assert "\n" not in message
    # and the fresh state can be saved over it
    save_state(path, state)
    assert load_state(path) == LoopState()


def test_a_second_damaged_file_replaces_the_first_aside(tmp_path: Path,
                                                        warnings_seen: list[logging.LogRecord]
                                                        ) -> None:
    path = tmp_path / "state.json"
    path.write_text("first damage")
    load_state(path)
    path.write_text("second damage")
    assert load_state(path) == LoopState()
    assert (tmp_path / "state.json.damaged").read_text() == "second damage"
    assert leftovers(tmp_path) == ["state.json.damaged"]


def test_unknown_keys_from_a_newer_version_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    body = json.loads(orjson.dumps(full_state()))
    body["something_new"] = {"a": 1}
    path.write_text(json.dumps(body))
    assert load_state(path) == full_state()
    assert path.exists()


def test_fields_are_written_in_declared_order_whatever_order_was_read(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "state.json"
    declared = [field.name for field in fields(LoopState)]
    body = json.loads(orjson.dumps(full_state()))
    path.write_text(json.dumps(dict(reversed(body.items()))))  # another order
    state = load_state(path)
    save_state(path, state)
    saved = json.loads(path.read_text())
    assert list(saved) == declared
    assert list(saved["last"]) == [field.name for field in fields(LastIteration)]
    path.write_text("{}")  # defaults only
    save_state(path, load_state(path))
    assert list(json.loads(path.read_text())) == declared
    write_json(load_state(path))  # the CLI's JSON too
    assert list(json.loads(capsys.readouterr().out)) == declared


def test_values_pydantic_accepted_are_still_accepted(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_text('{"iteration_count": 3.0, "no_progress_streak": "2", '
                    '"tasks": {"T1": {"attempts": 4, "failures": "1"}}, '
                    '"active_run": {"run_id": "r", "pid": 7, "agent": "a", '
                    '"max_iterations": 5, "started_at": "t", "paused": 1}}')
    state = load_state(path)
    assert (state.iteration_count, state.no_progress_streak) == (3, 2)
    assert (state.tasks["T1"].attempts, state.tasks["T1"].failures) == (4, 1)
    assert state.active_run is not None and state.active_run.paused is True
    assert path.exists()  # not set aside
    path.write_text('{"iteration_count": 3.5}')  # but not a fraction for a count
    assert load_state(path) == LoopState()
    assert not path.exists()


def test_task_creates_its_entry_once() -> None:
    state = LoopState()
    entry = state.task("4")
    entry.attempts += 1
    assert state.task("4") is entry
    assert state.tasks == {"4": TaskState(attempts=1)}


# -- bounded ---------------------------------------------------------------------------------------


def _ralph(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ralph", *args], cwd=project.root,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=300, check=False)


def test_state_stays_bounded_over_many_iterations(project: Project) -> None:
    """30 failed attempts at one task: state.json keeps counters, not history."""
    project.config()
    toml = project.root / "ralph.toml"
    toml.write_text(toml.read_text().replace(
        "max_iterations = 10\n",
        "max_iterations = 100\nmax_attempts_per_task = 1000\nno_progress_limit = 1000\n"))
    project.commit("config")
    state_path = project.root / ".ralph" / "state.json"

    first = _ralph(project, "run", "--quiet", "--max-iterations", "3")
    assert first.returncode == 1, first.stderr
    size_after_3 = state_path.stat().st_size

    second = _ralph(project, "run", "--quiet", "--max-iterations", "27")
    assert second.returncode == 1, second.stderr
    assert second.stdout == ""
    size_after_30 = state_path.stat().st_size

    state = json.loads(state_path.read_text())
    assert state["iteration_count"] == 30
    # The notes for the next attempt are the last attempt's only.
    assert state["tasks"] == {"1": {"attempts": 30, "failures": 30, "blocked": None, "notes": [
        "Ralph did not verify it: the tracker does not mark the task done.",
        "Your last message was:\n> fake agent working on task 1\n> did nothing"]}}
    assert state["spend_all"]["iterations"] == 30
    assert state["active_run"] is None and state["in_flight"] is None
    assert state["agent_starts"] == []
    assert state["last"]["iteration"] == 30
    # Counters got a digit longer; nothing else grew.
    assert size_after_30 < 4096
    assert size_after_30 - size_after_3 < 64, (size_after_3, size_after_30)
    assert leftovers(state_path.parent) == sorted(
        ["attempts", "cache", "context", "logs", "loop.lock", "receipts", "store"])
    # The history is in the store instead.
    with Store(project.root / ".ralph" / "store") as store:
        finished = list(store.read(topic="iteration.finished"))
    assert [f.meta["iteration"] for f in finished] == list(range(1, 31))

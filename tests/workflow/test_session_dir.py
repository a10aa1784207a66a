"""The session directory: ids, paths, report names, attempt numbers, listing."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from ralph.workflow.errors import WorkflowError
from ralph.workflow.session_dir import (
    SessionDir,
    is_task_id,
    list_sessions,
    parse_report_name,
    report_name,
    session_id_for,
    validate_session_id,
)

NOON = datetime(2026, 1, 31, 14, 44, 0)


def test_session_id_is_local_time_yymmdd_hhmmss():
    assert session_id_for(NOON) == "260131-144400"


def test_paths_of_a_session(tmp_path: Path):
    session = SessionDir(tmp_path, "260131-144400")
    assert session.session_path == ".ralph-sessions/260131-144400/"
    assert session.path == tmp_path / ".ralph-sessions" / "260131-144400"
    assert session.plan == session.path / "plan.md"
    assert session.tasks == session.path / "tasks.md"
    assert session.progress == session.path / "progress.md"
    assert session.questions == session.path / "plan.questions.md"
    # Beside the directory, not in it.
    assert session.instructions == tmp_path / ".ralph-sessions" / "260131-144400.instructions.md"
    assert session.report("task-1", 1) == session.path / "tasks.task-1-report.md"
    assert session.report("task-1", 2) == session.path / "tasks.task-1-report-r2.md"
    assert session.relative(session.tasks) == ".ralph-sessions/260131-144400/tasks.md"


def test_create_makes_the_directory(tmp_path: Path):
    session = SessionDir.create(tmp_path, NOON)
    assert session.session_id == "260131-144400"
    assert session.path.is_dir()
    assert list(session.path.iterdir()) == []


def test_create_in_a_taken_second_takes_the_next_free_one(tmp_path: Path):
    first = SessionDir.create(tmp_path, NOON)
    second = SessionDir.create(tmp_path, NOON)
    # A stray instructions file also makes its id taken.
    (tmp_path / ".ralph-sessions" / "260131-144402.instructions.md").write_text("x")
    third = SessionDir.create(tmp_path, NOON)
    assert [first.session_id, second.session_id, third.session_id] == [
        "260131-144400", "260131-144401", "260131-144403"]
    assert not (tmp_path / ".ralph-sessions" / "260131-144402").exists()


def test_open_an_existing_session(tmp_path: Path):
    created = SessionDir.create(tmp_path, NOON)
    assert SessionDir.open(tmp_path, "260131-144400") == created


def test_open_a_missing_session_is_one_clear_error(tmp_path: Path):
    with pytest.raises(WorkflowError, match=r"^no workflow session 260131-144400 \(no directory "
                       r"\.ralph-sessions/260131-144400/\)$"):
        SessionDir.open(tmp_path, "260131-144400")


@pytest.mark.parametrize("bad", ["../etc", "260131-1444", "260131_144400", "260131-144400/..",
                                 "", "2601311-44400", "260131-144400\n"])
def test_a_malformed_session_id_is_refused(tmp_path: Path, bad: str):
    with pytest.raises(WorkflowError, match="invalid session id"):
        validate_session_id(bad)
    with pytest.raises(WorkflowError, match="invalid session id"):
        SessionDir(tmp_path, bad)


@pytest.mark.parametrize("given", [".ralph-sessions/260131-144400/",
                                   ".ralph-sessions/260131-144400"])
def test_from_session_path(tmp_path: Path, given: str):
    assert SessionDir.from_session_path(tmp_path, given).session_id == "260131-144400"


@pytest.mark.parametrize("bad", ["260131-144400/", "other/260131-144400/",
                                 ".ralph-sessions/../x/", ".ralph-sessions/260131-144400/x/"])
def test_from_a_wrong_session_path(tmp_path: Path, bad: str):
    with pytest.raises(WorkflowError, match=r"^invalid (SESSION_PATH|session id) "):
        SessionDir.from_session_path(tmp_path, bad)


def test_list_sessions_oldest_first_ignoring_other_entries(tmp_path: Path):
    assert list_sessions(tmp_path) == []
    later = SessionDir.create(tmp_path, datetime(2026, 2, 1, 9, 0, 0))
    earlier = SessionDir.create(tmp_path, NOON)
    (earlier.instructions).write_text("---\n")
    (tmp_path / ".ralph-sessions" / "notes").mkdir()
    (tmp_path / ".ralph-sessions" / "260131-999999.txt").write_text("")
    assert list_sessions(tmp_path) == [earlier, later]


@pytest.mark.parametrize("task_id", ["task-1", "task-2.1", "task-10.2.3", "plan-init",
                                     "plan-qa-brainstorm", "qa-research", "task_a-1"])
def test_task_ids(task_id: str):
    assert is_task_id(task_id)


@pytest.mark.parametrize("text", ["task", "task-", "-1", "task-1/..", "../task-1", "task 1",
                                  "task-1.", "Not", "1-task"])
def test_not_task_ids(text: str):
    assert not is_task_id(text)


def test_report_names_per_attempt():
    assert report_name("task-1", 1) == "tasks.task-1-report.md"
    assert report_name("task-2.1", 3) == "tasks.task-2.1-report-r3.md"
    with pytest.raises(WorkflowError, match="invalid attempt number 0"):
        report_name("task-1", 0)
    with pytest.raises(WorkflowError, match=r"^invalid task id '\.\./x'"):
        report_name("../x", 1)


def test_parse_report_names():
    assert parse_report_name("tasks.task-1-report.md") == ("task-1", 1)
    assert parse_report_name("tasks.task-1-report-r2.md") == ("task-1", 2)
    assert parse_report_name("tasks.task-2.1-report-r12.md") == ("task-2.1", 12)
    for name in ("tasks.task-1-report-r1.md", "tasks.task-1-report-r02.md", "tasks.md",
                 "task-1-report.md", "tasks.task-1-report.txt", "progress.md"):
        assert parse_report_name(name) is None, name


def test_attempt_number_counts_the_tasks_reports(tmp_path: Path):
    session = SessionDir.create(tmp_path, NOON)
    assert session.attempt_number("task-1") == 1
    session.report("task-1", 1).write_text("# r1")
    # Another task's report, one whose id starts the same, and a non-report do not count.
    session.report("task-1.1", 1).write_text("# r")
    session.report("task-2", 1).write_text("# r")
    (session.path / "tasks.task-1-report.md.bak").write_text("")
    assert session.attempt_number("task-1") == 2
    session.report("task-1", 2).write_text("# r2")
    assert session.attempt_number("task-1") == 3
    assert sorted(session.reports("task-1")) == [1, 2]


def test_attempt_number_never_names_an_existing_report(tmp_path: Path):
    session = SessionDir.create(tmp_path, NOON)
    session.report("task-1", 1).write_text("# r1")
    session.report("task-1", 3).write_text("# r3")  # r2 deleted by hand
    assert session.attempt_number("task-1") == 4

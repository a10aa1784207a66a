"""Session integrity: a hand-edited session is one clear error naming file, line, problem."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from ralph.workflow.errors import WorkflowError
from ralph.workflow.integrity import validate_session
from ralph.workflow.progress import Marker
from ralph.workflow.session_dir import SessionDir

TASKS = """\
# Tasks

## Planning Tasks
- plan-init: Initialize
    - **Type**: Sequential

## Implementation Tasks
- task-1: First
    - **Type**: Parallelizable
- task-2: Second
    - **Type**: Sequential (depends on task-1)
"""

PROGRESS = """\
# Progress Tracking

## Planning Progress
- [x] plan-init (Completed)

## Implementation Progress
- [ ] task-1 (Not Started)
- [ ] task-2 (Not Started)
"""

WHERE = ".ralph-sessions/260131-144400"


@pytest.fixture
def session(tmp_path: Path) -> SessionDir:
    return SessionDir.create(tmp_path, datetime(2026, 1, 31, 14, 44, 0))


def _write(session: SessionDir, tasks: str | None = TASKS, progress: str | None = PROGRESS):
    if tasks is not None:
        session.tasks.write_text(tasks)
    if progress is not None:
        session.progress.write_text(progress)


def _error(session: SessionDir) -> str:
    with pytest.raises(WorkflowError) as raised:
        validate_session(session)
    return str(raised.value)


def test_a_valid_session(session: SessionDir):
    _write(session)
    files = validate_session(session)
    assert files.tasks is not None and files.progress is not None
    assert files.tasks.ids == ("plan-init", "task-1", "task-2")
    assert files.progress.markers["task-1"] is Marker.NOT_STARTED


def test_a_new_session_has_nothing_to_check(session: SessionDir):
    files = validate_session(session)
    assert (files.tasks, files.progress) == (None, None)


def test_a_progress_task_missing_from_tasks_md(session: SessionDir):
    _write(session, progress=PROGRESS + "- [ ] task-3 (Not Started)\n")
    assert _error(session) == f"{WHERE}/progress.md:9: task-3 is not in tasks.md"


def test_progress_without_tasks_md(session: SessionDir):
    _write(session, tasks=None)
    assert _error(session) == f"{WHERE}/progress.md:4: plan-init is not in tasks.md"


def test_an_unknown_marker(session: SessionDir):
    _write(session, progress=PROGRESS.replace("- [ ] task-2", "- [X] task-2"))
    assert _error(session) == (f"{WHERE}/progress.md:8: unknown marker [X] for task-2 "
                               "(expected one of [ ] [/] [P] [x] [F])")


def test_a_duplicate_in_tasks_md(session: SessionDir):
    _write(session, tasks=TASKS + "- task-1: Again\n")
    assert _error(session) == (f"{WHERE}/tasks.md:12: duplicate task id task-1 "
                               "(first on line 8)")


def test_a_duplicate_in_progress_md(session: SessionDir):
    _write(session, progress=PROGRESS + "- [x] task-1 (Completed)\n")
    assert _error(session) == (f"{WHERE}/progress.md:9: duplicate task id task-1 "
                               "(first on line 7)")


def test_a_dependency_on_an_unknown_task(session: SessionDir):
    _write(session, tasks=TASKS.replace("(depends on task-1)", "(depends on task-1, task-7)"))
    assert _error(session) == f"{WHERE}/tasks.md:11: task-2 depends on unknown task task-7"


def test_a_task_depending_on_itself(session: SessionDir):
    _write(session, tasks=TASKS.replace("(depends on task-1)", "(depends on task-2)"))
    assert _error(session) == f"{WHERE}/tasks.md:11: task-2 depends on itself"


def test_a_dependency_cycle(session: SessionDir):
    tasks = TASKS.replace("    - **Type**: Parallelizable",
                          "    - **Type**: Sequential (depends on task-2)")
    _write(session, tasks=tasks)
    assert _error(session) == f"{WHERE}/tasks.md:9: dependency cycle task-1 -> task-2 -> task-1"


def test_a_file_that_is_not_text(session: SessionDir):
    _write(session)
    session.progress.write_bytes(b"- [ ] task-1 \xff\xfe\n")
    assert _error(session) == f"{WHERE}/progress.md: not UTF-8 text"


def test_a_task_without_a_progress_line(session: SessionDir):
    _write(session, progress=PROGRESS.replace("- [ ] task-2 (Not Started)\n", ""))
    assert _error(session) == f"{WHERE}/progress.md: no line for task-2 ({WHERE}/tasks.md:10)"
    # Before progress.md is written there is nothing to compare.
    session.progress.unlink()
    assert validate_session(session).progress is None


def test_prose_after_depends_on_is_not_a_dependency(session: SessionDir):
    _write(session, tasks=TASKS.replace("(depends on task-1)",
                                        "(depends on task-1's read-only API and e2e-tests)"))
    assert validate_session(session).tasks.get("task-2").dependencies == ("task-1",)  # type: ignore[union-attr]
    _write(session, tasks=TASKS.replace("(depends on task-1)", "(depends on task-7)"))
    assert _error(session) == f"{WHERE}/tasks.md:11: task-2 depends on unknown task task-7"

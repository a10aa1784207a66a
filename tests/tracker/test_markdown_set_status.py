"""set_status on a markdown PRD: only the task's marker and its `Blocked:` bullet change; every
other byte of the file stays as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from ralph.fsutil import atomic_write_text
from ralph.tracker import MarkdownTracker, Task, TrackerError
from tests.tracker.helpers import changes, read, write

PRD = """\
# Todo app

Some intro with a checkbox that is not a task:
- [ ] 99. not a task

## Tasks

- [ ] 1. Set up the project
  - pyproject.toml exists
  - tests run
- [x] 2. [PLAN] Plan the API
* [~] 3. Write the docs [DOCS]
    * Depends on: 2
- [-] 4. Deploy
  - Blocked: no credentials
- [X] 5. Upper-case done

## Notes

Free text, kept as is, trailing spaces included:"""
PRD += "   \n- [ ] 100. also not a task\n"


@pytest.fixture
def prd(tmp_path: Path) -> Path:
    return write(tmp_path / "PRD.md", PRD)


def line(number: int) -> str:
    return PRD.splitlines(keepends=True)[number - 1]


@pytest.mark.parametrize(
    ("task_id", "status", "number", "new"),
    [
        ("1", "done", 8, "- [x] 1. Set up the project\n"),
        ("1", "in_progress", 8, "- [~] 1. Set up the project\n"),
        ("1", "blocked", 8, "- [-] 1. Set up the project\n"),
        ("2", "open", 11, "- [ ] 2. [PLAN] Plan the API\n"),
        ("3", "done", 12, "* [x] 3. Write the docs [DOCS]\n"),
        ("3", "open", 12, "* [ ] 3. Write the docs [DOCS]\n"),
    ],
)
def test_only_the_marker_changes(
    prd: Path, task_id: str, status: str, number: int, new: str
) -> None:
    tracker = MarkdownTracker(prd)
    updated = tracker.set_status(task_id, status)  # type: ignore[arg-type]
    assert changes(PRD, read(prd)) == [(number, [line(number)], [new])]
    assert updated.status == status
    assert updated.id == task_id
    assert tracker.load()[int(task_id) - 1] == updated


def test_unblocking_removes_the_blocked_bullet(prd: Path) -> None:
    updated = MarkdownTracker(prd).set_status("4", "open", reason="ignored unless blocked")
    assert changes(PRD, read(prd)) == [
        (14, [line(14), line(15)], ["- [ ] 4. Deploy\n"]),
    ]
    assert updated.blocked_reason is None
    assert updated.status == "open"


def test_blocking_adds_a_bullet_after_the_last_one(prd: Path) -> None:
    updated = MarkdownTracker(prd).set_status("1", "blocked", "tests need a database")
    assert changes(PRD, read(prd)) == [
        (8, [line(8)], ["- [-] 1. Set up the project\n"]),
        (11, [], ["  - Blocked: tests need a database\n"]),
    ]
    assert updated.blocked_reason == "tests need a database"
    assert updated.acceptance == ("pyproject.toml exists", "tests run")


def test_a_new_blocked_bullet_copies_the_sub_bullet_style(prd: Path) -> None:
    MarkdownTracker(prd).set_status("3", "blocked", "docs site down")
    assert changes(PRD, read(prd)) == [
        (12, [line(12)], ["* [-] 3. Write the docs [DOCS]\n"]),
        (14, [], ["    * Blocked: docs site down\n"]),
    ]


def test_a_task_without_sub_bullets_gets_two_spaces(prd: Path) -> None:
    MarkdownTracker(prd).set_status("2", "blocked", "waiting")
    assert changes(PRD, read(prd)) == [
        (11, [line(11)], ["- [-] 2. [PLAN] Plan the API\n", "  - Blocked: waiting\n"]),
    ]


def test_reblocking_replaces_the_reason(prd: Path) -> None:
    updated = MarkdownTracker(prd).set_status("4", "blocked", "new\nreason  on   one line")
    assert changes(PRD, read(prd)) == [
        (15, [line(15)], ["  - Blocked: new reason on one line\n"]),
    ]
    assert updated.blocked_reason == "new reason on one line"


def test_blocking_without_a_reason_keeps_the_old_one(prd: Path) -> None:
    updated = MarkdownTracker(prd).set_status("4", "blocked")
    assert read(prd) == PRD
    assert updated.blocked_reason == "no credentials"
    updated = MarkdownTracker(prd).set_status("2", "blocked", "   ")
    assert changes(PRD, read(prd)) == [(11, [line(11)], ["- [-] 2. [PLAN] Plan the API\n"])]
    assert updated.blocked_reason is None


def test_the_same_status_leaves_the_file_untouched(prd: Path) -> None:
    tracker = MarkdownTracker(prd)
    for task in tracker.load():
        tracker.set_status(task.id, task.status)
    # Including the upper-case X of task 5 and the reason of task 4.
    assert read(prd) == PRD


def test_round_trip_through_every_status(prd: Path) -> None:
    tracker = MarkdownTracker(prd)
    for status in ("in_progress", "blocked", "done", "open"):
        tracker.set_status("1", status, "a reason")
    assert read(prd) == PRD


def test_extra_blocked_bullets_are_merged(tmp_path: Path) -> None:
    before = (
        "## Tasks\n- [-] 1. One\n  - Blocked: first\n  - criterion\n  - Blocked: second\n"
        "    continued\n- [ ] 2. Two\n"
    )
    path = write(tmp_path / "PRD.md", before)
    MarkdownTracker(path).set_status("1", "blocked", "third")
    assert read(path) == (
        "## Tasks\n- [-] 1. One\n  - Blocked: third\n  - criterion\n- [ ] 2. Two\n"
    )
    MarkdownTracker(path).set_status("1", "done")
    assert read(path) == "## Tasks\n- [x] 1. One\n  - criterion\n- [ ] 2. Two\n"


def test_nested_tasks_indent_the_new_bullet(tmp_path: Path) -> None:
    path = write(tmp_path / "PRD.md", "## Tasks\n- Backend\n  - [ ] 1. API\n- Other\n")
    MarkdownTracker(path).set_status("1", "blocked", "why")
    assert read(path) == "## Tasks\n- Backend\n  - [-] 1. API\n    - Blocked: why\n- Other\n"


def test_crlf_is_kept(tmp_path: Path) -> None:
    before = "# P\r\n\r\n## Tasks\r\n- [ ] 1. One\r\n  - c\r\n- [ ] 2. Two\r\n\r\n## End\r\n"
    path = write(tmp_path / "PRD.md", before)
    MarkdownTracker(path).set_status("1", "blocked", "r")
    assert read(path) == (
        "# P\r\n\r\n## Tasks\r\n- [-] 1. One\r\n  - c\r\n  - Blocked: r\r\n- [ ] 2. Two\r\n"
        "\r\n## End\r\n"
    )
    MarkdownTracker(path).set_status("1", "open")
    assert read(path) == before


def test_a_missing_final_newline_stays_missing(tmp_path: Path) -> None:
    before = "\ufeff## Tasks\r\n- [ ] 1. One\r\n- [ ] 2. Last"
    path = write(tmp_path / "PRD.md", before)
    MarkdownTracker(path).set_status("2", "blocked", "r")
    assert read(path) == "\ufeff## Tasks\r\n- [ ] 1. One\r\n- [-] 2. Last\r\n  - Blocked: r"
    MarkdownTracker(path).set_status("2", "done")
    assert read(path) == "\ufeff## Tasks\r\n- [ ] 1. One\r\n- [x] 2. Last"


def test_every_write_is_atomic(prd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    written: list[tuple[Path, str]] = []
    real = atomic_write_text

    def recording(path: Path, text: str, *, durable: bool = True) -> None:
        written.append((path, text))
        real(path, text, durable=durable)

    monkeypatch.setattr("ralph.tracker.fileio.atomic_write_text", recording)
    MarkdownTracker(prd).set_status("1", "done")
    assert written == [(prd, read(prd))]


def test_a_failed_write_is_a_tracker_error(prd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(path: Path, text: str, *, durable: bool = True) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("ralph.tracker.fileio.atomic_write_text", failing)
    with pytest.raises(TrackerError) as info:
        MarkdownTracker(prd).set_status("1", "done")
    assert str(info.value) == f"{prd}: cannot write: Permission denied"
    assert read(prd) == PRD


def test_the_returned_task_is_what_load_sees(prd: Path) -> None:
    tracker = MarkdownTracker(prd)
    updated = tracker.set_status("3", "blocked", "why")
    assert updated == Task(
        id="3",
        title="Write the docs [DOCS]",
        status="blocked",
        kind="docs",
        acceptance=(),
        depends_on=("2",),
        priority=None,
        order=2,
        blocked_reason="why",
    )
    assert updated in tracker.load()

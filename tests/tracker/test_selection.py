"""next_task and summary: which task runs next, and the counts status reports."""

from __future__ import annotations

from pathlib import Path

from ralph.tracker import MarkdownTracker, next_task, summary
from tests.tracker.helpers import make_task, write


def test_first_open_task_by_order() -> None:
    tasks = [make_task("a", "done", order=0), make_task("b", order=1), make_task("c", order=2)]
    assert next_task(tasks) == tasks[1]


def test_priority_before_order_and_missing_priority_last() -> None:
    tasks = [
        make_task("none", order=0),
        make_task("p3", order=1, priority=3),
        make_task("p1-late", order=3, priority=1),
        make_task("p1-early", order=2, priority=1),
        make_task("p0-done", "done", order=4, priority=0),
    ]
    chosen = next_task(tasks)
    assert chosen is not None
    assert chosen.id == "p1-early"
    remaining = [t for t in tasks if t.id not in ("p1-early", "p1-late")]
    chosen = next_task(remaining)
    assert chosen is not None
    assert chosen.id == "p3"
    assert next_task([tasks[0], tasks[4]]) == tasks[0]


def test_negative_priorities_sort_first() -> None:
    tasks = [make_task("zero", priority=0, order=0), make_task("minus", priority=-1, order=1)]
    assert next_task(tasks) == tasks[1]


def test_unmet_dependencies_wait() -> None:
    tasks = [
        make_task("first", order=1, priority=5),
        make_task("needs-first", order=0, priority=1, depends_on=("first",)),
    ]
    assert next_task(tasks) == tasks[0]
    done_first = [make_task("first", "done", order=1), tasks[1]]
    assert next_task(done_first) == tasks[1]


def test_every_dependency_must_be_done() -> None:
    tasks = [
        make_task("a", "done", order=0),
        make_task("b", "in_progress", order=1, depends_on=("x",)),
        make_task("c", order=2, depends_on=("a", "d")),
        make_task("d", "blocked", order=3),
    ]
    # b depends on an unknown id, c on a blocked task: nothing is ready.
    assert next_task(tasks) is None


def test_blocked_tasks_are_skipped() -> None:
    tasks = [make_task("b", "blocked", order=0, priority=1), make_task("o", order=1, priority=9)]
    assert next_task(tasks) == tasks[1]


def test_an_interrupted_task_is_resumed_first() -> None:
    tasks = [
        make_task("urgent", order=0, priority=1),
        make_task("started", "in_progress", order=1, priority=9),
        make_task("started-later", "in_progress", order=2, priority=None),
    ]
    assert next_task(tasks) == tasks[1]


def test_nothing_left() -> None:
    assert next_task([]) is None
    assert next_task([make_task("a", "done"), make_task("b", "blocked", order=1)]) is None


def test_next_task_from_a_file(tmp_path: Path) -> None:
    path = write(
        tmp_path / "PRD.md",
        "## Tasks\n"
        "- [x] 1. Done\n"
        "- [ ] 2. Needs 3\n  - Depends on: 3\n"
        "- [-] 4. Blocked\n"
        "- [ ] 3. [PLAN] Ready\n",
    )
    chosen = next_task(MarkdownTracker(path).load())
    assert chosen is not None
    assert (chosen.id, chosen.kind) == ("3", "plan")


def test_summary() -> None:
    tasks = [
        make_task("a", "done", order=0),
        make_task("b", "blocked", order=1, blocked_reason="no key"),
        make_task("c", "in_progress", order=2),
        make_task("d", order=3),
        make_task("e", "blocked", order=4),
        make_task("f", "done", order=5),
    ]
    assert summary(tasks) == {
        "done": 2,
        "total": 6,
        "open": 1,
        "in_progress": 1,
        "blocked": [("b", "no key"), ("e", None)],
        "next": "c",
    }


def test_summary_when_finished() -> None:
    assert summary([make_task("a", "done")]) == {
        "done": 1,
        "total": 1,
        "open": 0,
        "in_progress": 0,
        "blocked": [],
        "next": None,
    }

"""Property: set_status on a markdown PRD changes nothing but the task's marker and its
`Blocked:` bullet, whatever free text surrounds the task list."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ralph.tracker import MarkdownTracker, TaskStatus
from tests.tracker.helpers import read, write

STATUS_MARKS: dict[TaskStatus, str] = {
    "open": " ",
    "done": "x",
    "in_progress": "~",
    "blocked": "-",
}
STATUS_OF: dict[str, TaskStatus] = {
    " ": "open",
    "x": "done",
    "X": "done",
    "~": "in_progress",
    "-": "blocked",
}
# id, title, sub-bullets, and the lead a Blocked bullet gets (the first sub-bullet's style).
TASKS = [
    ("1", "First", ["  - criterion a", "  - Depends on: 2"], "  - "),
    ("2", "Second", [], "  - "),
    ("3", "[PLAN] Third", ["    * criterion b"], "    * "),
]

# Any character but line breaks and lone surrogates, including the odd ones that
# str.splitlines() treats as line breaks (\x0b, \x1c, \x85, \u2028) and a BOM.
CHARS = st.characters(codec="utf-8", exclude_characters="\r\n")
ANY_LINE = st.text(CHARS, max_size=30).filter(
    # A fence would hide what follows; a second Tasks heading is an error of its own.
    lambda line: (
        "tasks" not in line.casefold() and not line.lstrip(" \t").startswith(("```", "~~~"))
    )
)
# Free text inside the section: unindented, so it is no task and no task's sub-bullet.
SECTION_LINE = st.one_of(st.just(""), st.text(CHARS, max_size=30).map(lambda t: "Note " + t))


@dataclass(frozen=True)
class Doc:
    preamble: list[str]
    intro: list[str]
    between: list[list[str]]  # free text after each task
    postamble: list[str]
    eol: str
    final_eol: bool

    def render(self, marks: list[str], reasons: list[str | None]) -> str:
        lines = [*self.preamble, "## Tasks", *self.intro]
        for (task_id, title, bullets, lead), mark, reason, free in zip(
            TASKS, marks, reasons, self.between, strict=True
        ):
            lines.append(f"- [{mark}] {task_id}. {title}")
            lines.extend(bullets)
            if reason is not None:
                lines.append(f"{lead}Blocked: {reason}")
            lines.extend(free)
        lines.extend(["## Notes", *self.postamble])
        return self.eol.join(lines) + (self.eol if self.final_eol else "")


docs = st.builds(
    Doc,
    preamble=st.lists(ANY_LINE, max_size=5),
    intro=st.lists(SECTION_LINE, max_size=3),
    between=st.lists(st.lists(SECTION_LINE, max_size=3), min_size=3, max_size=3),
    postamble=st.lists(ANY_LINE, max_size=5),
    eol=st.sampled_from(["\n", "\r\n"]),
    final_eol=st.booleans(),
)
REASON = st.text(CHARS, max_size=20).filter(lambda r: " ".join(r.split()) != "")


@settings(deadline=None, max_examples=150)
@given(
    doc=docs,
    marks=st.lists(st.sampled_from(list(STATUS_OF)), min_size=3, max_size=3),
    old_reasons=st.lists(st.one_of(st.none(), REASON), min_size=3, max_size=3),
    target=st.integers(0, 2),
    status=st.sampled_from(list(STATUS_MARKS)),
    reason=st.one_of(st.none(), REASON, st.text(max_size=20)),
)
def test_set_status_changes_only_the_task(
    doc: Doc,
    marks: list[str],
    old_reasons: list[str | None],
    target: int,
    status: TaskStatus,
    reason: str | None,
) -> None:
    # Only blocked tasks carry a Blocked bullet here; a stale one is covered elsewhere.
    old_reasons = [
        " ".join(r.split()) if r is not None and STATUS_OF[m] == "blocked" else None
        for m, r in zip(marks, old_reasons, strict=True)
    ]
    before = doc.render(marks, old_reasons)

    new_marks = list(marks)
    if STATUS_OF[marks[target]] != status:
        new_marks[target] = STATUS_MARKS[status]
    new_reasons = list(old_reasons)
    given_reason = " ".join(reason.split()) if reason is not None else ""
    if status != "blocked":
        new_reasons[target] = None
    elif given_reason:
        new_reasons[target] = given_reason
    expected = doc.render(new_marks, new_reasons)

    with tempfile.TemporaryDirectory() as tmp:
        path = write(Path(tmp) / "PRD.md", before)
        tracker = MarkdownTracker(path)
        old_tasks = tracker.load()
        updated = tracker.set_status(str(target + 1), status, reason)
        assert read(path) == expected
        new_tasks = tracker.load()
    assert updated == new_tasks[target]
    assert updated.status == status
    assert updated.blocked_reason == (new_reasons[target] if status == "blocked" else None)
    assert [t for i, t in enumerate(new_tasks) if i != target] == [
        t for i, t in enumerate(old_tasks) if i != target
    ]

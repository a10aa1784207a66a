"""Parsing a markdown PRD: markers, ids, acceptance criteria, dependencies, blocked reasons,
kinds, and where the task list starts and ends."""

from __future__ import annotations

from pathlib import Path

import pytest

from ralph.tracker import MarkdownTracker, Task
from tests.tracker.helpers import write


def load(tmp_path: Path, tasks: str, *, before: str = "# PRD\n\n", after: str = "") -> list[Task]:
    text = f"{before}## Tasks\n\n{tasks}{after}"
    return MarkdownTracker(write(tmp_path / "PRD.md", text)).load()


def by_id(tasks: list[Task]) -> dict[str, Task]:
    return {task.id: task for task in tasks}


@pytest.mark.parametrize(
    ("line", "status"),
    [
        ("- [ ] 1. Task", "open"),
        ("- [x] 1. Task", "done"),
        ("- [X] 1. Task", "done"),
        ("- [~] 1. Task", "in_progress"),
        ("- [-] 1. Task", "blocked"),
        ("* [ ] 1. Task", "open"),
        ("* [x] 1. Task", "done"),
        ("+ [~] 1. Task", "in_progress"),
    ],
)
def test_every_marker(tmp_path: Path, line: str, status: str) -> None:
    [task] = load(tmp_path, line + "\n")
    assert task.status == status
    assert task.id == "1"
    assert task.title == "Task"


def test_a_full_task(tmp_path: Path) -> None:
    tasks = load(
        tmp_path,
        "- [ ] 1. Set up the project\n"
        "  - pyproject.toml declares the package\n"
        "  - `pytest` runs\n"
        "- [ ] 2. Add login\n"
        "  - Depends on: 1\n",
    )
    assert tasks == [
        Task(
            id="1",
            title="Set up the project",
            status="open",
            kind="build",
            acceptance=("pyproject.toml declares the package", "`pytest` runs"),
            depends_on=(),
            priority=None,
            order=0,
            blocked_reason=None,
        ),
        Task(
            id="2",
            title="Add login",
            status="open",
            kind="build",
            acceptance=(),
            depends_on=("1",),
            priority=None,
            order=1,
            blocked_reason=None,
        ),
    ]


# ids


@pytest.mark.parametrize(
    ("line", "task_id", "title"),
    [
        ("- [ ] 1. Set up the project", "1", "Set up the project"),
        ("- [x] T-3: Add login", "T-3", "Add login"),
        ("- [ ] story_7. Write docs", "story_7", "Write docs"),
        ("- [ ] 12:   Spaces after the id", "12", "Spaces after the id"),
        ("- [ ] 4. [PLAN] Plan the API", "4", "[PLAN] Plan the API"),
        # Not an id: the token must be followed by whitespace.
        ("- [ ] v2.0 release notes", "v2-0-release-notes", "v2.0 release notes"),
        ("- [ ] README.md: update it", "readme-md-update-it", "README.md: update it"),
        ("- [ ] 1.Set up", "1-set-up", "1.Set up"),
    ],
)
def test_explicit_ids(tmp_path: Path, line: str, task_id: str, title: str) -> None:
    [task] = load(tmp_path, line + "\n")
    assert (task.id, task.title) == (task_id, title)


@pytest.mark.parametrize(
    ("title", "slug"),
    [
        ("Set up the project", "set-up-the-project"),
        ("  Add *login*, then logout!  ", "add-login-then-logout"),
        ("[PLAN] Design the API", "plan-design-the-api"),
        ("Café au lait", "caf-au-lait"),
        ("A" * 39 + " b c", "a" * 39),
        ("x" * 60, "x" * 40),
        ("---Trim me---", "trim-me"),
    ],
)
def test_slug_ids(tmp_path: Path, title: str, slug: str) -> None:
    [task] = load(tmp_path, f"- [ ] {title}\n")
    assert task.id == slug
    assert task.title == title.strip()


def test_ids_are_stable_when_other_tasks_are_inserted_or_removed(tmp_path: Path) -> None:
    original = load(
        tmp_path,
        "- [ ] Write the parser\n- [ ] 7. Explicit one\n- [x] Ship it\n",
    )
    inserted = load(
        tmp_path,
        "- [ ] A brand new first task\n- [ ] Write the parser\n- [ ] 2. Another\n"
        "- [ ] 7. Explicit one\n- [x] Ship it\n",
    )
    removed = load(tmp_path, "- [ ] 7. Explicit one\n- [x] Ship it\n")
    assert [t.id for t in original] == ["write-the-parser", "7", "ship-it"]
    assert [t.id for t in inserted] == [
        "a-brand-new-first-task",
        "write-the-parser",
        "2",
        "7",
        "ship-it",
    ]
    assert [t.id for t in removed] == ["7", "ship-it"]
    # Orders move, ids do not.
    assert by_id(inserted)["ship-it"].order == 4
    assert by_id(removed)["ship-it"].order == 1


# acceptance criteria


def test_acceptance_criteria_forms(tmp_path: Path) -> None:
    [task] = load(
        tmp_path,
        "- [ ] 1. Task\n"
        "  - plain bullet\n"
        "  * star bullet\n"
        "  + plus bullet\n"
        "  1. numbered\n"
        "  - [ ] a nested checkbox is a criterion, not a task\n"
        "  - [x] checked criterion\n"
        "  - wrapped over\n"
        "    two lines\n"
        "    - deeper bullets count too\n"
        "\tThe tab-indented line continues the last bullet\n"
        "  -\n",
    )
    assert task.acceptance == (
        "plain bullet",
        "star bullet",
        "plus bullet",
        "numbered",
        "a nested checkbox is a criterion, not a task",
        "checked criterion",
        "wrapped over two lines",
        "deeper bullets count too The tab-indented line continues the last bullet",
    )


def test_a_title_may_continue_on_indented_lines(tmp_path: Path) -> None:
    [task] = load(tmp_path, "- [ ] Set up the\n  whole project\n  - criterion\n")
    assert task.title == "Set up the whole project"
    assert task.id == "set-up-the-whole-project"
    assert task.acceptance == ("criterion",)


def test_a_paragraph_after_a_blank_line_is_free_text(tmp_path: Path) -> None:
    [first, second] = load(
        tmp_path,
        "- [ ] 1. First\n"
        "  - criterion\n"
        "\n"
        "  A note the author wrote inside the item.\n"
        "\n"
        "  - a loose criterion after the note\n"
        "Unindented text ends the task.\n"
        "  - so this bullet belongs to no task\n"
        "- [ ] 2. Second\n",
    )
    assert first.acceptance == ("criterion", "a loose criterion after the note")
    assert second.acceptance == ()


def test_depends_on_forms(tmp_path: Path) -> None:
    tasks = by_id(
        load(
            tmp_path,
            "- [x] 1. One\n"
            "- [x] 3. Three\n"
            "- [ ] 4. Comma separated\n  - Depends on: 1, 3\n"
            "- [ ] 5. Space separated\n  - depends on: 1 3\n"
            "- [ ] 6. Hyphenated, repeated\n  - Depends-on: 3\n  - DEPENDS ON: 1,3\n"
            "- [ ] 7. None\n  - Depends on: none\n"
            "- [ ] 8. As a checkbox\n  - [ ] Depends on: 7\n",
        )
    )
    assert tasks["4"].depends_on == ("1", "3")
    assert tasks["5"].depends_on == ("1", "3")
    assert tasks["6"].depends_on == ("3", "1")
    assert tasks["7"].depends_on == ()
    assert tasks["8"].depends_on == ("7",)
    assert all(task.acceptance == () for task in tasks.values())


def test_depends_on_slug_ids(tmp_path: Path) -> None:
    tasks = load(
        tmp_path,
        "- [ ] Write the parser\n- [ ] Use it\n  - Depends on: write-the-parser\n",
    )
    assert tasks[1].depends_on == ("write-the-parser",)


def test_blocked_reason(tmp_path: Path) -> None:
    tasks = by_id(
        load(
            tmp_path,
            "- [-] 1. Blocked\n  - criterion\n  - Blocked: waiting for the API key\n"
            "- [-] 2. Blocked without a reason\n"
            "- [-] 3. Empty reason\n  - blocked:\n"
            "- [ ] 4. Reopened, the old reason is history\n  - Blocked: old\n"
            "- [-] 5. Two reasons, the last counts\n  - Blocked: first\n  - Blocked: second\n",
        )
    )
    assert tasks["1"].blocked_reason == "waiting for the API key"
    assert tasks["1"].acceptance == ("criterion",)
    assert tasks["2"].blocked_reason is None
    assert tasks["3"].blocked_reason is None
    assert tasks["4"].blocked_reason is None
    assert tasks["4"].acceptance == ()
    assert tasks["5"].blocked_reason == "second"


@pytest.mark.parametrize(
    ("title", "kind"),
    [
        ("[PLAN] Plan the API", "plan"),
        ("Write the guide [docs]", "docs"),
        ("[Hotfix] Crash on start", "hotfix"),
        ("[REVIEW] Look over auth", "review"),
        ("[DOCS] then [PLAN]: the first tag wins", "docs"),
        ("An ordinary task", "build"),
        ("[BUILD] is no tag", "build"),
        ("PLAN without brackets", "build"),
    ],
)
def test_kinds_from_tags(tmp_path: Path, title: str, kind: str) -> None:
    [task] = load(tmp_path, f"- [ ] 1. {title}\n")
    assert task.kind == kind
    assert task.title == title


# the section


def test_only_the_tasks_section_counts(tmp_path: Path) -> None:
    tasks = load(
        tmp_path,
        "- [ ] 1. Real\n",
        before="# PRD\n\n## Goals\n\n- [ ] 0. Not a task, a goal\n\n",
        after="\n## Notes\n\n- [ ] 9. Not a task either\n\n# Appendix\n- [ ] 10. Nor this\n",
    )
    assert [t.id for t in tasks] == ["1"]


def test_a_level_one_heading_ends_the_section(tmp_path: Path) -> None:
    tasks = load(tmp_path, "- [ ] 1. Real\n# Appendix\n- [ ] 2. Not a task\n")
    assert [t.id for t in tasks] == ["1"]


def test_subheadings_stay_in_the_section(tmp_path: Path) -> None:
    tasks = load(
        tmp_path,
        "### Phase 1\n\n- [ ] 1. One\n  - c1\n\n### Phase 2\n- [ ] 2. Two\n",
    )
    assert [(t.id, t.acceptance) for t in tasks] == [("1", ("c1",)), ("2", ())]


@pytest.mark.parametrize(
    "heading", ["## Tasks", "## tasks", "##   TASKS  ", "## Tasks ##", " ## Tasks", "##\tTasks"]
)
def test_heading_spellings(tmp_path: Path, heading: str) -> None:
    path = write(tmp_path / "PRD.md", f"# PRD\n{heading}\n- [ ] 1. One\n")
    assert [t.id for t in MarkdownTracker(path).load()] == ["1"]


def test_fenced_code_is_not_parsed(tmp_path: Path) -> None:
    tasks = load(
        tmp_path,
        "Example:\n\n```markdown\n## Tasks\n- [ ] 8. example\n## Other\n```\n\n"
        "- [ ] 1. One\n"
        "  ~~~\n  - [ ] not a criterion\n  ~~~\n"
        "  - criterion\n",
        before="```\n## Tasks\n```\n",
    )
    assert [(t.id, t.acceptance) for t in tasks] == [("1", ("criterion",))]


def test_tasks_grouped_under_plain_bullets(tmp_path: Path) -> None:
    tasks = load(
        tmp_path,
        "- Backend\n"
        "  - [ ] 1. API\n"
        "    - returns JSON\n"
        "- Frontend\n"
        "  - [ ] 2. Page\n"
        "- [ ] 3. Less indented than the first task\n",
    )
    assert [(t.id, t.acceptance) for t in tasks] == [
        ("1", ("returns JSON",)),
        ("2", ()),
        ("3", ()),
    ]


def test_crlf_bom_and_no_final_newline(tmp_path: Path) -> None:
    text = "\ufeff## Tasks\r\n- [x] 1. One\r\n  - c\r\n- [ ] 2. Two\r\n  - Depends on: 1"
    tasks = MarkdownTracker(write(tmp_path / "PRD.md", text)).load()
    assert [(t.id, t.status, t.acceptance, t.depends_on) for t in tasks] == [
        ("1", "done", ("c",), ()),
        ("2", "open", (), ("1",)),
    ]


def test_orders_and_no_priority(tmp_path: Path) -> None:
    tasks = load(tmp_path, "- [ ] a\n- [ ] b\n- [ ] c\n")
    assert [(t.id, t.order, t.priority) for t in tasks] == [
        ("a", 0, None),
        ("b", 1, None),
        ("c", 2, None),
    ]

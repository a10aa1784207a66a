"""tasks.md: the planner's format and the variants agents write."""

from __future__ import annotations

import pytest

from ralph.workflow.errors import WorkflowError
from ralph.workflow.tasks_file import TaskKind, parse_tasks

PLANNER_FORMAT = """\
# Tasks

## Legend
- `[ ]` Not started
- `[/]` In progress
- `[P]` Pending review
- `[x]` Completed

## Planning Tasks
- plan-init: Initialize session artifacts
    - **Type**: Sequential
    - **Files**: plan.md, progress.md, tasks.md, 260131-144400.instructions.md
    - **Objective**: Set up the session
    - **Success Criteria**: All four files exist
    - **Inherits From**: None

## Implementation Tasks
- task-1: Add the parser
    - **Type**: Parallelizable
    - **Files**: `src/x.cs`, `src/y.cs`
    - **Objective**: Parse the input
    - **Success Criteria**: Tests pass
    - **Inherits From**: None
- task-2: Use the parser
    - **Type**: Sequential (depends on task-1)
    - **Deliverables**: docs/report.md
    - **Objective**: Wire it in
    - **Success Criteria**: The CLI reads files
    - **Inherits From**: task-1

## Knowledge Inheritance Rules
- **task-2, 3**: Must use the interface from task-1
"""

TEMPLATES_VARIANT = """\
# Task List

## Planning Tasks
- qa-brainstorm: Generate questions
    - **Type**: Sequential
- qa-research: Answer them
    - **Type**: Sequential (depends on qa-brainstorm)

## Implementation Tasks
- task-1: Build it
  * **Objective:** Build the thing
  * **Success Criteria**:
      - Criterion 1: the build passes

      - Criterion 2: the docs say so
  * **Depends On**: qa-research and task-0.5
  * **Notes**: something else
- task-2.1: A subtask
    - **Type**: Sequential (depends on task-1, qa-research; after review)
Some prose at the margin ends the task.
    - **Objective**: not task-2.1's
"""


def test_the_planners_format():
    tasks = parse_tasks(PLANNER_FORMAT)
    assert tasks.ids == ("plan-init", "task-1", "task-2")
    init, first, second = tasks.tasks
    assert (init.section, init.kind, init.line) == ("Planning Tasks", TaskKind.PLANNING, 10)
    assert init.description == "Initialize session artifacts"
    assert init.files == ("plan.md", "progress.md", "tasks.md", "260131-144400.instructions.md")
    assert init.dependencies == ()
    assert init.inherits_from == ()
    assert first.kind is TaskKind.IMPLEMENTATION
    assert first.files == ("src/x.cs", "src/y.cs")
    assert first.type == "Parallelizable"
    assert first.objective == "Parse the input"
    assert first.success_criteria == "Tests pass"
    assert second.type == "Sequential (depends on task-1)"
    assert second.dependencies == ("task-1",)
    assert (second.line, second.dependencies_line) == (24, 25)
    assert second.files == ("docs/report.md",)
    assert second.inherits_from == ("task-1",)
    assert tasks.count() == 3
    assert tasks.count(TaskKind.PLANNING) == 1
    assert tasks.count(TaskKind.IMPLEMENTATION) == 2
    assert tasks.get("task-2") is second
    assert tasks.get("task-3") is None


def test_odd_but_valid_variants():
    tasks = parse_tasks(TEMPLATES_VARIANT)
    assert tasks.ids == ("qa-brainstorm", "qa-research", "task-1", "task-2.1")
    brainstorm, research, build, sub = tasks.tasks
    assert brainstorm.kind is TaskKind.PLANNING  # by its section, not its id
    assert research.dependencies == ("qa-brainstorm",)
    assert build.objective == "Build the thing"
    assert build.success_criteria == ("- Criterion 1: the build passes\n"
                                      "- Criterion 2: the docs say so")
    assert build.dependencies == ("qa-research", "task-0.5")
    assert build.fields["notes"] == "something else"
    assert sub.dependencies == ("task-1", "qa-research")
    assert sub.objective is None  # the bullet after the prose is not the task's


def test_tasks_without_sections_and_planning_by_id():
    tasks = parse_tasks("# Tasks\n- plan-breakdown: Break down\n- task-1: Do\n")
    assert [task.kind for task in tasks.tasks] == [TaskKind.PLANNING, TaskKind.IMPLEMENTATION]
    assert tasks.tasks[0].section is None


def test_bullets_outside_task_sections_and_in_code_are_not_tasks():
    text = ("## Notes\n- task-9: not a task here\n## Implementation Tasks\n"
            "```\n- task-8: quoted\n```\n"
            "- task-1: real\n- Note: prose\n- `task-2`: quoted id\n")
    assert parse_tasks(text).ids == ("task-1", "task-2")


def test_an_empty_file_has_no_tasks():
    assert parse_tasks("").tasks == ()


def test_a_duplicate_task_id_is_an_error_naming_both_lines():
    text = "## Implementation Tasks\n- task-1: A\n    - **Type**: Sequential\n- task-1: B\n"
    with pytest.raises(WorkflowError) as raised:
        parse_tasks(text, ".ralph-sessions/260131-144400/tasks.md")
    assert str(raised.value) == (".ralph-sessions/260131-144400/tasks.md:4: duplicate task id "
                                 "task-1 (first on line 2)")


def test_task_line_variants_are_tasks():
    text = ("## Implementation Tasks\n- [ ] task-1: checkbox\n    - Type: Parallelizable\n"
            "1. task-2: numbered\n    - **Type**: Sequential (depends on task-1)\n"
            "    - task-2.1: a sub-task\n      - Files: a.py, `b.py`\n"
            "- **task-3:** bold with the colon inside\n"
            "    - Depends-On-Nothing: an unknown plain field is prose\n")
    tasks = parse_tasks(text)
    assert tasks.ids == ("task-1", "task-2", "task-2.1", "task-3")
    assert tasks.get("task-1").type == "Parallelizable"  # type: ignore[union-attr]
    assert tasks.get("task-2").dependencies == ("task-1",)  # type: ignore[union-attr]
    assert tasks.get("task-2.1").files == ("a.py", "b.py")  # type: ignore[union-attr]
    assert tasks.get("task-2.1").line == 6  # type: ignore[union-attr]


def test_only_planning_and_implementation_sections_hold_tasks():
    text = ("- plan-init: before any section\n## Planning Tasks\n- plan-x: plan it\n"
            "## Implementation Tasks\n- task-1: do it\n"
            "## Task Summary\n- task-1: done first\n- plan-x: then\n")
    tasks = parse_tasks(text)
    assert tasks.ids == ("plan-init", "plan-x", "task-1")
    assert [task.kind for task in tasks.tasks] == [TaskKind.PLANNING, TaskKind.PLANNING,
                                                   TaskKind.IMPLEMENTATION]


def test_a_task_line_that_cannot_be_read_is_an_error_not_dropped():
    for line in ("### task-2: as a heading", "- [x]task-2: no space",
                 "+ task-2: plus bullet", "task-2: no bullet"):
        text = f"## Implementation Tasks\n- task-1: fine\n{line}\n"
        with pytest.raises(WorkflowError, match=r"^tasks.md:3: cannot read this task line: "):
            parse_tasks(text)


def test_only_task_shaped_words_are_dependencies():
    text = ("## Implementation Tasks\n- task-1: A\n- qa-check: B\n"
            "- task-2: C\n    - **Type**: Sequential (depends on task-1's read-only API)\n"
            "- task-3: D\n    - **Dependencies**: task-1 (needs the auth-service config)\n"
            "- task-4: E\n    - **Type**: sequential, depends on qa-check and e2e-tests\n"
            "- task-5: F\n    - **Type**: Sequential (depends on task-9 and plan-missing)\n")
    tasks = parse_tasks(text)
    assert [tasks.get(t).dependencies for t in ("task-2", "task-3", "task-4", "task-5")] == [  # type: ignore[union-attr]
        ("task-1",), ("task-1",), ("qa-check",), ("task-9", "plan-missing")]

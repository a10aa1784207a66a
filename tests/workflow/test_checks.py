"""Side-effect checks: each role's claims held against snapshots of the session."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from ralph.workflow.checks import (
    FileState,
    Snapshot,
    Violation,
    check_side_effects,
    snapshot,
)
from ralph.workflow.contracts import ExecutorInput, ExecutorOutput
from ralph.workflow.errors import WorkflowError
from ralph.workflow.session_dir import SessionDir

SID = "260131-144400"
SP = f".ralph-sessions/{SID}/"

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
- [x] plan-init (Completed)
- [ ] task-1 (Not Started)
- [ ] task-2 (Not Started)
"""

PART1 = """\
# Task Report: task-1
---
## PART 1: IMPLEMENTATION REPORT
*(Created by Ralph-Executor)*
### Objective Recap
First.
---
## PART 2: REVIEW REPORT
*(To be appended by Ralph-Reviewer)*
"""

PART2 = """
---
## PART 2: REVIEW REPORT
*(Appended by Ralph-Reviewer)*
### Recommendation
**Status**: {status}
**Reasoning**: checked
"""


@pytest.fixture
def session(tmp_path: Path) -> SessionDir:
    return SessionDir.create(tmp_path, datetime(2026, 1, 31, 14, 44, 0))


def _planned(session: SessionDir) -> None:
    session.plan.write_text("# Plan: x\n")
    session.tasks.write_text(TASKS)
    session.progress.write_text(PROGRESS)
    session.instructions.write_text("---\napplyTo: '.ralph-sessions/260131-144400/**'\n---\n")


def _run(session: SessionDir, act: Callable[[], object], role: str, given: dict[str, Any],
         output: dict[str, Any]) -> list[Violation]:
    before = snapshot(session)
    act()
    return check_side_effects(before, snapshot(session), role, {"SESSION_PATH": SP, **given},
                              output)


def _mark(session: SessionDir, task_id: str, marker: str) -> None:
    text = session.progress.read_text()
    new = re.sub(rf"^- \[.\] {re.escape(task_id)}\b.*$", f"- {marker} {task_id}", text,
                 flags=re.MULTILINE)
    assert new != text or f"{marker} {task_id}" in text
    session.progress.write_text(new)


# ---------------------------------------------------------------------------------------- planner


INIT = {"MODE": "INITIALIZE", "USER_REQUEST": "build it"}


def test_an_honest_planner_initialize(session: SessionDir):
    output = {"status": "completed",
              "artifacts_created": ["plan.md", f"{SP}tasks.md", "progress.md",
                                    f"{SID}.instructions.md"],
              "artifacts_updated": [],
              "task_count": {"planning": 1, "implementation": 2, "total": 3}}
    assert _run(session, lambda: _planned(session), "planner", INIT, output) == []


def test_planner_initialize_that_wrote_nothing(session: SessionDir):
    output = {"status": "completed", "artifacts_created": ["plan.md"]}
    found = _run(session, lambda: None, "planner", INIT, output)
    assert found == [
        Violation("MODE INITIALIZE creates plan.md", f"no plan.md in {SP}"),
        Violation("MODE INITIALIZE creates tasks.md", f"no tasks.md in {SP}"),
        Violation("MODE INITIALIZE creates progress.md", f"no progress.md in {SP}"),
        Violation(f"MODE INITIALIZE creates ../{SID}.instructions.md",
                  f"no ../{SID}.instructions.md in {SP}"),
        Violation("artifacts_created: plan.md", f"no plan.md in {SP}"),
    ]


def test_a_blocked_planner_owes_no_files(session: SessionDir):
    output = {"status": "needs_clarification", "blockers": ["which database?"]}
    assert _run(session, lambda: None, "planner", INIT, output) == []


def test_planner_artifacts_claims(session: SessionDir):
    _planned(session)

    def act() -> None:
        session.plan.write_text("# Plan: y\n")

    output = {"status": "completed",
              "artifacts_created": ["notes.md", "../../etc/passwd", "tasks.md"],
              "artifacts_updated": [str(session.plan), "progress.md"]}
    found = _run(session, act, "planner", {"MODE": "UPDATE", "USER_REQUEST": "more"}, output)
    assert found == [
        Violation("artifacts_created: notes.md", f"no notes.md in {SP}"),
        Violation("artifacts_created: ../../etc/passwd", "not a file of this session (paths are "
                  "relative to the session directory or the project root)"),
        Violation("artifacts_created: tasks.md", "tasks.md was there before and is unchanged"),
        Violation("artifacts_updated: progress.md", "progress.md is unchanged"),
    ]


def test_planner_update_must_not_lose_its_files(session: SessionDir):
    _planned(session)
    found = _run(session, session.plan.unlink, "planner",
                 {"MODE": "UPDATE", "USER_REQUEST": "x"}, {"status": "completed"})
    assert found == [Violation("MODE UPDATE keeps plan.md", f"no plan.md in {SP}")]


def test_planner_task_breakdown_leaves_tasks_md_and_its_claims_hold(session: SessionDir):
    _planned(session)
    given = {"MODE": "TASK_BREAKDOWN", "USER_REQUEST": "x"}
    # Nothing to add is a valid breakdown; claiming an update that did not happen is not.
    assert _run(session, lambda: None, "planner", given, {"status": "completed"}) == []
    assert _run(session, lambda: None, "planner", given,
                {"status": "completed", "artifacts_updated": ["tasks.md"]}) == [
        Violation("artifacts_updated: tasks.md", "tasks.md is unchanged")]
    assert _run(session, session.tasks.unlink, "planner", given,
                {"status": "completed"})[0] == Violation(
        "MODE TASK_BREAKDOWN leaves a tasks.md", f"no tasks.md in {SP}")
    _planned(session)

    def act() -> None:
        session.tasks.write_text(TASKS + "- task-3: Third\n")

    output = {"status": "completed", "artifacts_updated": ["tasks.md"],
              "task_count": {"planning": 1, "implementation": 2, "total": 3}}
    assert _run(session, act, "planner", given, output) == [
        Violation("task_count.implementation = 2", "tasks.md has 3"),
        Violation("task_count.total = 3", "tasks.md has 4"),
    ]


def test_planner_discovery_first_cycle_creates_the_questions(session: SessionDir):
    _planned(session)
    given = {"MODE": "DISCOVERY", "USER_REQUEST": "x"}
    output = {"status": "needs_qa_cycle", "next_actions": ["qa_brainstorm"]}
    assert _run(session, lambda: None, "planner", given, output) == [
        Violation("MODE DISCOVERY (first cycle) creates plan.questions.md",
                  f"no plan.questions.md in {SP}")]
    assert _run(session, lambda: session.questions.write_text("# Q&A Discovery: x\n"),
                "planner", given, output) == []
    # A later cycle: the file is there already, nothing more is required of the planner.
    assert _run(session, lambda: None, "planner", given, output) == []


def test_planner_update_moves_no_implementation_marker(session: SessionDir):
    _planned(session)
    given = {"MODE": "UPDATE", "USER_REQUEST": "x"}

    def act() -> None:
        _mark(session, "task-1", "[x]")
        session.tasks.write_text(TASKS + "- task-3: Third\n- task-4: Fourth\n")
        session.progress.write_text(session.progress.read_text()
                                    + "- [ ] task-3 (Not Started)\n- [P] task-4\n")
        session.questions.write_text("# Q\n")

    output = {"status": "completed", "artifacts_updated": ["progress.md", "tasks.md"]}
    assert _run(session, act, "planner", given, output) == [
        Violation("the planner changes only ../260131-144400.instructions.md, plan.md, "
                  "progress.md, tasks.md", "plan.questions.md added"),
        Violation("the planner moves no implementation task's marker (task-1 is the "
                  "executor's and the orchestrator's)", "task-1 [ ] -> [x]"),
        Violation("the planner adds implementation tasks as [ ]", "task-4 absent -> [P]"),
    ]


def test_an_honest_planner_update_adds_tasks_and_completes_planning(session: SessionDir):
    _planned(session)
    _mark(session, "plan-init", "[/]")
    given = {"MODE": "DISCOVERY", "USER_REQUEST": "x"}

    def act() -> None:
        _mark(session, "plan-init", "[x]")
        session.tasks.write_text(TASKS.replace("## Implementation", "- plan-more: More\n\n"
                                               "## Implementation") + "- task-3: Third\n")
        session.progress.write_text(session.progress.read_text()
                                    + "- [ ] plan-more\n- [ ] task-3 (Not Started)\n")
        session.questions.write_text("# Q&A Discovery: x\n")
        session.plan.write_text("# Plan: more\n")

    assert _run(session, act, "planner", given, {"status": "completed"}) == []
    assert _run(session, lambda: _mark(session, "plan-more", "[/]"), "planner", given,
                {"status": "completed"}) == [
        Violation("the planner adds planning tasks as [ ] and sets them [x] only",
                  "plan-more [ ] -> [/]")]


# --------------------------------------------------------------------------------------- executor


def _execute(session: SessionDir, attempt: int = 1, marker: str = "[P]",
             report: str | None = PART1) -> Callable[[], None]:
    def act() -> None:
        _mark(session, "task-1", marker)
        if report is not None:
            session.report("task-1", attempt).write_text(report)
    return act


def _exec_input(attempt: int = 1) -> dict[str, Any]:
    return {"TASK_ID": "task-1", "ATTEMPT_NUMBER": attempt}


SUCCESS = {"status": "completed", "report_path": "tasks.task-1-report.md",
           "success_criteria_met": True}


def test_an_honest_executor(session: SessionDir):
    _planned(session)
    assert _run(session, _execute(session), "executor", _exec_input(), SUCCESS) == []


def test_an_honest_executor_as_models_with_a_root_relative_rework_report(session: SessionDir):
    _planned(session)
    session.report("task-1", 1).write_text(PART1 + PART2.format(status="Failed"))
    given = ExecutorInput.model_validate({"SESSION_PATH": SP, "TASK_ID": "task-1",
                                          "ATTEMPT_NUMBER": 2})
    output = ExecutorOutput(status="completed", report_path=f"{SP}tasks.task-1-report-r2.md",
                            success_criteria_met=True)
    before = snapshot(session)
    _execute(session, attempt=2)()
    assert check_side_effects(before, snapshot(session), "Ralph-Executor", given, output) == []


def test_executor_claims_a_report_it_did_not_write(session: SessionDir):
    _planned(session)
    found = _run(session, _execute(session, report=None), "executor", _exec_input(), SUCCESS)
    assert found == [Violation("report_path tasks.task-1-report.md written",
                               f"no tasks.task-1-report.md in {SP}")]


def test_executor_report_misnamed_for_the_attempt(session: SessionDir):
    _planned(session)
    session.report("task-1", 1).write_text(PART1)
    found = _run(session, _execute(session, attempt=1, report=PART1 + "more\n"), "executor",
                 _exec_input(2), SUCCESS)
    assert found == [
        Violation("report_path tasks.task-1-report.md for ATTEMPT_NUMBER 2",
                  "attempt 2's report is named tasks.task-1-report-r2.md"),
    ]


def test_executor_report_without_part1(session: SessionDir):
    _planned(session)
    found = _run(session, _execute(session, report="# Task Report: task-1\nDone.\n"),
                 "executor", _exec_input(), SUCCESS)
    assert found == [Violation("report tasks.task-1-report.md has its PART 1",
                               "no `## PART 1` heading in it")]


def test_executor_claims_success_without_moving_the_marker(session: SessionDir):
    _planned(session)
    found = _run(session, _execute(session, marker="[ ]"), "executor", _exec_input(), SUCCESS)
    assert found == [Violation("status completed, success_criteria_met true: task-1 [P]",
                               "task-1 [ ] -> [ ]")]


def test_executor_marks_review_pending_with_criteria_unmet(session: SessionDir):
    _planned(session)
    output = {**SUCCESS, "success_criteria_met": False}
    found = _run(session, _execute(session), "executor", _exec_input(), output)
    assert found == [Violation("status completed, success_criteria_met false: task-1 not [P]",
                               "task-1 [ ] -> [P]")]
    # Criteria unmet: [/] is right; [ ] means it never started.
    session.report("task-1", 1).unlink()
    assert _run(session, _execute(session, marker="[/]"), "executor", _exec_input(),
                output) == []
    session.report("task-1", 1).unlink()
    assert _run(session, _execute(session, marker="[ ]"), "executor", _exec_input(),
                output) == [Violation("implementation started: task-1 [ ] -> [/] at least",
                                      "task-1 [/] -> [ ]")]


def test_a_failed_executor_may_revert_its_marker(session: SessionDir):
    _planned(session)
    output = {"status": "failed", "report_path": "tasks.task-1-report.md",
              "success_criteria_met": False}
    assert _run(session, _execute(session, marker="[ ]"), "executor", _exec_input(),
                output) == []


def test_a_blocked_executor_may_write_no_report(session: SessionDir):
    _planned(session)
    output = {"status": "blocked", "report_path": "tasks.task-1-report.md",
              "success_criteria_met": False, "blockers": ["no network"]}
    found = _run(session, _execute(session, marker="[/]", report=None), "executor",
                 _exec_input(), output)
    assert found == []


def test_executor_must_not_set_completed_or_touch_other_tasks(session: SessionDir):
    _planned(session)

    def act() -> None:
        _execute(session, marker="[x]")()
        _mark(session, "task-2", "[/]")

    found = _run(session, act, "executor", _exec_input(), SUCCESS)
    assert found == [
        Violation("the executor marks task-1 [/] or [P] only",
                  "task-1 [ ] -> [x]: [x] and [F] are the orchestrator's"),
        Violation("the executor moves only task-1's marker", "task-2 [ ] -> [/]"),
    ]


def test_executor_breaking_progress_md(session: SessionDir):
    _planned(session)

    def act() -> None:
        _execute(session)()
        session.progress.write_text(session.progress.read_text().replace("[ ] task-2",
                                                                          "[done] task-2"))

    found = _run(session, act, "executor", _exec_input(), SUCCESS)
    assert found == [Violation("progress.md with task-1's marker moved",
                               "progress.md:4: unknown marker [done] for task-2 "
                               "(expected one of [ ] [/] [P] [x] [F])")]


def test_executor_overwriting_an_earlier_report(session: SessionDir):
    _planned(session)
    session.report("task-1", 1).write_text(PART1)

    def act() -> None:
        _execute(session, attempt=2)()
        session.report("task-1", 1).write_text("gone")

    output = {**SUCCESS, "report_path": "tasks.task-1-report-r2.md"}
    assert _run(session, act, "executor", _exec_input(2), output) == [
        Violation("the executor changes only progress.md, tasks.task-1-report-r2.md",
                  "tasks.task-1-report.md modified")]


def test_executor_editing_tasks_plan_or_other_progress_lines(session: SessionDir):
    _planned(session)

    def act() -> None:
        _execute(session)()
        session.tasks.write_text(TASKS.replace("- task-1: First", "- task-1: First, relaxed"))
        session.plan.write_text("# Plan: mine\n")
        session.progress.write_text(session.progress.read_text() + "Note: easy\n")

    claim = "the executor changes only progress.md, tasks.task-1-report.md"
    assert _run(session, act, "executor", _exec_input(), SUCCESS) == [
        Violation("the executor changes only task-1's line of progress.md",
                  "other lines changed"),
        Violation(claim, "plan.md modified"), Violation(claim, "tasks.md modified")]


# --------------------------------------------------------------------------------------- reviewer


REVIEW_INPUT = {"TASK_ID": "task-1", "REPORT_PATH": "tasks.task-1-report.md"}


def _reviewed(session: SessionDir) -> None:
    _planned(session)
    _mark(session, "task-1", "[P]")
    session.report("task-1", 1).write_text(PART1)


def _append(session: SessionDir, text: str) -> Callable[[], None]:
    def act() -> None:
        path = session.report("task-1", 1)
        path.write_text(path.read_text() + text)
    return act


def test_an_honest_reviewer(session: SessionDir):
    _reviewed(session)
    output = {"status": "completed", "verdict": "Failed", "feedback": "add tests"}
    assert _run(session, _append(session, PART2.format(status="❌ Failed")), "reviewer",
                REVIEW_INPUT, output) == []


def test_a_reviewer_replacing_the_placeholder_is_honest_too(session: SessionDir):
    _reviewed(session)

    def act() -> None:
        path = session.report("task-1", 1)
        head = PART1.split("---\n## PART 2", maxsplit=1)[0]
        path.write_text(head + PART2.format(status="Qualified"))

    output = {"status": "completed", "verdict": "Qualified"}
    assert _run(session, act, "reviewer", REVIEW_INPUT, output) == []


def test_reviewer_part2_contradicting_its_verdict(session: SessionDir):
    _reviewed(session)
    output = {"status": "completed", "verdict": "Qualified"}
    found = _run(session, _append(session, PART2.format(status="Failed")), "reviewer",
                 REVIEW_INPUT, output)
    assert found == [Violation("verdict Qualified",
                               "tasks.task-1-report.md's PART 2 says **Status**: Failed")]


def test_reviewer_part2_without_a_verdict(session: SessionDir):
    _reviewed(session)
    output = {"status": "completed", "verdict": "Qualified"}
    found = _run(session, _append(session, PART2.format(status="Qualified | Failed")),
                 "reviewer", REVIEW_INPUT, output)
    assert found == [Violation("verdict Qualified in PART 2's **Status** line",
                               "the last PART 2's last **Status**: Qualified | Failed")]


def test_reviewer_that_appended_nothing(session: SessionDir):
    _reviewed(session)
    output = {"status": "completed", "verdict": "Qualified"}
    assert _run(session, lambda: None, "reviewer", REVIEW_INPUT, output) == [
        Violation("PART 2 appended to tasks.task-1-report.md", "no new PART 2 section")]


def test_reviewer_that_modified_part1(session: SessionDir):
    _reviewed(session)

    def act() -> None:
        path = session.report("task-1", 1)
        path.write_text(path.read_text().replace("First.", "First, and better.")
                        + PART2.format(status="Qualified"))

    output = {"status": "completed", "verdict": "Qualified"}
    assert _run(session, act, "reviewer", REVIEW_INPUT, output) == [
        Violation("the reviewer leaves tasks.task-1-report.md's PART 1 as it is",
                  "the text before PART 2 changed")]


def test_reviewer_that_moved_a_marker(session: SessionDir):
    _reviewed(session)

    def act() -> None:
        _append(session, PART2.format(status="Qualified"))()
        _mark(session, "task-1", "[x]")

    output = {"status": "completed", "verdict": "Qualified"}
    assert _run(session, act, "reviewer", REVIEW_INPUT, output) == [
        Violation("the reviewer changes only tasks.task-1-report.md",
                  "progress.md modified (task-1 [P] -> [x])")]


def test_reviewer_of_a_missing_report(session: SessionDir):
    _planned(session)
    output = {"status": "completed", "verdict": "Qualified"}
    assert _run(session, lambda: None, "reviewer", REVIEW_INPUT, output) == [
        Violation("tasks.task-1-report.md with the executor's PART 1 reviewed",
                  "no tasks.task-1-report.md before the reviewer ran")]
    # A review ending in error over the missing report claims nothing.
    assert _run(session, lambda: None, "reviewer", REVIEW_INPUT,
                {"status": "error", "issues": ["no report"]}) == []


def test_reviewer_that_writes_the_report_itself(session: SessionDir):
    _planned(session)
    output = {"status": "completed", "verdict": "Qualified"}
    review = "## PART 2: REVIEW REPORT\n**Status**: Qualified\n"
    assert _run(session, lambda: session.report("task-1", 1).write_text(review), "reviewer",
                REVIEW_INPUT, output) == [
        Violation("tasks.task-1-report.md with the executor's PART 1 reviewed",
                  "no tasks.task-1-report.md before the reviewer ran")]
    # There before, but without a PART 1: nothing of the executor's to review.
    session.report("task-1", 1).write_text("# Task Report: task-1\nnotes\n")
    assert _run(session, _append(session, "\n" + review), "reviewer", REVIEW_INPUT,
                output) == [
        Violation("tasks.task-1-report.md with the executor's PART 1 reviewed",
                  "tasks.task-1-report.md had no `## PART 1` before the reviewer ran")]


def test_reviewer_appending_to_part1_changes_it(session: SessionDir):
    _planned(session)
    head = PART1.split("---\n## PART 2", maxsplit=1)[0]
    session.report("task-1", 1).write_text(head)
    output = {"status": "completed", "verdict": "Qualified"}
    found = _run(session, _append(session, "Also verified by the reviewer.\n"
                                  + PART2.format(status="Qualified")),
                 "reviewer", REVIEW_INPUT, output)
    assert found == [Violation("the reviewer leaves tasks.task-1-report.md's PART 1 as it is",
                               "the text before PART 2 changed")]


def test_reviewer_rewriting_line_endings_leaves_part1_as_it_is(session: SessionDir):
    _reviewed(session)
    text = (PART1 + PART2.format(status="Qualified")).replace("\n", "\r\n")
    output = {"status": "completed", "verdict": "Qualified"}
    assert _run(session, lambda: session.report("task-1", 1).write_bytes(text.encode()),
                "reviewer", REVIEW_INPUT, output) == []


def test_reviewer_not_qualified_is_a_failed_verdict(session: SessionDir):
    _reviewed(session)
    output = {"status": "completed", "verdict": "Qualified"}
    assert _run(session, _append(session, PART2.format(status="Not Qualified")), "reviewer",
                REVIEW_INPUT, output) == [
        Violation("verdict Qualified", "tasks.task-1-report.md's PART 2 says **Status**: Failed")]
    _reviewed(session)
    output = {"status": "completed", "verdict": "Failed"}
    assert _run(session, _append(session, PART2.format(
        status="❌ Failed (task not qualified yet)")), "reviewer", REVIEW_INPUT, output) == []


def test_reviewer_editing_session_files(session: SessionDir):
    _reviewed(session)

    def act() -> None:
        _append(session, PART2.format(status="Qualified"))()
        session.tasks.write_text(TASKS.replace("First", "First (criteria relaxed)"))
        session.plan.write_text("# Plan: rewritten\n")
        session.progress.write_text(session.progress.read_text() + "\nNote: reviewed\n")
        session.report("task-2", 1).write_text("x")

    output = {"status": "completed", "verdict": "Qualified"}
    claim = "the reviewer changes only tasks.task-1-report.md"
    assert _run(session, act, "reviewer", REVIEW_INPUT, output) == [
        Violation(claim, "plan.md modified"), Violation(claim, "progress.md modified"),
        Violation(claim, "tasks.md modified"), Violation(claim, "tasks.task-2-report.md added")]


# ------------------------------------------------------------------------------------- questioner


def test_questioner_must_update_the_questions(session: SessionDir):
    _planned(session)
    session.questions.write_text("# Q&A Discovery: x\n")
    given = {"MODE": "BRAINSTORM", "CYCLE_NUMBER": 1}
    output = {"status": "completed", "questions_generated": 12}
    assert _run(session, lambda: None, "questioner", given, output) == [
        Violation("plan.questions.md updated", "plan.questions.md is unchanged")]
    assert _run(session, lambda: session.questions.write_text("# Q&A\n### Cycle 1\n"),
                "questioner", given, output) == []
    assert _run(session, lambda: None, "questioner", given, {"status": "blocked"}) == []


def test_questioner_changes_only_the_questions(session: SessionDir):
    _planned(session)
    given = {"MODE": "BRAINSTORM", "CYCLE_NUMBER": 1}

    def act() -> None:
        session.questions.write_text("# Q&A\n")
        _mark(session, "task-1", "[x]")
        session.plan.unlink()

    assert _run(session, act, "questioner", given, {"status": "completed"}) == [
        Violation("the questioner changes only plan.questions.md", "plan.md removed"),
        Violation("the questioner changes only plan.questions.md",
                  "progress.md modified (task-1 [ ] -> [x])")]


# ------------------------------------------------------------------------------------------ pure


def test_the_check_is_a_pure_function_of_its_snapshots(tmp_path: Path):
    # Hand-made snapshots of a session that does not exist on disk.
    session = SessionDir(tmp_path, SID)
    report = PART1 + PART2.format(status="Qualified")
    before = Snapshot(session, {"progress.md": FileState(10, "a")},
                      texts={"progress.md": "- [ ] task-1\n"})
    after = Snapshot(session, {"progress.md": FileState(10, "b"),
                               "tasks.task-1-report.md": FileState(len(report), "c")},
                     texts={"progress.md": "- [P] task-1\n", "tasks.task-1-report.md": report})
    assert check_side_effects(before, after, "executor", _exec_input(), SUCCESS) == []
    assert check_side_effects(after, after, "executor", _exec_input(), SUCCESS) == [
        Violation("report_path tasks.task-1-report.md written",
                  "tasks.task-1-report.md was there before and is unchanged")]


def test_snapshot_records_files_dirs_texts_and_the_instructions(session: SessionDir):
    _planned(session)
    (session.path / "tests" / "task-1").mkdir(parents=True)
    (session.path / "tests" / "task-1" / "shot.png").write_bytes(b"\x89PNG")
    snap = snapshot(session)
    assert sorted(snap.files) == [f"../{SID}.instructions.md", "plan.md", "progress.md",
                                  "tasks.md", "tests/task-1/shot.png"]
    assert snap.dirs == {"tests", "tests/task-1"}
    assert snap.text("tasks.md") == TASKS
    assert snap.text("tests/task-1/shot.png") is None
    assert snap.files["tests/task-1/shot.png"].size == 4
    for claimed, key in (("plan.md", "plan.md"), ("./plan.md", "plan.md"),
                         (f"{SP}plan.md", "plan.md"), (str(session.plan), "plan.md"),
                         (f"{SID}.instructions.md", f"../{SID}.instructions.md"),
                         (f".ralph-sessions/{SID}.instructions.md", f"../{SID}.instructions.md"),
                         (str(session.instructions), f"../{SID}.instructions.md"),
                         ("tests/", "tests"), ("`tasks.md`", "tasks.md"),
                         ("../other/plan.md", None), ("/etc/passwd", None), ("", None),
                         (".", None), (".ralph-sessions/260131-000000/plan.md", None)):
        assert snap.key_for(claimed) == key, claimed


def test_an_unknown_role(session: SessionDir):
    snap = snapshot(session)
    with pytest.raises(WorkflowError, match="unknown role 'librarian'"):
        check_side_effects(snap, snap, "librarian", {}, {})

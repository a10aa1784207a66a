"""The scripted fake role agent (ralph.testing.fake_roles), run as the orchestrator runs it: a
subprocess with the prompt on stdin, in a project directory, writing the session files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ralph.testing.fake_roles import (
    FakeRolesError,
    detect_role,
    next_step,
    parse_prompt,
    read_inputs,
    render_answer,
)
from ralph.workflow.answers import InvalidOutput, extract_output, parse_output
from ralph.workflow.contracts import (
    ExecutorInput,
    PlannerInput,
    QuestionerInput,
    ReviewerInput,
    RoleInput,
)
from ralph.workflow.integrity import validate_session
from ralph.workflow.progress import Marker, read_progress, set_marker
from ralph.workflow.prompts import build_prompt, default_instructions
from ralph.workflow.reports import Verdict, parse_report
from ralph.workflow.session_dir import SessionDir
from ralph.workflow.tasks_file import TaskKind, parse_tasks

SID = "260131-144400"
SESSION_PATH = f".ralph-sessions/{SID}/"
AGENTS = {"planner": "Ralph-Planner", "executor": "Ralph-Executor",
          "reviewer": "Ralph-Reviewer", "questioner": "Ralph-Questioner"}


def prompt(role: str, **keys: str | int) -> str:
    """A prompt shaped as the orchestrator builds it: instructions that name other roles and
    quote an example input, then the real input, then the output schema."""
    other = "Ralph-Reviewer" if role == "executor" else "Ralph-Executor"
    lines = "\n".join(f"{key}: {value}" for key, value in keys.items())
    return (f"# {AGENTS[role]}\n\nYou are {AGENTS[role]}. The {other} works after you.\n"
            "Example input:\n\nSESSION_PATH: .ralph-sessions/000000-000000/\nMODE: UPDATE\n"
            "TASK_ID: task-9\n\n## Input\n\n" + lines +
            '\n\n## Output\n\nEnd with one JSON object matching:\n{"type": "object"}\n')


class Project:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.session = root / ".ralph-sessions" / SID
        self.script_path = root / "script.json"

    def script(self, script: dict[str, Any]) -> Path:
        self.script_path.write_text(json.dumps(script))
        return self.script_path

    def run(self, role: str, *args: str, env: dict[str, str] | None = None,
            **keys: str | int) -> subprocess.CompletedProcess[str]:
        """The fake as a subprocess in the project, given a prompt with these KEY lines (and
        the script, unless `env` names it)."""
        return self._run(role, args, env, keys)

    def _run(self, role: str, args: tuple[str, ...], env: dict[str, str] | None,
             keys: dict[str, str | int]) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "ralph.testing.fake_roles", *args]
        if self.script_path.exists() and not env:
            argv += ["--script", str(self.script_path)]
        return subprocess.run(argv, check=False, cwd=self.root, input=prompt(role, **keys),
                              text=True, capture_output=True, timeout=30,
                              env={**os.environ, **(env or {})})

    def plan(self, **keys: str) -> dict[str, Any]:
        done = self._run("planner", (), None, {"SESSION_PATH": SESSION_PATH, **keys})
        assert done.returncode == 0, done.stderr
        return parse_output("planner", done.stdout).model_dump()

    def read(self, name: str) -> str:
        return (self.session / name).read_text()

    def markers(self) -> dict[str, Marker]:
        return read_progress(self.session / "progress.md").markers


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path)


def test_honest_session_from_plan_to_review(project: Project) -> None:
    out = project.plan(MODE="INITIALIZE", USER_REQUEST="Add a greet() function")
    assert out["status"] == "completed"
    assert out["artifacts_created"] == ["plan.md", "tasks.md", "progress.md",
                                        f"../{SID}.instructions.md"]
    assert out["next_actions"] == ["execute"]
    assert out["blockers"] == []
    assert out["task_count"] == {"planning": 1, "implementation": 1, "total": 2}
    session = SessionDir(project.root, SID)
    files = validate_session(session)  # the orchestrator's own consistency check passes
    assert files is not None
    tasks = parse_tasks(project.read("tasks.md"))
    assert tasks.ids == ("plan-init", "task-1")
    task = tasks.get("task-1")
    assert task is not None
    assert task.kind is TaskKind.IMPLEMENTATION
    assert task.description == "Add a greet() function"
    assert task.objective and task.success_criteria and task.inherits_from == ()
    assert project.markers() == {"plan-init": Marker.COMPLETED, "task-1": Marker.NOT_STARTED}
    assert project.read("plan.md").startswith("# Plan: Add a greet() function\n")
    for heading in ("## Goal & Success Criteria", "## Target Files/Artifacts",
                    "## Context & Analysis", "## Proposed Design/Changes/Approach",
                    "## Verification & Testing"):
        assert heading in project.read("plan.md")
    instructions = (project.root / ".ralph-sessions" / f"{SID}.instructions.md").read_text()
    assert f"applyTo: '.ralph-sessions/{SID}/**'" in instructions.split("---")[1]

    project.script({"executor": [{"write": {"greet.py": "def greet():\n    return 'hi'\n"}}]})
    done = project.run("executor", SESSION_PATH=SESSION_PATH, TASK_ID="task-1",
                       ATTEMPT_NUMBER=1)
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith("```")  # fenced by default
    executor = parse_output("executor", done.stdout)
    assert (executor.status, executor.success_criteria_met) == ("completed", True)
    assert executor.report_path == "tasks.task-1-report.md"
    assert (project.root / "greet.py").read_text().startswith("def greet")
    assert project.markers()["task-1"] is Marker.REVIEW_PENDING
    report = parse_report(project.read("tasks.task-1-report.md"))
    assert report.has_part1 and report.part2_count == 1 and report.status is None
    assert "greet.py" in report.head

    done = project.run("reviewer", SESSION_PATH=SESSION_PATH, TASK_ID="task-1",
                       REPORT_PATH="tasks.task-1-report.md")
    assert done.returncode == 0, done.stderr
    reviewer = parse_output("reviewer", done.stdout)
    assert (reviewer.status, reviewer.verdict) == ("completed", "Qualified")
    assert [r.met for r in reviewer.criteria_results] == [True]
    reviewed = parse_report(project.read("tasks.task-1-report.md"))
    assert reviewed.part2_count == 2 and reviewed.status is Verdict.QUALIFIED
    assert reviewed.head == report.head  # PART 1 untouched

    set_marker(project.session / "progress.md", "task-1", Marker.COMPLETED)
    final = project.plan(MODE="UPDATE", USER_REQUEST="Completion check")
    assert final["next_actions"] == ["complete"]
    assert final["artifacts_updated"] == ["plan.md"]
    assert "- Update: Completion check" in project.read("plan.md")


def test_qa_cycle_discovery_brainstorm_research(project: Project) -> None:
    project.plan(MODE="INITIALIZE", USER_REQUEST="Add a greet() function")
    out = project.plan(MODE="DISCOVERY", USER_REQUEST="Add a greet() function")
    assert out["artifacts_created"] == ["plan.questions.md"]
    assert out["next_actions"] == ["qa_brainstorm", "qa_research"]
    assert project.read("plan.questions.md").startswith("# Q&A Discovery: Add a greet()")

    done = project.run("questioner", SESSION_PATH=SESSION_PATH, MODE="BRAINSTORM",
                       CYCLE_NUMBER=1)
    brainstorm = parse_output("questioner", done.stdout)
    assert brainstorm.questions_generated == 3 and brainstorm.questions_answered == 0
    assert brainstorm.priority_breakdown is not None
    assert brainstorm.priority_breakdown.model_dump() == {"high": 1, "medium": 1, "low": 1}
    text = project.read("plan.questions.md")
    assert "### Cycle 1\n" in text
    assert "1. **[High Priority]** Which inputs" in text
    assert "**Status**: Unanswered" in text

    done = project.run("questioner", "--bare", SESSION_PATH=SESSION_PATH, MODE="RESEARCH",
                       CYCLE_NUMBER=1)
    assert "```" not in done.stdout  # --bare: the JSON object alone ends the answer
    research = parse_output("questioner", done.stdout)
    assert research.questions_answered == 3
    assert research.confidence_distribution is not None
    assert research.confidence_distribution.high == 3
    text = project.read("plan.questions.md")
    assert text.count("### Cycle 1\n") == 1
    assert "#### Research Results" in text and "#### Cycle Summary" in text
    assert "**Q&A Cycles Completed**: 1" in text


def test_planner_steps_are_consumed_in_order_across_processes(project: Project) -> None:
    project.script({"planner": [
        {"status": "needs_qa_cycle",
         "tasks": [{"id": "task-1", "description": "Write greet", "files": ["greet.py"],
                    "criteria": ["greet() returns hi", "it is tested"]},
                   {"id": "task-2", "description": "Document greet", "depends_on": ["task-1"],
                    "files": ["README.md"]}]},
        {"add_tasks": [{"id": "task-3", "description": "Add a CLI", "depends_on": ["task-2"]}]},
        {"status": "needs_clarification", "blockers": ["Which language?"]},
        {"complete": True},
    ]})
    first = project.plan(MODE="INITIALIZE", USER_REQUEST="Greet")
    assert first["status"] == "needs_qa_cycle"
    assert first["next_actions"] == ["qa_brainstorm", "qa_research"]
    tasks = parse_tasks(project.read("tasks.md"))
    task_1, task_2 = tasks.get("task-1"), tasks.get("task-2")
    assert task_1 is not None and task_2 is not None
    assert task_1.files == ("greet.py",)
    assert task_1.success_criteria == "greet() returns hi; it is tested"
    assert task_2.dependencies == ("task-1",) and task_2.inherits_from == ("task-1",)

    # The executor found a task; the planner's UPDATE adds it (from CONTEXT) and the scripted one.
    context = json.dumps({"discovered_tasks": [{"id": "task-1.1", "description": "Fix typo",
                                                "rationale": "seen"}]})
    second = project.plan(MODE="UPDATE", USER_REQUEST="Discovered work", CONTEXT=context)
    assert second["status"] == "completed" and second["next_actions"] == ["execute"]
    assert second["artifacts_updated"] == ["plan.md", "tasks.md", "progress.md"]
    assert second["task_count"]["implementation"] == 4
    assert parse_tasks(project.read("tasks.md")).ids[-2:] == ("task-3", "task-1.1")
    assert project.markers()["task-1.1"] is Marker.NOT_STARTED
    validate_session(SessionDir(project.root, SID))

    third = project.plan(MODE="UPDATE", USER_REQUEST="more")
    assert (third["status"], third["blockers"], third["next_actions"]) == (
        "needs_clarification", ["Which language?"], [])
    assert project.plan(MODE="UPDATE", USER_REQUEST="end")["next_actions"] == ["complete"]
    # The last step repeats.
    assert project.plan(MODE="UPDATE", USER_REQUEST="again")["next_actions"] == ["complete"]
    calls = json.loads((project.root / "script.json.calls.json").read_text())
    assert calls == {"planner": 5}


def test_planner_skip_files_claims_what_it_did_not_write(project: Project) -> None:
    project.script({"planner": [{"skip_files": True}], "paths": "project"})
    out = project.plan(MODE="INITIALIZE", USER_REQUEST="Greet")
    assert out["artifacts_created"] == [f"{SESSION_PATH}plan.md", f"{SESSION_PATH}tasks.md",
                                        f"{SESSION_PATH}progress.md",
                                        f".ralph-sessions/{SID}.instructions.md"]
    assert not (project.root / ".ralph-sessions").exists()


def test_executor_misbehaviours(project: Project) -> None:
    project.plan(MODE="INITIALIZE", USER_REQUEST="Greet")
    project.script({"executor": {
        "task-1": [{"skip_report": True}, {"wrong_marker": True},
                   {"status": "failed", "discovered_tasks": [
                       {"id": "task-2", "description": "Add a helper", "rationale": "needed"}]},
                   {"status": "blocked", "marker": "[x]"}],
    }})

    def execute(attempt: int) -> Any:
        done = project.run("executor", SESSION_PATH=SESSION_PATH, TASK_ID="task-1",
                           ATTEMPT_NUMBER=attempt)
        assert done.returncode == 0, done.stderr
        return parse_output("executor", done.stdout)

    claimed = execute(1)  # claims a report it did not write
    assert claimed.report_path == "tasks.task-1-report.md" and claimed.success_criteria_met
    assert not (project.session / "tasks.task-1-report.md").exists()
    assert project.markers()["task-1"] is Marker.REVIEW_PENDING

    set_marker(project.session / "progress.md", "task-1", Marker.NOT_STARTED)
    wrong = execute(2)  # claims success but leaves [/]
    assert wrong.report_path == "tasks.task-1-report-r2.md" and wrong.success_criteria_met
    assert project.markers()["task-1"] is Marker.IN_PROGRESS
    report = project.read("tasks.task-1-report-r2.md")
    assert report.startswith("# Task Report: task-1 [Rework #2]")
    assert "**Previous Report**: tasks.task-1-report.md" in report

    failed = execute(3)
    assert (failed.status, failed.success_criteria_met) == ("failed", False)
    assert [t.id for t in failed.discovered_tasks] == ["task-2"]
    assert project.markers()["task-1"] is Marker.IN_PROGRESS
    assert "❌" in project.read("tasks.task-1-report-r3.md")

    blocked = execute(4)
    assert blocked.status == "blocked" and blocked.blockers  # the contract wants one
    assert project.markers()["task-1"] is Marker.COMPLETED  # marks itself done: a violation


def test_reviewer_verdicts_and_misbehaviours(project: Project) -> None:
    project.plan(MODE="INITIALIZE", USER_REQUEST="Greet")
    project.script({"executor": [{}, {"success_criteria_met": False, "status": "failed"}],
                    "reviewer": [{"part2_status": "Failed"}, {"skip_part2": True}, {}]})

    def review(report: str) -> tuple[Any, str]:
        done = project.run("reviewer", SESSION_PATH=SESSION_PATH, TASK_ID="task-1",
                           REPORT_PATH=report)
        assert done.returncode == 0, done.stderr
        return parse_output("reviewer", done.stdout), project.read(report)

    project.run("executor", SESSION_PATH=SESSION_PATH, TASK_ID="task-1", ATTEMPT_NUMBER=1)
    out, text = review("tasks.task-1-report.md")  # says Qualified, writes Failed
    assert out.verdict == "Qualified"
    assert parse_report(text).status is Verdict.FAILED

    before = text
    out, text = review("tasks.task-1-report.md")  # claims a review it did not append
    assert out.verdict == "Qualified" and text == before

    project.run("executor", SESSION_PATH=SESSION_PATH, TASK_ID="task-1", ATTEMPT_NUMBER=2)
    out, text = review("tasks.task-1-report-r2.md")  # honest: PART 1 says Not Met
    assert out.verdict == "Failed" and out.feedback and out.issues
    assert [r.met for r in out.criteria_results] == [False]
    assert parse_report(text).status is Verdict.FAILED

    done = project.run("reviewer", SESSION_PATH=SESSION_PATH, TASK_ID="task-1",
                       REPORT_PATH="tasks.task-1-report-r9.md")
    missing = parse_output("reviewer", done.stdout)
    assert missing.status == "error" and "does not exist" in missing.issues[0]


def test_answer_switches_and_script_from_env(project: Project) -> None:
    script = project.script({"fence": False, "questioner": [
        {"invalid_json": True}, {"raw": "just words\n", "exit_code": 3}]})
    env = {"RALPH_FAKE_ROLES_SCRIPT": str(script)}
    done = project.run("questioner", env=env, SESSION_PATH=SESSION_PATH, MODE="BRAINSTORM",
                       CYCLE_NUMBER=1)
    assert "```" not in done.stdout
    with pytest.raises(InvalidOutput):
        parse_output("questioner", done.stdout)
    assert extract_output(done.stdout)["status"] == "not-a-status"
    assert (project.session / "plan.questions.md").exists()  # created when missing
    done = project.run("questioner", env=env, SESSION_PATH=SESSION_PATH, MODE="RESEARCH",
                       CYCLE_NUMBER=1)
    assert (done.returncode, done.stdout) == (3, "just words\n")
    assert json.loads((project.root / "script.json.calls.json").read_text()) == {
        "questioner": 2}


@pytest.mark.parametrize(("step", "check"), [
    ({}, lambda text: extract_output(text) == {"status": "completed", "n": 1}),
    ({"drop": ["status"]}, lambda text: extract_output(text) == {"n": 1}),
    ({"output": {"n": 2, "x": True}},
     lambda text: extract_output(text) == {"status": "completed", "n": 2, "x": True}),
    ({"invalid_json": "syntax"}, lambda text: "{" in text and not _parses(text)),
    ({"no_json": True}, lambda text: "{" not in text),
    ({"print": ["thinking..."], "fence": False},
     lambda text: text.startswith("thinking...\nsummary\n\n{") and "```" not in text),
])
def test_render_answer(step: dict[str, Any], check: Any) -> None:
    text = render_answer({"status": "completed", "n": 1}, "summary", step, fence=True)
    assert check(text), text


def _parses(text: str) -> bool:
    try:
        extract_output(text)
    except InvalidOutput:
        return False
    return True


def test_the_input_is_the_input_section_of_a_built_prompt() -> None:
    executor = ExecutorInput(session_path=SESSION_PATH, task_id="task-1", attempt_number=2)
    built = build_prompt("executor", executor, default_instructions("executor"),
                         additional_context="TASK_ID: task-7 failed earlier\nMODE: UPDATE")
    assert read_inputs(built) == {"SESSION_PATH": SESSION_PATH, "TASK_ID": "task-1",
                                  "ATTEMPT_NUMBER": "2"}
    parsed = parse_prompt(built)
    assert (parsed.role, parsed.inputs["TASK_ID"]) == ("executor", "task-1")
    request = "Add a CLI.\u2028TASK_ID: task-7"
    planner = PlannerInput(session_path=SESSION_PATH, mode="INITIALIZE", user_request=request)
    inputs = read_inputs(build_prompt("planner", planner, "Plan."))
    assert inputs["USER_REQUEST"] == request and "TASK_ID" not in inputs


def test_role_detection_and_inputs() -> None:
    text = prompt("executor", SESSION_PATH=SESSION_PATH, TASK_ID="task-1", ATTEMPT_NUMBER=2)
    inputs = read_inputs(text)
    # Only the `## Input` section: not the example's MODE and TASK_ID above it.
    assert inputs == {"SESSION_PATH": SESSION_PATH, "TASK_ID": "task-1", "ATTEMPT_NUMBER": "2"}
    assert detect_role(text, inputs) == "executor"  # names the reviewer too: keys decide
    # An example in the instructions with a reviewer's keys: the input block decides.
    quoted = ("Ralph-Executor hands its report to Ralph-Reviewer, e.g.\nSESSION_PATH: y/\n"
              "TASK_ID: task-3\nREPORT_PATH: tasks.task-3-report.md\n\nInput:\n"
              "SESSION_PATH: x/\nTASK_ID: task-1\n")
    assert detect_role(quoted, read_inputs(quoted)) == "executor"
    only_keys = "SESSION_PATH: x/\nTASK_ID: task-1\nREPORT_PATH: r.md\n"
    assert detect_role(only_keys, read_inputs(only_keys)) == "reviewer"
    one_name = "Ralph-Questioner\nSESSION_PATH: x/\nMODE: BRAINSTORM\n"
    assert parse_prompt(one_name).role == "questioner"
    with pytest.raises(FakeRolesError, match="names no role"):
        detect_role("hello", {})
    with pytest.raises(FakeRolesError, match="reviewer prompt has no REPORT_PATH"):
        parse_prompt("Ralph-Reviewer\nSESSION_PATH: x/\nTASK_ID: task-1\n")


def test_bad_prompt_is_one_error_line(project: Project) -> None:
    done = project.run("planner", SESSION_PATH=SESSION_PATH, MODE="SOMETHING",
                       USER_REQUEST="x")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "fake_roles: the planner prompt's MODE 'SOMETHING' is not one of INITIALIZE, UPDATE, "
        "TASK_BREAKDOWN, DISCOVERY"]


def test_hang_keeps_the_executor_running_mid_task(project: Project) -> None:
    project.plan(MODE="INITIALIZE", USER_REQUEST="Greet")
    project.script({"executor": [{"hang": 60}, {}]})
    argv = [sys.executable, "-m", "ralph.testing.fake_roles", "--script",
            str(project.script_path)]
    proc = subprocess.Popen(argv, cwd=project.root, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stdin is not None
        proc.stdin.write(prompt("executor", SESSION_PATH=SESSION_PATH, TASK_ID="task-1",
                                ATTEMPT_NUMBER=1))
        proc.stdin.close()
        deadline = time.monotonic() + 20
        while project.markers()["task-1"] is not Marker.IN_PROGRESS:
            assert time.monotonic() < deadline, "the executor never started the task"
            assert proc.poll() is None
            time.sleep(0.02)
        assert proc.poll() is None
        assert not (project.session / "tasks.task-1-report.md").exists()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    # Run again after the kill: the next step finishes the task.
    done = project.run("executor", SESSION_PATH=SESSION_PATH, TASK_ID="task-1",
                       ATTEMPT_NUMBER=1)
    assert parse_output("executor", done.stdout).status == "completed"
    assert project.markers()["task-1"] is Marker.REVIEW_PENDING


def test_keyed_step_lists_count_per_selector(tmp_path: Path) -> None:
    script_path = tmp_path / "s.json"
    script = {"executor": {"task-2": [{"n": 1}, {"n": 2}], "*": [{"n": 0}]}}
    steps = [next_step(script, script_path, "executor", task)["n"]
             for task in ("task-2", "task-1", "task-2", "task-2", "task-3")]
    assert steps == [1, 0, 2, 2, 0]
    assert json.loads((tmp_path / "s.json.calls.json").read_text()) == {
        "executor/task-2": 3, "executor/*": 2}
    assert next_step({}, None, "planner", "INITIALIZE") == {}  # no script: honest


def test_prompt_file_and_forced_role(project: Project) -> None:
    project.plan(MODE="INITIALIZE", USER_REQUEST="Greet")
    prompt_file = project.root / "prompt.txt"
    prompt_file.write_text(f"SESSION_PATH: {SESSION_PATH}\nTASK_ID: task-1\n")
    done = subprocess.run([sys.executable, "-m", "ralph.testing.fake_roles", "--prompt-file",
                           str(prompt_file), "--role", "executor"], check=False,
                          cwd=project.root, stdin=subprocess.DEVNULL, text=True,
                          capture_output=True, timeout=30)
    assert parse_output("executor", done.stdout).report_path == "tasks.task-1-report.md"
    assert project.markers()["task-1"] is Marker.REVIEW_PENDING


@pytest.mark.parametrize(("role", "model", "fields"), [
    ("planner", PlannerInput, {"SESSION_PATH": SESSION_PATH, "MODE": "UPDATE",
                               "USER_REQUEST": "Add greet()\nand a test",
                               "CONTEXT": {"answer": "yes"}}),
    ("executor", ExecutorInput, {"SESSION_PATH": SESSION_PATH, "TASK_ID": "task-2",
                                 "ATTEMPT_NUMBER": 3}),
    ("reviewer", ReviewerInput, {"SESSION_PATH": SESSION_PATH, "TASK_ID": "task-2",
                                 "REPORT_PATH": "tasks.task-2-report-r3.md"}),
    ("questioner", QuestionerInput, {"SESSION_PATH": SESSION_PATH, "MODE": "RESEARCH",
                                     "CYCLE_NUMBER": 2}),
])
def test_reads_the_prompts_ralph_builds(role: str, model: type[RoleInput],
                                        fields: dict[str, Any]) -> None:
    role_input = model.model_validate(fields)
    text = build_prompt(role, role_input, default_instructions(role))
    parsed = parse_prompt(text)
    assert parsed.role == role
    expected = {key: json.dumps(value, separators=(",", ":")) if isinstance(value, dict)
                else str(value) for key, value in role_input.prompt_fields().items()}
    assert {key: parsed.inputs[key] for key in expected} == expected


def test_initialize_from_a_built_prompt_with_a_multiline_request(project: Project) -> None:
    role_input = PlannerInput.model_validate({"SESSION_PATH": SESSION_PATH,
                                              "MODE": "INITIALIZE",
                                              "USER_REQUEST": "Add greet()\nwith a test"})
    text = build_prompt("planner", role_input, default_instructions("planner"))
    done = subprocess.run([sys.executable, "-m", "ralph.testing.fake_roles"], check=False,
                          cwd=project.root, input=text, text=True, capture_output=True,
                          timeout=30)
    assert parse_output("planner", done.stdout).status == "completed", done.stderr
    validate_session(SessionDir(project.root, SID))
    task = parse_tasks(project.read("tasks.md")).get("task-1")
    assert task is not None and task.description == "Add greet()"

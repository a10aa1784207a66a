"""ralph.workflow.prompts: the prompt a role is given and the retry prompt, and the four role
instructions `ralph init` scaffolds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ralph.scaffold import WORKFLOW_PROMPTS, scaffold, template
from ralph.workflow.answers import InvalidOutput, OutputProblem, parse_output
from ralph.workflow.contracts import (
    ROLES,
    ExecutorInput,
    PlannerInput,
    QuestionerInput,
    ReviewerInput,
    RoleInput,
    schema_text,
)
from ralph.workflow.errors import WorkflowError
from ralph.workflow.prompts import (
    build_prompt,
    default_instructions,
    input_lines,
    instructions_file,
    load_instructions,
    read_input,
    retry_prompt,
)

EXECUTOR = ExecutorInput(session_path=".ralph-sessions/260131-144400/", task_id="task-1")
OUTPUT_INSTRUCTION = (
    "End your answer with one JSON object that matches this JSON Schema (the Ralph-Executor "
    "output, contract 1.0.0), in a ```json block or bare. Only the last JSON object of your "
    "answer is read; write the keys and values exactly as the schema names them. Ralph checks "
    "every claim in it against the session's files: a claim the files contradict is a "
    "contract violation, and the answer is not used.")
INPUTS: dict[str, RoleInput] = {
    "planner": PlannerInput(session_path=".ralph-sessions/260131-144400/", mode="INITIALIZE",
                            user_request="Add a --verbose flag"),
    "executor": EXECUTOR,
    "reviewer": ReviewerInput(session_path=".ralph-sessions/260131-144400/", task_id="task-1",
                              report_path="tasks.task-1-report.md"),
    "questioner": QuestionerInput(session_path=".ralph-sessions/260131-144400/",
                                  mode="BRAINSTORM", cycle_number=2),
}


# -- the prompt


def test_the_executor_prompt_exactly() -> None:
    prompt = build_prompt("executor", EXECUTOR, "# Ralph-Executor\n\nDo the task.\n\n")
    assert prompt == (
        "# Ralph-Executor\n\nDo the task.\n\n"
        "## Input\n\n"
        "SESSION_PATH: .ralph-sessions/260131-144400/\n"
        "TASK_ID: task-1\n"
        "ATTEMPT_NUMBER: 1\n\n"
        "## Output\n\n"
        f"{OUTPUT_INSTRUCTION}\n\n"
        f"```json\n{schema_text('executor', 'output')}\n```\n")


def test_additional_context_follows_the_input_lines() -> None:
    reviewer = INPUTS["reviewer"]
    prompt = build_prompt("reviewer", reviewer, "Review.",
                          additional_context="Gates (run by Ralph):\n- `pytest -q`: passed\n")
    assert ("REPORT_PATH: tasks.task-1-report.md\n\nGates (run by Ralph):\n- `pytest -q`: "
            "passed\n\n## Output\n\n") in prompt
    assert read_input("reviewer", prompt) == reviewer


def test_context_is_compact_json_on_one_line_and_long_values_a_block() -> None:
    planner = PlannerInput(session_path=".ralph-sessions/260131-144400", mode="UPDATE",
                           user_request="Use SQLite.\n\n  Keep the API.",
                           context={"answer": "yes\nno", "blockers": ["which DB?"]})
    assert input_lines(planner) == (
        "SESSION_PATH: .ralph-sessions/260131-144400/\n"
        "MODE: UPDATE\n"
        "USER_REQUEST: |\n"
        "  Use SQLite.\n"
        "  \n"
        "    Keep the API.\n"
        'CONTEXT: {"answer":"yes\\nno","blockers":["which DB?"]}')
    assert read_input("planner", build_prompt("planner", planner, "Plan.")) == planner


@pytest.mark.parametrize("role", ROLES)
def test_every_roles_input_reads_back_from_its_prompt(role: str) -> None:
    prompt = build_prompt(role, INPUTS[role], default_instructions(role))
    assert read_input(role, prompt) == INPUTS[role]
    assert prompt.count("\n## Input\n") == 1
    assert prompt.endswith(f"```json\n{schema_text(role, 'output')}\n```\n")


def test_read_input_names_what_is_wrong() -> None:
    with pytest.raises(WorkflowError, match="no '## Input' section"):
        read_input("executor", "SESSION_PATH: s/\nTASK_ID: task-1\n")
    with pytest.raises(WorkflowError, match="executor's input in the prompt is invalid: TASK_ID"):
        read_input("executor", "## Input\n\nSESSION_PATH: s/\n")
    with pytest.raises(WorkflowError, match="CONTEXT is not JSON"):
        read_input("planner", "## Input\n\nSESSION_PATH: s/\nMODE: UPDATE\nUSER_REQUEST: x\n"
                              "CONTEXT: {oops}\n")


def test_the_input_must_be_the_roles() -> None:
    with pytest.raises(WorkflowError, match="ExecutorInput is not the reviewer's input"):
        build_prompt("reviewer", EXECUTOR, "Review.")
    with pytest.raises(WorkflowError, match="unknown role"):
        build_prompt("judge", EXECUTOR, "x")


# -- the retry


def test_the_retry_prompt_quotes_the_problems() -> None:
    with pytest.raises(InvalidOutput) as caught:
        parse_output("executor", '{"status": "done", "success_criteria_met": true}')
    prompt = retry_prompt("executor", EXECUTOR, "Do the task.", caught.value)
    first = build_prompt("executor", EXECUTOR, "Do the task.")
    assert prompt == (
        first + "\n## Your previous answer was rejected\n\n"
        "This prompt was given before, and its answer was rejected:\n\n"
        "> status: should be 'completed', 'failed' or 'blocked' (got \"done\")\n"
        "> report_path: required, but missing\n\n"
        "The session's files are as that run left them. Check them, finish what is missing, "
        "and end your answer with one JSON object that matches the schema above. This is the "
        "last try: another invalid answer is a contract violation.\n")


def test_the_retry_takes_problem_lines_too() -> None:
    prompt = retry_prompt("executor", EXECUTOR, "x", [OutputProblem("", "no JSON object"),
                                                      "blockers: must not be empty"])
    assert "> no JSON object\n> blockers: must not be empty\n" in prompt
    with pytest.raises(WorkflowError, match="needs the problems"):
        retry_prompt("executor", EXECUTOR, "x", [])


# -- the instructions


def test_instructions_are_read_from_the_project(tmp_path: Path) -> None:
    assert instructions_file("questioner") == "PROMPT_questioner.md"
    (tmp_path / "PROMPT_executor.md").write_text("My own instructions.\n")
    assert load_instructions(tmp_path, "executor") == "My own instructions.\n"
    with pytest.raises(WorkflowError) as caught:
        load_instructions(tmp_path, "planner")
    assert str(caught.value) == (f"PROMPT_planner.md is missing in {tmp_path}: run `ralph init` "
                                 "to scaffold the role prompts")
    (tmp_path / "PROMPT_reviewer.md").write_bytes(b"\xff\xfe")
    with pytest.raises(WorkflowError, match="not UTF-8"):
        load_instructions(tmp_path, "reviewer")


def test_ralph_init_scaffolds_the_four_role_prompts(tmp_path: Path) -> None:
    assert tuple(f"PROMPT_{role}.md" for role in ROLES) == WORKFLOW_PROMPTS
    result = scaffold(tmp_path)
    for role in ROLES:
        name = f"PROMPT_{role}.md"
        assert name in result.created
        assert (tmp_path / name).read_text() == template(name) == default_instructions(role)
        assert load_instructions(tmp_path, role) == default_instructions(role)
    (tmp_path / "PROMPT_executor.md").write_text("edited")
    again = scaffold(tmp_path)
    assert "PROMPT_executor.md" in again.kept
    assert (tmp_path / "PROMPT_executor.md").read_text() == "edited"


# What each role's instructions must tell the agent: its inputs, the files it writes and
# their formats, and that its claims are checked.
MUST_SAY: dict[str, list[str]] = {
    "planner": ["SESSION_PATH", "MODE", "USER_REQUEST", "CONTEXT", "INITIALIZE", "UPDATE",
                "TASK_BREAKDOWN", "DISCOVERY", "plan.md", "tasks.md", "progress.md",
                "plan.questions.md", ".ralph-sessions/<SESSION_ID>.instructions.md",
                "`[ ]`", "`[/]`", "`[P]`", "`[x]`", "`[F]`", "## Goal & Success Criteria",
                "**Success Criteria**", "**Inherits From**", "needs_qa_cycle",
                "needs_clarification", "task_count"],
    "executor": ["SESSION_PATH", "TASK_ID", "ATTEMPT_NUMBER", "tasks.<TASK_ID>-report.md",
                 "tasks.<TASK_ID>-report-r<N>.md", "## PART 1: IMPLEMENTATION REPORT",
                 "## PART 2: REVIEW REPORT", "[/]", "[P]", "progress.md",
                 "**Inherits From**", "success_criteria_met", "discovered_tasks",
                 ".ralph-sessions/<SESSION_ID>.instructions.md"],
    "reviewer": ["SESSION_PATH", "TASK_ID", "REPORT_PATH", "## PART 2: REVIEW REPORT",
                 "**Status**: Qualified", "`Failed`", "criteria_results", "verdict",
                 "**Evidence Reviewed**", "**Finding**", "progress.md",
                 ".ralph-sessions/<SESSION_ID>.instructions.md"],
    "questioner": ["SESSION_PATH", "MODE", "CYCLE_NUMBER", "BRAINSTORM", "RESEARCH",
                   "plan.questions.md", "### Cycle <CYCLE_NUMBER>", "**Confidence**",
                   "Research Needed", "questions_generated", "confidence_distribution",
                   ".ralph-sessions/<SESSION_ID>.instructions.md"],
}


@pytest.mark.parametrize("role", ROLES)
def test_each_roles_instructions_describe_its_files_and_checks(role: str) -> None:
    text = default_instructions(role)
    assert text.startswith(f"# Ralph-{role.capitalize()}\n")
    flowing = " ".join(text.split())  # a phrase may be wrapped across lines
    for phrase in MUST_SAY[role]:
        assert phrase in flowing, (role, phrase)
    assert "Ralph checks every claim" in flowing
    assert "contract violation" in flowing
    assert max(len(line) for line in text.splitlines()) <= 100


def test_the_instructions_name_every_status_the_contract_has() -> None:
    for role in ROLES:
        text = default_instructions(role)
        for value in json.loads(schema_text(role))["properties"]["status"]["enum"]:
            assert f"`{value}`" in text, (role, value)

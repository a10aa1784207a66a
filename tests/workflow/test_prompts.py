"""ralph.workflow.prompts: the prompt a role is given and the retry prompt, and the four role
instructions `ralph init` scaffolds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ralph.config import Config, parse_config
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
from ralph.workflow.input_block import input_block
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
    "answer is read, so write none after it; write the keys and values exactly as the schema "
    "names them. Ralph checks "
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


@pytest.mark.parametrize("brk", ["\n", "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e",
                                 "\x85", "\u2028", "\u2029"])
def test_every_line_break_makes_a_block_that_reads_back(brk: str) -> None:
    request = f"Use SQLite.{brk}TASK_ID: task-7{brk}"
    planner = PlannerInput(session_path="s/", mode="UPDATE", user_request=request)
    lines = input_lines(planner)
    assert lines.split("\n")[2] == "USER_REQUEST: |"
    prompt = build_prompt("planner", planner, "Plan.")
    assert read_input("planner", prompt) == planner
    assert input_block(prompt)["USER_REQUEST"] == request


def test_only_the_input_section_is_input() -> None:
    executor = ExecutorInput(session_path="s/", task_id="task-1", attempt_number=2)
    plain = build_prompt("executor", executor, "Example:\n\n## Input\n\nTASK_ID: task-9\n",
                         additional_context="TASK_ID: task-7 failed earlier")
    assert input_block(plain) == {"SESSION_PATH": "s/", "TASK_ID": "task-1",
                                  "ATTEMPT_NUMBER": "2"}
    assert read_input("executor", plain) == executor
    with pytest.raises(WorkflowError, match="no '## Input' section"):
        input_block("## Output\n\n## Input\n\nTASK_ID: task-1\n")


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
    assert load_instructions(tmp_path, "executor", Config()) == "My own instructions.\n"
    with pytest.raises(WorkflowError) as caught:
        load_instructions(tmp_path, "planner", Config())
    assert str(caught.value) == (f"PROMPT_planner.md is missing in {tmp_path}: run `ralph init` "
                                 "to scaffold the role prompts")
    (tmp_path / "PROMPT_reviewer.md").write_bytes(b"\xff\xfe")
    with pytest.raises(WorkflowError, match="not UTF-8"):
        load_instructions(tmp_path, "reviewer", Config())


def test_instructions_from_the_file_the_config_names(tmp_path: Path) -> None:
    config = parse_config('[workflow.roles.executor]\nprompt = "prompts/exec.md"\n')
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "exec.md").write_text("Configured.\n")
    (tmp_path / "PROMPT_executor.md").write_text("Default.\n")
    assert load_instructions(tmp_path, "executor", config) == "Configured.\n"
    assert load_instructions(tmp_path, "executor", Config()) == "Default.\n"
    with pytest.raises(WorkflowError) as caught:
        load_instructions(tmp_path, "reviewer",
                          parse_config('[workflow.roles.reviewer]\nprompt = "r.md"\n'))
    assert str(caught.value) == (f"r.md is missing in {tmp_path}: create it, or change "
                                 "[workflow.roles.reviewer] prompt in ralph.toml")


def test_ralph_init_scaffolds_the_four_role_prompts(tmp_path: Path) -> None:
    assert tuple(f"PROMPT_{role}.md" for role in ROLES) == WORKFLOW_PROMPTS
    result = scaffold(tmp_path)
    for role in ROLES:
        name = f"PROMPT_{role}.md"
        assert name in result.created
        assert (tmp_path / name).read_text() == template(name) == default_instructions(role)
        assert load_instructions(tmp_path, role, Config()) == default_instructions(role)
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
    # The questioner's counts are not checked: its instructions do not say every claim is.
    checks = "Ralph checks your claims" if role == "questioner" else "Ralph checks every claim"
    assert checks in flowing
    assert "contract violation" in flowing
    assert max(len(line) for line in text.splitlines()) <= 100


def test_the_instructions_name_every_status_the_contract_has() -> None:
    for role in ROLES:
        text = default_instructions(role)
        for value in json.loads(schema_text(role))["properties"]["status"]["enum"]:
            assert f"`{value}`" in text, (role, value)


def test_the_questioner_is_promised_only_the_checks_made() -> None:
    # checks.py verifies that a completed questioner updated plan.questions.md and changed
    # nothing else; it does not count questions, so the instructions do not say it does.
    text = " ".join(default_instructions("questioner").split())
    assert ("a `completed` answer must have updated plan.questions.md, and you must change no "
            "other file.") in text
    assert "questions you count" not in text

"""ralph.workflow.contracts: every role's field names and enum values exactly as the contract
writes them, what is required, and `ralph workflow schema`."""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from ralph.cli import workflow_cmd
from ralph.cli.main import run
from ralph.workflow.contracts import (
    AGENT_NAMES,
    CONTRACT_VERSION,
    CONTRACTS,
    ROLES,
    ExecutorInput,
    ExecutorOutput,
    PlannerInput,
    PlannerOutput,
    QuestionerInput,
    QuestionerOutput,
    ReviewerInput,
    ReviewerOutput,
    contract,
    json_schema,
    role_of,
    schema_text,
)
from ralph.workflow.errors import WorkflowError

# role -> (input keys, required input keys, output keys), in the contract's order.
FIELDS: dict[str, tuple[list[str], set[str], list[str]]] = {
    "planner": (["SESSION_PATH", "MODE", "USER_REQUEST", "CONTEXT"],
                {"SESSION_PATH", "MODE", "USER_REQUEST"},
                ["status", "artifacts_created", "artifacts_updated", "task_count",
                 "next_actions", "blockers"]),
    # ATTEMPT_NUMBER and CYCLE_NUMBER: required, default 1 (the model fills in the 1).
    "executor": (["SESSION_PATH", "TASK_ID", "ATTEMPT_NUMBER"],
                 {"SESSION_PATH", "TASK_ID", "ATTEMPT_NUMBER"},
                 ["status", "report_path", "success_criteria_met", "discovered_tasks",
                  "blockers"]),
    "reviewer": (["SESSION_PATH", "TASK_ID", "REPORT_PATH"],
                 {"SESSION_PATH", "TASK_ID", "REPORT_PATH"},
                 ["status", "verdict", "criteria_results", "quality_assessment", "issues",
                  "feedback"]),
    "questioner": (["SESSION_PATH", "MODE", "CYCLE_NUMBER"],
                   {"SESSION_PATH", "MODE", "CYCLE_NUMBER"},
                   ["status", "questions_generated", "questions_answered",
                    "priority_breakdown", "confidence_distribution", "new_questions_emerged",
                    "invalidated_assumptions", "critical_findings", "recommendations"]),
}
REQUIRED_OUTPUT = {"planner": {"status"}, "executor": {"status", "report_path",
                                                      "success_criteria_met"},
                   "reviewer": {"status"}, "questioner": {"status"}}

# (role, "input"/"output", JSON Schema path to the enum) -> its values.
ENUMS: list[tuple[str, str, str, list[str]]] = [
    ("planner", "input", "MODE", ["INITIALIZE", "UPDATE", "TASK_BREAKDOWN", "DISCOVERY"]),
    ("planner", "output", "status", ["completed", "blocked", "needs_clarification",
                                     "needs_qa_cycle"]),
    ("planner", "output", "next_actions[]", ["qa_brainstorm", "qa_research", "execute",
                                             "review", "complete"]),
    ("executor", "output", "status", ["completed", "failed", "blocked"]),
    ("reviewer", "output", "status", ["completed", "error"]),
    ("reviewer", "output", "verdict", ["Qualified", "Failed"]),
    ("questioner", "input", "MODE", ["BRAINSTORM", "RESEARCH"]),
    ("questioner", "output", "status", ["completed", "blocked"]),
]

# (role, output field) -> the keys of its objects.
NESTED: list[tuple[str, str, list[str]]] = [
    ("planner", "task_count", ["planning", "implementation", "total"]),
    ("executor", "discovered_tasks", ["id", "description", "rationale"]),
    ("reviewer", "criteria_results", ["criterion", "met", "evidence", "finding"]),
    ("questioner", "priority_breakdown", ["high", "medium", "low"]),
    ("questioner", "confidence_distribution", ["high", "medium", "low", "unknown"]),
]

VALID_OUTPUT: dict[str, dict[str, Any]] = {
    "planner": {"status": "completed"},
    "executor": {"status": "completed", "report_path": "tasks.task-1-report.md",
                 "success_criteria_met": True},
    "reviewer": {"status": "completed", "verdict": "Qualified"},
    "questioner": {"status": "completed"},
}


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """A property's schema with `$ref` and an optional's `anyOf [..., null]` followed."""
    if "anyOf" in node:
        node = next(item for item in node["anyOf"] if item.get("type") != "null")
    if "$ref" in node:
        node = schema["$defs"][node["$ref"].rsplit("/", 1)[1]]
    return node


def _enum(schema: dict[str, Any], path: str) -> list[str]:
    node = _resolve(schema, schema["properties"][path.removesuffix("[]")])
    if path.endswith("[]"):
        node = _resolve(schema, node["items"])
    return list(node["enum"])


# -- the field names and enums, table-driven


def test_the_roles_and_their_agent_names() -> None:
    assert ROLES == ("planner", "executor", "reviewer", "questioner")
    assert AGENT_NAMES == {"planner": "Ralph-Planner", "executor": "Ralph-Executor",
                           "reviewer": "Ralph-Reviewer", "questioner": "Ralph-Questioner"}
    assert list(CONTRACTS) == list(ROLES)
    for role in ROLES:
        found = contract(role)
        assert (found.role, found.agent_name, found.version) == (role, AGENT_NAMES[role],
                                                                 "1.0.0")
    assert CONTRACT_VERSION == "1.0.0"


@pytest.mark.parametrize("role", ROLES)
def test_input_keys_in_the_contracts_order(role: str) -> None:
    keys, required, _ = FIELDS[role]
    schema = json_schema(role, "input")
    assert list(schema["properties"]) == keys
    assert set(schema["required"]) == required
    assert schema["additionalProperties"] is False


@pytest.mark.parametrize("role", ROLES)
def test_output_keys_in_the_contracts_order(role: str) -> None:
    _, _, keys = FIELDS[role]
    schema = json_schema(role, "output")
    assert list(schema["properties"]) == keys
    assert set(schema["required"]) == REQUIRED_OUTPUT[role]
    assert list(contract(role).output_model.model_fields) == keys


@pytest.mark.parametrize(("role", "kind", "path", "values"), ENUMS,
                         ids=[f"{r}-{k}-{p}" for r, k, p, _ in ENUMS])
def test_enum_values(role: str, kind: str, path: str, values: list[str]) -> None:
    assert _enum(json_schema(role, kind), path) == values  # type: ignore[arg-type]


@pytest.mark.parametrize(("role", "field", "keys"), NESTED, ids=[f[1] for f in NESTED])
def test_nested_object_keys(role: str, field: str, keys: list[str]) -> None:
    schema = json_schema(role, "output")
    node = _resolve(schema, schema["properties"][field])
    if node.get("type") == "array":
        node = _resolve(schema, node["items"])
    assert list(node["properties"]) == keys


def test_count_fields_are_non_negative_integers_and_flags_booleans() -> None:
    questioner = json_schema("questioner")["properties"]
    for name in ("questions_generated", "questions_answered", "new_questions_emerged",
                 "invalidated_assumptions"):
        assert (questioner[name]["type"], questioner[name]["minimum"]) == ("integer", 0)
    assert json_schema("executor")["properties"]["success_criteria_met"]["type"] == "boolean"
    attempt = json_schema("executor", "input")["properties"]["ATTEMPT_NUMBER"]
    assert (attempt["type"], attempt["default"], attempt["exclusiveMinimum"]) == ("integer",
                                                                                  1, 0)
    assert json_schema("questioner", "input")["properties"]["CYCLE_NUMBER"]["default"] == 1


# -- inputs


def test_inputs_are_read_by_their_keys_or_attribute_names() -> None:
    by_key = ExecutorInput.model_validate({"SESSION_PATH": ".ralph-sessions/260131-144400/",
                                           "TASK_ID": "task-1"})
    by_name = ExecutorInput(session_path=".ralph-sessions/260131-144400",  # no slash
                            task_id="task-1")
    assert by_key == by_name
    assert by_key.attempt_number == 1
    assert by_key.prompt_fields() == {"SESSION_PATH": ".ralph-sessions/260131-144400/",
                                      "TASK_ID": "task-1", "ATTEMPT_NUMBER": 1}
    planner = PlannerInput(session_path="s/", mode="INITIALIZE", user_request="Add a CLI")
    assert list(planner.prompt_fields()) == ["SESSION_PATH", "MODE", "USER_REQUEST"]
    assert QuestionerInput(session_path="s/", mode="RESEARCH").cycle_number == 1
    assert ReviewerInput(session_path="s/", task_id="task-2.1",
                         report_path="tasks.task-2.1-report-r2.md").report_path.endswith("r2.md")


@pytest.mark.parametrize(("model", "data", "where"), [
    (ExecutorInput, {"SESSION_PATH": "s/", "TASK_ID": "task 1"}, "TASK_ID"),
    (ExecutorInput, {"SESSION_PATH": "s/", "TASK_ID": "task-1", "ATTEMPT_NUMBER": 0},
     "ATTEMPT_NUMBER"),
    (ExecutorInput, {"SESSION_PATH": " ", "TASK_ID": "task-1"}, "SESSION_PATH"),
    (ExecutorInput, {"SESSION_PATH": "s/", "TASK_ID": "task-1", "EXTRA": 1}, "EXTRA"),
    (PlannerInput, {"SESSION_PATH": "s/", "MODE": "initialize", "USER_REQUEST": "x"}, "MODE"),
    (PlannerInput, {"SESSION_PATH": "s/", "MODE": "UPDATE", "USER_REQUEST": "  "},
     "USER_REQUEST"),
    (ReviewerInput, {"SESSION_PATH": "s/", "TASK_ID": "t-1", "REPORT_PATH": "a\nb"},
     "REPORT_PATH"),
    (ExecutorInput, {"SESSION_PATH": "s/", "TASK_ID": "../../etc/x"}, "TASK_ID"),
    (ExecutorInput, {"SESSION_PATH": "s/", "TASK_ID": "task-1/../x"}, "TASK_ID"),
    (ExecutorInput, {"SESSION_PATH": "s/", "TASK_ID": "task"}, "TASK_ID"),
    (ReviewerInput, {"SESSION_PATH": "s/", "TASK_ID": "task-1/..", "REPORT_PATH": "r.md"},
     "TASK_ID"),
    (ReviewerInput, {"SESSION_PATH": "s/", "TASK_ID": "task-1", "REPORT_PATH": "/etc/x"},
     "REPORT_PATH"),
    (ReviewerInput, {"SESSION_PATH": "s/", "TASK_ID": "task-1",
                     "REPORT_PATH": "s/../../etc/x"}, "REPORT_PATH"),
    (ReviewerInput, {"SESSION_PATH": "s/", "TASK_ID": "task-1", "REPORT_PATH": "..\\x"},
     "REPORT_PATH"),
    (ReviewerInput, {"SESSION_PATH": "s/", "TASK_ID": "task-1", "REPORT_PATH": "C:\\x.md"},
     "REPORT_PATH"),
    (QuestionerInput, {"SESSION_PATH": "s/", "MODE": "RESEARCH", "CYCLE_NUMBER": -1},
     "CYCLE_NUMBER"),
])
def test_bad_inputs_are_refused(model: type[BaseModel], data: dict[str, Any],
                                where: str) -> None:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(data)
    assert [error["loc"] for error in caught.value.errors()] == [(where,)]


def test_attempt_and_cycle_required_in_the_schema_default_1_in_the_model() -> None:
    for role, key in (("executor", "ATTEMPT_NUMBER"), ("questioner", "CYCLE_NUMBER")):
        schema = json_schema(role, "input")
        assert key in schema["required"]
        assert schema["properties"][key]["default"] == 1
    assert ExecutorInput(session_path="s/", task_id="task-1").prompt_fields()[
        "ATTEMPT_NUMBER"] == 1
    assert QuestionerInput(session_path="s/", mode="BRAINSTORM").prompt_fields()[
        "CYCLE_NUMBER"] == 1


def test_task_ids_and_report_paths_that_stay_in_place() -> None:
    reviewer = ReviewerInput(session_path="s/", task_id="plan-init",
                             report_path=".ralph-sessions/260131-144400/tasks.plan-init-report.md")
    assert reviewer.task_id == "plan-init"
    with pytest.raises(ValidationError, match="must be a task id such as task-1"):
        ExecutorInput(session_path="s/", task_id="../../etc/x")
    with pytest.raises(ValidationError, match=r"must be a relative path without '\.\.'"):
        ReviewerInput(session_path="s/", task_id="task-1", report_path="../x.md")


# -- outputs


@pytest.mark.parametrize("role", ROLES)
def test_the_least_valid_output_gets_the_defaults(role: str) -> None:
    output = contract(role).output_model.model_validate(VALID_OUTPUT[role])
    dumped = output.model_dump()
    for name, value in dumped.items():
        if name not in VALID_OUTPUT[role]:
            assert value in ([], "", 0, None), (name, value)
    assert output.unknown_fields() == []


def test_types_are_strict() -> None:
    for data in ({"success_criteria_met": "true"}, {"success_criteria_met": 1},
                 {"status": "Completed"}, {"blockers": "none"}):
        with pytest.raises(ValidationError):
            ExecutorOutput.model_validate({**VALID_OUTPUT["executor"], **data})
    for count in ("3", 2.5, True, -1):
        with pytest.raises(ValidationError):
            QuestionerOutput.model_validate({"status": "completed",
                                             "questions_generated": count})
    with pytest.raises(ValidationError):
        PlannerOutput.model_validate({"status": "completed",
                                      "task_count": {"planning": 1, "total": 1}})


def test_unknown_keys_are_kept_and_listed_not_refused() -> None:
    output = ReviewerOutput.model_validate({
        "status": "completed", "verdict": "Failed", "note": "mine",
        "criteria_results": [{"criterion": "a", "met": True},
                             {"criterion": "b", "met": False, "severity": "high"}]})
    assert output.unknown_fields() == ["note", "criteria_results[1].severity"]
    assert output.model_dump()["note"] == "mine"
    planner = PlannerOutput.model_validate({"status": "completed", "task_count": {
        "planning": 1, "implementation": 2, "total": 3, "skipped": 0}})
    assert planner.unknown_fields() == ["task_count.skipped"]


@pytest.mark.parametrize(("model", "data"), [
    (PlannerOutput, {"status": "blocked"}),
    (PlannerOutput, {"status": "needs_clarification", "blockers": []}),
    (ExecutorOutput, {"status": "blocked", "report_path": "r.md",
                      "success_criteria_met": False}),
    (ReviewerOutput, {"status": "completed"}),
    (ReviewerOutput, {"status": "completed", "verdict": "Qualified",
                      "criteria_results": [{"criterion": "tests pass", "met": False}]}),
])
def test_fields_that_must_agree(model: type[BaseModel], data: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        model.model_validate(data)


def test_agreeing_fields_are_accepted() -> None:
    assert PlannerOutput.model_validate({"status": "blocked", "blockers": ["which DB?"]})
    assert ReviewerOutput.model_validate({"status": "error"}).verdict is None
    failed = ReviewerOutput.model_validate({
        "status": "completed", "verdict": "Failed",
        "criteria_results": [{"criterion": "tests pass", "met": False}]})
    assert failed.criteria_results[0].met is False


def test_the_registry_knows_each_model_and_refuses_others() -> None:
    for role in ROLES:
        assert role_of(contract(role).input_model) == role
        assert role_of(contract(role).output_model.model_validate(VALID_OUTPUT[role])) == role
    with pytest.raises(WorkflowError, match="unknown role 'judge': use planner, executor, "
                                            "reviewer or questioner"):
        contract("judge")
    with pytest.raises(WorkflowError):
        role_of(BaseModel)


def test_the_cli_names_the_same_roles() -> None:
    assert workflow_cmd.ROLES == ROLES


# -- ralph workflow schema

Cli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def cli(capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Iterator[Cli]:
    """`ralph ARGS...` in this process: exit code, stdout, stderr."""
    logger = logging.getLogger("ralph")
    saved = (list(logger.handlers), logger.level, logger.propagate)

    def invoke(*args: str) -> tuple[int, str, str]:
        capfd.readouterr()
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
        code = run(list(args))
        out, err = capfd.readouterr()
        return code, out, err

    yield invoke
    logger.handlers[:] = saved[0]
    logger.setLevel(saved[1])
    logger.propagate = saved[2]


@pytest.mark.parametrize("role", ROLES)
def test_schema_prints_the_output_schema_by_default(cli: Cli, role: str) -> None:
    code, out, err = cli("workflow", "schema", role)
    assert (code, err) == (0, "")
    assert out == schema_text(role, "output") + "\n"
    assert json.loads(out) == json_schema(role, "output")
    assert cli("workflow", "schema", role, "--output")[1] == out
    assert out.startswith('{\n  "$comment": "' + contract(role).agent_name
                          + ' contract 1.0.0, output"')


@pytest.mark.parametrize("role", ROLES)
def test_schema_input(cli: Cli, role: str) -> None:
    code, out, err = cli("workflow", "schema", role, "--input")
    assert (code, err) == (0, "")
    assert json.loads(out) == json_schema(role, "input")
    assert list(json.loads(out)["properties"]) == FIELDS[role][0]


def test_schema_output_is_stable(cli: Cli) -> None:
    assert cli("workflow", "schema", "reviewer")[1] == cli("workflow", "schema", "reviewer")[1]


@pytest.mark.parametrize(("args", "words"), [
    (["workflow", "schema", "judge"], ["ROLE", "'judge'", "planner", "questioner"]),
    (["workflow", "schema", "Planner"], ["ROLE", "'Planner'"]),
    (["workflow", "schema", "executor", "--input", "--output"], ["--input", "--output"]),
    (["workflow", "schema"], ["Missing argument", "ROLE"]),
])
def test_schema_bad_usage_is_one_line_and_exit_2(cli: Cli, args: list[str],
                                                 words: list[str]) -> None:
    code, out, err = cli(*args)
    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    for word in words:
        assert word in err, (word, err)

"""The four roles' contracts: each role's input and output as pydantic models, and their schemas.

Field names and enum values are the contract's own: inputs are the UPPER_CASE keys the prompt
carries (`SESSION_PATH`, `TASK_ID`, ...; the models read them by those names and also take the
snake_case attribute names), outputs the lower_case keys of the JSON object the agent ends its
answer with. All four contracts are at version 1.0.0.

How strict the outputs are, and why:
- Types are strict (`"3"` is not a number, `"true"` not a boolean, `"qualified"` not
  `"Qualified"`): an agent that gets one wrong is asked once more with the problem quoted,
  which costs less than guessing what it meant.
- Required are `status` and what the orchestrator acts on: the executor's `report_path` and
  `success_criteria_met`; the reviewer's `verdict` whenever its `status` is `completed`.
  Arrays default to `[]`, strings to `""`, counts to 0, and the count objects (`task_count`,
  `priority_breakdown`, `confidence_distribution`) are optional, but all their keys are
  required when one is given.
- A few rules tie fields together, because the orchestrator could not act on an answer that
  breaks them: a planner that is `blocked` or `needs_clarification`, or an executor that is
  `blocked`, names at least one blocker; a `Qualified` verdict has no unmet criterion.
- Unknown keys are accepted and kept (`model_extra`, `unknown_fields()`), never an error: an
  agent adding a note of its own has not broken the contract, and the record shows what it
  added. Inputs, which Ralph builds itself, refuse unknown keys.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeAlias, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveInt,
    model_validator,
)
from pydantic_core import PydanticCustomError

from ralph.workflow.errors import WorkflowError
from ralph.workflow.session_dir import is_task_id

CONTRACT_VERSION = "1.0.0"

Role = Literal["planner", "executor", "reviewer", "questioner"]
ROLES: tuple[Role, ...] = get_args(Role)
AGENT_NAMES: dict[Role, str] = {
    "planner": "Ralph-Planner",
    "executor": "Ralph-Executor",
    "reviewer": "Ralph-Reviewer",
    "questioner": "Ralph-Questioner",
}

SchemaKind = Literal["input", "output"]

PlannerMode = Literal["INITIALIZE", "UPDATE", "TASK_BREAKDOWN", "DISCOVERY"]
QuestionerMode = Literal["BRAINSTORM", "RESEARCH"]
PlannerStatus = Literal["completed", "blocked", "needs_clarification", "needs_qa_cycle"]
NextAction = Literal["qa_brainstorm", "qa_research", "execute", "review", "complete"]
ExecutorStatus = Literal["completed", "failed", "blocked"]
ReviewerStatus = Literal["completed", "error"]
Verdict = Literal["Qualified", "Failed"]
QuestionerStatus = Literal["completed", "blocked"]


def _text(value: str) -> str:
    """A value given on a `KEY: value` line: something, and nothing that would end the line."""
    if not value.strip():
        raise PydanticCustomError("blank", "must not be empty")
    if "\n" in value or "\r" in value:
        raise PydanticCustomError("multiline", "must be one line")
    return value


def _task_id(value: str) -> str:
    # The id names files (tasks.<id>-report.md): only the session's own id form is safe.
    if not is_task_id(value):
        raise PydanticCustomError(
            "task_id", "must be a task id such as task-1 or task-2.1")
    return value


def _relative_path(value: str) -> str:
    # A path the role is told to read: relative (to the project root), and never out of it.
    value = _text(value)
    parts = value.replace("\\", "/").split("/")
    if (value.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", value)
            or ".." in parts):
        raise PydanticCustomError(
            "relative_path", "must be a relative path without '..'")
    return value


def _directory(value: str) -> str:
    # Written with its trailing slash (`.ralph-sessions/260131-144400/`): the form the
    # instructions use to name files in it.
    value = _text(value)
    return value if value.endswith("/") else value + "/"


def _nonblank(value: str) -> str:
    if not value.strip():
        raise PydanticCustomError("blank", "must not be empty")
    return value


OneLine = Annotated[str, AfterValidator(_text)]
TaskId = Annotated[str, AfterValidator(_task_id)]
RelativePath = Annotated[str, AfterValidator(_relative_path)]
SessionPath = Annotated[str, AfterValidator(_directory)]
Named = Annotated[str, AfterValidator(_nonblank)]


def _required_with_default(*keys: str) -> Callable[[dict[str, Any]], None]:
    """A schema hook listing `keys` as required: the contract requires them of a prompt (Ralph
    always writes them), while the model defaults them to 1 for whoever builds an input."""
    def hook(schema: dict[str, Any]) -> None:
        required = schema.setdefault("required", [])
        required += [key for key in keys if key not in required]
    return hook


def _drop_additional_properties(schema: dict[str, Any]) -> None:
    # Unknown output keys are tolerated (see the module's docstring); the schema shows the
    # agent the keys that count, without inviting others.
    schema.pop("additionalProperties", None)


# --------------------------------------------------------------------------------------------
# Inputs


class RoleInput(BaseModel):
    """What the orchestrator gives a role: `KEY: value` lines in its prompt."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    session_path: SessionPath = Field(
        alias="SESSION_PATH",
        description="Path to the session directory, e.g. '.ralph-sessions/260131-144400/'.")

    def prompt_fields(self) -> dict[str, Any]:
        """The fields as the prompt gives them: by their KEY, in the contract's order, without
        the optional ones that are not set."""
        return self.model_dump(by_alias=True, exclude_none=True)


class PlannerInput(RoleInput):
    """Ralph-Planner's input: session initialization, task breakdown, Q&A coordination."""

    model_config = ConfigDict(title="Ralph-Planner input")

    mode: PlannerMode = Field(alias="MODE", description="Operation mode.")
    user_request: Named = Field(
        alias="USER_REQUEST", description="Original user request or follow-up requirements.")
    context: dict[str, Any] | None = Field(
        default=None, alias="CONTEXT",
        description="Optional additional context (e.g. workspace info, file references, "
                    "the user's answer to the planner's blockers).")


class ExecutorInput(RoleInput):
    """Ralph-Executor's input: one task to implement, and which attempt this is."""

    model_config = ConfigDict(title="Ralph-Executor input",
                              json_schema_extra=_required_with_default("ATTEMPT_NUMBER"))

    task_id: TaskId = Field(
        alias="TASK_ID", description="Identifier of the task to execute (e.g. 'task-1', "
                                     "'task-2.1').")
    attempt_number: PositiveInt = Field(
        default=1, alias="ATTEMPT_NUMBER",
        description="Attempt number (1 = first, 2+ = rework).")


class ReviewerInput(RoleInput):
    """Ralph-Reviewer's input: one task's implementation report to review."""

    model_config = ConfigDict(title="Ralph-Reviewer input")

    task_id: TaskId = Field(alias="TASK_ID", description="Identifier of the task to review.")
    report_path: RelativePath = Field(
        alias="REPORT_PATH", description="Path to the implementation report to review.")


class QuestionerInput(RoleInput):
    """Ralph-Questioner's input: which half of a Q&A cycle to run, and which cycle."""

    model_config = ConfigDict(title="Ralph-Questioner input",
                              json_schema_extra=_required_with_default("CYCLE_NUMBER"))

    mode: QuestionerMode = Field(alias="MODE", description="Operation mode.")
    cycle_number: PositiveInt = Field(
        default=1, alias="CYCLE_NUMBER", description="Q&A cycle number (1, 2, 3...).")


# --------------------------------------------------------------------------------------------
# Outputs


class _Part(BaseModel):
    """An object inside an output: strict types, unknown keys kept."""

    model_config = ConfigDict(extra="allow", frozen=True, strict=True,
                              json_schema_extra=_drop_additional_properties)


class RoleOutput(_Part):
    """What a role answers: the JSON object that ends its final answer."""

    def unknown_fields(self) -> list[str]:
        """The keys the contract does not define, as dotted paths (`task_count.extra`,
        `criteria_results[1].note`), in the order given."""
        return _unknown(self, "")


def _unknown(value: object, prefix: str) -> list[str]:
    if isinstance(value, BaseModel):
        found = [f"{prefix}{key}" for key in value.model_extra or {}]
        for name in type(value).model_fields:
            found += _unknown(getattr(value, name), f"{prefix}{name}.")
        return found
    if isinstance(value, list):
        return [path for index, item in enumerate(value)
                for path in _unknown(item, f"{prefix[:-1]}[{index}].")]
    return []


class TaskCount(_Part):
    """How many tasks tasks.md holds."""

    planning: NonNegativeInt = Field(description="Planning tasks.")
    implementation: NonNegativeInt = Field(description="Implementation tasks.")
    total: NonNegativeInt = Field(description="All tasks.")


class PlannerOutput(RoleOutput):
    """Ralph-Planner's answer."""

    model_config = ConfigDict(title="Ralph-Planner output")

    status: PlannerStatus = Field(description="Result of the planning operation.")
    artifacts_created: list[str] = Field(
        default_factory=list, description="Artifacts created (e.g. ['plan.md', 'tasks.md', "
                                          "'progress.md']).")
    artifacts_updated: list[str] = Field(default_factory=list,
                                         description="Artifacts updated.")
    task_count: TaskCount | None = Field(default=None, description="Tasks in tasks.md.")
    next_actions: list[NextAction] = Field(
        default_factory=list, description="Recommended next steps for the orchestrator.")
    blockers: list[Named] = Field(
        default_factory=list,
        description="Blocking issues requiring user clarification (at least one when status "
                    "is blocked or needs_clarification).")

    @model_validator(mode="after")
    def _blockers_named(self) -> PlannerOutput:
        if self.status in ("blocked", "needs_clarification") and not self.blockers:
            raise PydanticCustomError(
                "blockers_missing",
                "status is {status} but blockers is empty: name what the user must clarify",
                {"status": self.status})
        return self


class DiscoveredTask(_Part):
    """A task the executor found was needed."""

    id: Named = Field(description="Proposed task id.")
    description: Named = Field(description="What the task is.")
    rationale: str = Field(default="", description="Why it is needed.")


class ExecutorOutput(RoleOutput):
    """Ralph-Executor's answer."""

    model_config = ConfigDict(title="Ralph-Executor output")

    status: ExecutorStatus = Field(description="Implementation result.")
    report_path: Named = Field(
        description="Path to the task report (e.g. 'tasks.task-1-report.md' or "
                    "'tasks.task-1-report-r2.md').")
    success_criteria_met: bool = Field(description="Whether all success criteria were met.")
    discovered_tasks: list[DiscoveredTask] = Field(
        default_factory=list, description="New tasks discovered during implementation.")
    blockers: list[Named] = Field(
        default_factory=list,
        description="Issues preventing completion (at least one when status is blocked).")

    @model_validator(mode="after")
    def _blockers_named(self) -> ExecutorOutput:
        if self.status == "blocked" and not self.blockers:
            raise PydanticCustomError(
                "blockers_missing", "status is blocked but blockers is empty: name what "
                                    "prevents completion")
        return self


class CriterionResult(_Part):
    """One success criterion as the reviewer found it."""

    criterion: Named = Field(description="The success criterion.")
    met: bool = Field(description="Whether it is met.")
    evidence: str = Field(default="", description="What was examined.")
    finding: str = Field(default="", description="What was found.")


class ReviewerOutput(RoleOutput):
    """Ralph-Reviewer's answer."""

    model_config = ConfigDict(title="Ralph-Reviewer output")

    status: ReviewerStatus = Field(description="Review operation result.")
    verdict: Verdict | None = Field(
        default=None, description="Review verdict (required when status is completed).")
    criteria_results: list[CriterionResult] = Field(
        default_factory=list, description="Validation results for each success criterion.")
    quality_assessment: str = Field(default="", description="Overall quality assessment.")
    issues: list[str] = Field(default_factory=list,
                              description="Specific problems identified.")
    feedback: str = Field(default="", description="Guidance for the next iteration (if Failed).")

    @model_validator(mode="after")
    def _verdict_consistent(self) -> ReviewerOutput:
        if self.status == "completed" and self.verdict is None:
            raise PydanticCustomError(
                "verdict_missing", "status is completed but there is no verdict: give "
                                   "Qualified or Failed")
        unmet = [result.criterion for result in self.criteria_results if not result.met]
        if self.verdict == "Qualified" and unmet:
            raise PydanticCustomError(
                "verdict_contradicted",
                "verdict is Qualified but criterion '{criterion}' is not met: one unmet "
                "criterion means Failed", {"criterion": unmet[0]})
        return self


class PriorityBreakdown(_Part):
    """Questions by priority."""

    high: NonNegativeInt
    medium: NonNegativeInt
    low: NonNegativeInt


class ConfidenceDistribution(_Part):
    """Answers by confidence."""

    high: NonNegativeInt
    medium: NonNegativeInt
    low: NonNegativeInt
    unknown: NonNegativeInt


class QuestionerOutput(RoleOutput):
    """Ralph-Questioner's answer."""

    model_config = ConfigDict(title="Ralph-Questioner output")

    status: QuestionerStatus = Field(description="Operation result.")
    questions_generated: NonNegativeInt = Field(
        default=0, description="Number of questions generated (BRAINSTORM mode).")
    questions_answered: NonNegativeInt = Field(
        default=0, description="Number of questions answered (RESEARCH mode).")
    priority_breakdown: PriorityBreakdown | None = Field(
        default=None, description="Questions by priority.")
    confidence_distribution: ConfidenceDistribution | None = Field(
        default=None, description="Confidence levels of answers (RESEARCH mode).")
    new_questions_emerged: NonNegativeInt = Field(
        default=0, description="Questions discovered while answering (RESEARCH mode).")
    invalidated_assumptions: NonNegativeInt = Field(
        default=0, description="Assumptions disproven by research.")
    critical_findings: list[str] = Field(default_factory=list,
                                         description="Most important discoveries.")
    recommendations: list[str] = Field(default_factory=list,
                                       description="Suggested updates for plan.md.")


AnyInput: TypeAlias = PlannerInput | ExecutorInput | ReviewerInput | QuestionerInput
AnyOutput: TypeAlias = PlannerOutput | ExecutorOutput | ReviewerOutput | QuestionerOutput


# --------------------------------------------------------------------------------------------
# The registry


@dataclass(frozen=True)
class Contract:
    """One role's contract: who plays it (the agent name), and its input and output models."""

    role: Role
    agent_name: str
    version: str
    purpose: str
    input_model: type[RoleInput]
    output_model: type[RoleOutput]

    def model(self, kind: SchemaKind) -> type[BaseModel]:
        return self.input_model if kind == "input" else self.output_model


CONTRACTS: Mapping[Role, Contract] = {
    "planner": Contract("planner", AGENT_NAMES["planner"], CONTRACT_VERSION,
                        "Session initialization, task breakdown, Q&A coordination",
                        PlannerInput, PlannerOutput),
    "executor": Contract("executor", AGENT_NAMES["executor"], CONTRACT_VERSION,
                         "Task implementation across coding, research, documentation, analysis",
                         ExecutorInput, ExecutorOutput),
    "reviewer": Contract("reviewer", AGENT_NAMES["reviewer"], CONTRACT_VERSION,
                         "Quality validation against success criteria",
                         ReviewerInput, ReviewerOutput),
    "questioner": Contract("questioner", AGENT_NAMES["questioner"], CONTRACT_VERSION,
                           "Q&A discovery: question generation and evidence-based research",
                           QuestionerInput, QuestionerOutput),
}


def contract(role: str) -> Contract:
    """The contract of `role` (planner, executor, reviewer or questioner).

    Raises WorkflowError naming the roles for any other name."""
    if role not in ROLES:
        raise WorkflowError(f"unknown role {role!r}: use {_listed(ROLES)}")
    return CONTRACTS[role]


def role_of(model: BaseModel | type[BaseModel]) -> Role:
    """The role whose input or output model `model` (a model or an instance) is."""
    cls = model if isinstance(model, type) else type(model)
    for found in CONTRACTS.values():
        if cls in (found.input_model, found.output_model):
            return found.role
    raise WorkflowError(f"{cls.__name__} is not a role's input or output")


def json_schema(role: str, kind: SchemaKind = "output") -> dict[str, Any]:
    """The JSON Schema of `role`'s input (by its KEY names) or output."""
    found = contract(role)
    comment = f"{found.agent_name} contract {found.version}, {kind}"
    return {"$comment": comment, **found.model(kind).model_json_schema(by_alias=True)}


def schema_text(role: str, kind: SchemaKind = "output") -> str:
    """`json_schema` as the prompt and `ralph workflow schema` show it: indented, stable."""
    return json.dumps(json_schema(role, kind), indent=2, ensure_ascii=False)


def _listed(names: tuple[str, ...]) -> str:
    return ", ".join(names[:-1]) + f" or {names[-1]}"

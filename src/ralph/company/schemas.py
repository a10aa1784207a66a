"""The workspace's file schemas, as pydantic models mirroring AgentCompany's (zod) ones:
strict where the original is strict (an unknown key is an error), loose where it is not
(unknown keys ignored), no field nullable (an optional key may be missing, not null).

`schema_issues` turns a validation failure into the original's issues: the path of each
problem joined with dots, and zod's wording ("Invalid input: expected string, received
undefined", "Too small: expected string to have >=1 characters", `Unrecognized key: "x"`
after the other problems of its object), so that `workspace.validate` reads the same.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
)


@dataclass(frozen=True)
class _IsoDateTime:
    """Marks the fields zod checks as a date-time: any failure reads `Invalid input`."""


# zod 4's date-time (with an offset or local): a real date (leap years too), a time to the
# minute, seconds and a fraction optional, then `Z`, an offset or nothing; ASCII digits only
_DATE = (r"(?:(?:\d\d[2468][048]|\d\d[13579][26]|\d\d0[48]|[02468][048]00|[13579][26]00)"
         r"-02-29|\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])"
         r"|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)|02-(?:0[1-9]|1\d|2[0-8])))")
_TIME = r"(?:[01]\d|2[0-3]):[0-5]\d(?::[0-5]\d(?:\.\d+)?)?"
_ISO = re.compile(rf"{_DATE}T{_TIME}(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)?", re.ASCII)


def _check_iso(value: str) -> str:
    if _ISO.fullmatch(value) is None:
        raise ValueError("not an ISO date-time")
    return value


Str1 = Annotated[StrictStr, Field(min_length=1)]
IsoDateTime = Annotated[StrictStr, AfterValidator(_check_iso), _IsoDateTime()]
SchemaVersion = Annotated[StrictInt, Field(gt=0)]
Visibility = Literal["private_agent", "team", "managers", "org"]
ROLES = ("human", "ceo", "director", "manager", "worker")
Role = Literal["human", "ceo", "director", "manager", "worker"]
AgentRole = Literal["ceo", "director", "manager", "worker"]
ARTIFACT_HEADINGS: dict[str, tuple[str, ...]] = {
    "intake_brief": ("Summary", "Success Criteria", "Constraints"),
    "clarifications_qa": ("Questions", "Answers"),
    "proposal": ("Summary", "Plan", "Risks"),
    "workplan": ("Summary", "Breakdown", "Dependencies", "Estimates"),
    "milestone_report": ("Summary", "Evidence", "Next"),
    "manager_digest": ("Summary", "Decisions", "Risks"),
    "memory_delta": ("Summary", "Changes", "Evidence"),
    "failure_report": ("Summary", "Cause", "Next Steps"),
}
ArtifactType = Literal["intake_brief", "clarifications_qa", "proposal", "workplan",
                       "milestone_report", "manager_digest", "memory_delta", "failure_report"]


class Loose(BaseModel):
    """An object whose unknown keys are ignored (zod's plain object)."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class Strict(BaseModel):
    """An object whose unknown keys are an error (zod's strict object)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# (optional fields default to None without being validated: a key that is present must be
# of its type, null included, as in zod; `exclude_none` drops the missing ones on writing)

class CompanyYaml(Loose):
    schema_version: SchemaVersion
    type: Literal["company"]
    id: Str1
    name: Str1
    created_at: IsoDateTime


class VisibilityDefaults(Strict):
    worker_journal: Visibility
    worker_milestone_artifact: Visibility
    manager_proposal: Visibility
    director_workplan: Visibility


class PolicyYaml(Loose):
    schema_version: SchemaVersion
    type: Literal["policy"]
    id: Str1
    visibility_defaults: VisibilityDefaults


class MachineYaml(Loose):
    schema_version: SchemaVersion
    type: Literal["machine"]
    repo_roots: dict[StrictStr, StrictStr]
    provider_bins: dict[StrictStr, StrictStr]


class TeamYaml(Loose):
    schema_version: SchemaVersion
    type: Literal["team"]
    id: Str1
    name: Str1
    created_at: IsoDateTime


class AgentYaml(Loose):
    schema_version: SchemaVersion
    type: Literal["agent"]
    id: Str1
    name: Str1
    role: AgentRole
    provider: Str1
    team_id: StrictStr = None  # type: ignore[assignment]
    created_at: IsoDateTime
    launcher: dict[StrictStr, Any] = None  # type: ignore[assignment]


class ProjectYaml(Loose):
    schema_version: SchemaVersion
    type: Literal["project"]
    id: Str1
    name: Str1
    status: Literal["active", "archived"]
    created_at: IsoDateTime


class CommandRunSpec(Strict):
    kind: Literal["command"]
    argv: Annotated[list[Str1], Field(min_length=1)]
    repo_id: Str1 = None  # type: ignore[assignment]
    workdir_rel: Str1 = None  # type: ignore[assignment]
    task_id: Str1 = None  # type: ignore[assignment]
    milestone_id: Str1 = None  # type: ignore[assignment]
    worktree_relpath: Str1 = None  # type: ignore[assignment]
    worktree_branch: Str1 = None  # type: ignore[assignment]
    env: dict[StrictStr, StrictStr] = None  # type: ignore[assignment]
    stdin_relpath: Str1 = None  # type: ignore[assignment]


class RunYaml(Loose):
    schema_version: SchemaVersion
    type: Literal["run"]
    id: Str1
    project_id: Str1
    agent_id: Str1
    provider: Str1
    created_at: IsoDateTime
    status: Literal["running", "ended", "failed", "stopped"]
    context_pack_id: Str1
    events_relpath: Str1
    spec: CommandRunSpec = None  # type: ignore[assignment]


class RepoSnapshot(Strict):
    repo_id: Str1
    head_sha: Str1
    dirty: StrictBool
    dirty_patch_artifact_id: Str1 = None  # type: ignore[assignment]


class IncludedDoc(Strict):
    path: Str1
    sha256: Annotated[StrictStr, Field(min_length=16)]
    visibility: Visibility


class ContextPackManifestYaml(Strict):
    schema_version: SchemaVersion
    type: Literal["context_pack_manifest"]
    id: Str1
    created_at: IsoDateTime
    run_id: Str1
    project_id: Str1
    agent_id: Str1
    repo_snapshot: RepoSnapshot = None  # type: ignore[assignment]
    included_docs: list[IncludedDoc]
    tool_allowlist: list[StrictStr]


class PolicySnapshotYaml(Strict):
    schema_version: SchemaVersion
    type: Literal["policy_snapshot"]
    id: Str1
    created_at: IsoDateTime
    run_id: Str1
    visibility_notes: StrictStr = None  # type: ignore[assignment]
    tool_allowlist: list[StrictStr]


class ReviewSubject(Strict):
    kind: Str1
    artifact_id: Str1
    project_id: Str1
    target_file: Str1 = None  # type: ignore[assignment]
    patch_file: Str1 = None  # type: ignore[assignment]


class PolicyDecision(Strict):
    allowed: StrictBool
    rule_id: Str1
    reason: Str1


class ReviewYaml(Strict):
    schema_version: SchemaVersion
    type: Literal["review"]
    id: Str1
    created_at: IsoDateTime
    actor_id: Str1
    actor_role: Role
    decision: Literal["approved", "denied"]
    subject: ReviewSubject
    policy: PolicyDecision
    notes: StrictStr = None  # type: ignore[assignment]


class SharedArtifact(Strict):
    artifact_id: Str1
    type: Str1
    visibility: Visibility
    source_relpath: Str1
    bundle_relpath: Str1


class SharedFile(Strict):
    source_relpath: Str1
    bundle_relpath: Str1


class SharePackManifestYaml(Strict):
    schema_version: SchemaVersion
    type: Literal["share_pack"]
    id: Str1
    created_at: IsoDateTime
    project_id: Str1
    created_by: Str1
    visibility: Visibility
    included_artifacts: list[SharedArtifact]
    included_files: list[SharedFile] = None  # type: ignore[assignment]


class TaskScope(Strict):
    repo_id: Str1 = None  # type: ignore[assignment]
    workdir_rel: Str1 = None  # type: ignore[assignment]
    paths: list[Str1] = None  # type: ignore[assignment]
    requires_worktree_isolation: StrictBool = None  # type: ignore[assignment]


class MilestoneEvidence(Strict):
    requires_patch: StrictBool
    requires_tests: StrictBool


class TaskMilestone(Strict):
    id: Str1
    title: Str1
    kind: Literal["coding", "research", "planning"]
    status: Literal["draft", "ready", "in_progress", "blocked", "done"]
    acceptance_criteria: list[Str1]
    evidence: MilestoneEvidence = None  # type: ignore[assignment]


class TaskFrontMatter(Strict):
    schema_version: SchemaVersion
    type: Literal["task"]
    id: Str1
    project_id: Str1
    title: Str1
    created_at: Str1
    status: Literal["draft", "ready", "in_progress", "blocked", "done", "canceled"]
    visibility: Visibility
    team_id: Str1 = None  # type: ignore[assignment]
    assignee_agent_id: Str1 = None  # type: ignore[assignment]
    scope: TaskScope = None  # type: ignore[assignment]
    deliverables: list[Str1] = None  # type: ignore[assignment]
    acceptance_criteria: list[Str1] = None  # type: ignore[assignment]
    milestones: list[TaskMilestone]


class _ArtifactFields(BaseModel):
    """Every artifact's front matter fields (a subclass says whether others are allowed, and
    may narrow `type`, keeping its place)."""

    model_config = ConfigDict(frozen=True)

    schema_version: SchemaVersion
    type: ArtifactType
    id: Str1
    created_at: Str1
    title: Str1
    visibility: Visibility
    produced_by: Str1
    run_id: Str1
    context_pack_id: Str1


class ArtifactFrontMatter(_ArtifactFields):
    model_config = ConfigDict(extra="ignore")


class MemoryDeltaFrontMatter(_ArtifactFields):
    model_config = ConfigDict(extra="forbid")

    type: Literal["memory_delta"]
    project_id: Str1
    target_file: Str1
    patch_file: Str1
    evidence: list[Str1] = None  # type: ignore[assignment]


class MilestoneReportFrontMatter(_ArtifactFields):
    model_config = ConfigDict(extra="forbid")

    type: Literal["milestone_report"]
    project_id: Str1
    task_id: Str1
    milestone_id: Str1
    evidence_artifacts: list[Str1]
    tests_artifacts: list[Str1] = None  # type: ignore[assignment]


class HelpRequestFrontMatter(Strict):
    schema_version: SchemaVersion
    type: Literal["help_request"]
    id: Str1
    created_at: Str1
    title: Str1
    visibility: Visibility
    requester: Str1
    target_manager: Str1
    project_id: Str1 = None  # type: ignore[assignment]
    share_pack_id: Str1 = None  # type: ignore[assignment]


# -- zod's wording -----------------------------------------------------------------------------

@dataclass(frozen=True)
class SchemaIssue:
    path: str  # the problem's place, keys and indexes joined with "." ("" for the whole)
    message: str


def schema_issues(model: type[BaseModel], data: Any) -> list[SchemaIssue]:
    """The problems of `data` as `model` (none: it is valid), worded as zod words them."""
    try:
        model.model_validate(data)
    except ValidationError as exc:
        return _issues(model, exc)
    return []


def _issues(model: type[BaseModel], exc: ValidationError) -> list[SchemaIssue]:
    found: list[tuple[list[float], SchemaIssue]] = []
    unknown: dict[tuple[Any, ...], list[str]] = {}  # an object's unknown keys
    for error in exc.errors():
        loc = tuple(error["loc"])
        if error["type"] == "extra_forbidden":
            unknown.setdefault(loc[:-1], []).append(str(loc[-1]))
            continue
        place, annotation = _follow(model, loc)
        found.append((place, SchemaIssue(".".join(map(str, loc)), _message(error, annotation))))
    # zod checks an object's known keys in the order they are declared, then says its
    # unknown keys: each object's after every problem inside it, before the next field's
    for parent, keys in unknown.items():
        quoted = ", ".join(f'"{key}"' for key in keys)
        found.append(([*_follow(model, parent)[0], math.inf],
                      SchemaIssue(".".join(map(str, parent)),
                                  f"Unrecognized key{'s' if len(keys) > 1 else ''}: {quoted}")))
    return [issue for _, issue in sorted(found, key=lambda pair: pair[0])]


def _follow(model: type[BaseModel], loc: tuple[Any, ...]) -> tuple[list[float], Any]:
    """Where `loc` comes in a check that goes through fields in declaration order (a
    position per step), and the annotation of what is there (None where it cannot be
    followed)."""
    place: list[float] = []
    current: Any = model
    for part in loc:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            names = list(current.model_fields)
            place.append(names.index(part) if part in names else len(names))
            field = current.model_fields.get(str(part))
            current = None if field is None else (
                Annotated[(field.annotation, *field.metadata)] if field.metadata
                else field.annotation)
        else:
            place.append(part if isinstance(part, int) else 0)
            current = get_args(current)[-1] if get_origin(current) in (list, dict) else None
    return place, current


def _unwrap(annotation: Any) -> Any:
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def _is_datetime(annotation: Any) -> bool:
    while get_origin(annotation) is Annotated:
        args = get_args(annotation)
        if any(isinstance(meta, _IsoDateTime) for meta in args[1:]):
            return True
        annotation = args[0]
    return False


def _expected(annotation: Any) -> str:
    base = _unwrap(annotation)
    origin = get_origin(base)
    if origin is list:
        return "array"
    if origin is dict:
        return "record"
    if isinstance(base, type) and issubclass(base, BaseModel):
        return "object"
    if base is bool:
        return "boolean"
    if base is int or base is float:
        return "number"
    return "string"


def _received(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "string"


def _message(error: Any, annotation: Any) -> str:
    kind = error["type"]
    if annotation is not None and _is_datetime(annotation):
        return "Invalid input"
    base = _unwrap(annotation)
    if get_origin(base) is Literal:
        options = get_args(base)
        if len(options) == 1:
            return f'Invalid input: expected "{options[0]}"'
        return "Invalid option: expected one of " + "|".join(f'"{o}"' for o in options)
    received = "undefined" if kind == "missing" else _received(error.get("input"))
    ctx = error.get("ctx") or {}
    if kind == "string_too_short":
        return f"Too small: expected string to have >={ctx.get('min_length')} characters"
    if kind == "too_short":
        return f"Too small: expected array to have >={ctx.get('min_length')} items"
    if kind == "greater_than":
        return f"Too small: expected number to be >{ctx.get('gt')}"
    value = error.get("input")
    if isinstance(value, float) and math.isnan(value):
        return "Invalid input: expected number, received NaN"
    if kind == "int_type" and isinstance(value, float):
        return "Invalid input: expected int, received number"
    return f"Invalid input: expected {_expected(annotation)}, received {received}"

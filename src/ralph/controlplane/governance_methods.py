"""Inbox and governance: `inbox.list_reviews`, `inbox.list_help_requests`, `artifact.read`,
`memory.propose_delta`, `memory.approve_delta`, `milestone.approve`, `agent.record_mistake`,
`agent.refresh_context` (the company service's inbox, artifacts, memory, milestones,
mistakes and context_index modules)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, StrictInt, StrictStr

from ralph.company.artifacts import read_artifact
from ralph.company.context_index import refresh_context
from ralph.company.inbox import list_help_requests, list_reviews
from ralph.company.memory import approve_delta, propose_delta
from ralph.company.milestones import approve_milestone
from ralph.company.mistakes import record_mistake
from ralph.controlplane.params import Role, Str1, Visibility, WorkspaceParams
from ralph.controlplane.plane import FAILED, Plane
from ralph.rpc import Registry


class InboxListParams(WorkspaceParams):
    limit: Annotated[StrictInt, Field(gt=0, le=1000)] = 200


class ActorParams(WorkspaceParams):
    actor_id: Str1
    actor_role: Role
    actor_team_id: Str1 | None = None


class ArtifactReadParams(ActorParams):
    project_id: Str1
    artifact_id: Str1
    run_id: Str1 | None = None


class ArtifactReadResult(BaseModel):
    artifact_id: str
    artifact_relpath: str
    frontmatter: dict[str, Any]
    markdown: str


class MemoryProposeParams(WorkspaceParams):
    project_id: Str1
    title: Str1
    target_file: Str1 | None = None
    under_heading: Str1
    insert_lines: Annotated[list[Str1], Field(min_length=1)]
    visibility: Visibility
    produced_by: Str1
    run_id: Str1
    context_pack_id: Str1
    evidence: list[Str1] | None = None


class MemoryProposeResult(BaseModel):
    artifact_id: str
    artifact_relpath: str
    patch_relpath: str
    target_file: str


class MemoryApproveParams(ActorParams):
    project_id: Str1
    artifact_id: Str1
    notes: StrictStr | None = None
    decision: Literal["approved", "denied"] = "approved"  # (extension)


class DecisionResult(BaseModel):
    review_id: str
    decision: str


class MilestoneApproveParams(ActorParams):
    project_id: Str1
    task_id: Str1
    milestone_id: Str1
    report_artifact_id: Str1
    notes: StrictStr | None = None


class MilestoneApproveResult(BaseModel):
    review_id: str
    decision: str
    task_status: str
    milestone_status: str


class RecordMistakeParams(WorkspaceParams):
    worker_agent_id: Str1
    manager_actor_id: Str1
    manager_role: Role
    mistake_key: Str1
    summary: Str1
    prevention_rule: Str1
    project_id: Str1 | None = None
    run_id: Str1 | None = None
    task_id: Str1 | None = None
    milestone_id: Str1 | None = None
    evidence_artifact_ids: list[Str1] | None = None
    promote_threshold: Annotated[StrictInt, Field(ge=1)] = 3


class RefreshContextParams(WorkspaceParams):
    agent_id: Str1
    project_id: Str1 | None = None
    max_tasks: Annotated[StrictInt, Field(gt=0, le=200)] = 20
    max_scope_paths: Annotated[StrictInt, Field(gt=0, le=500)] = 40


def register(registry: Registry, plane: Plane) -> None:
    @registry.method("inbox.list_reviews", params=InboxListParams,
                     result=list[dict[str, Any]], errors=[FAILED],
                     summary="The reviews of the `limit` last review files (by file name, "
                     "descending; an invalid file counts and is left out).")
    async def inbox_list_reviews(params: InboxListParams) -> list[dict[str, Any]]:
        return await plane.call(params.workspace_dir, list_reviews, params.limit)

    @registry.method("inbox.list_help_requests", params=InboxListParams,
                     result=list[dict[str, Any]], errors=[FAILED],
                     summary="The front matter of the `limit` last help requests (by file "
                     "name, descending; an invalid file counts and is left out).")
    async def inbox_list_help_requests(params: InboxListParams) -> list[dict[str, Any]]:
        return await plane.call(params.workspace_dir, list_help_requests, params.limit)

    @registry.method("artifact.read", params=ArtifactReadParams, result=ArtifactReadResult,
                     errors=[FAILED], summary="An artifact (front matter and whole file) "
                     "for an actor the visibility policy lets read it.")
    async def artifact_read(params: ArtifactReadParams) -> ArtifactReadResult:
        found = await plane.call(params.workspace_dir, read_artifact, params.project_id,
                                 params.artifact_id, params.actor_id, params.actor_role,
                                 params.actor_team_id, params.run_id)
        return ArtifactReadResult(**found)

    @registry.method("memory.propose_delta", params=MemoryProposeParams,
                     result=MemoryProposeResult, errors=[FAILED],
                     summary="A memory_delta artifact and its patch inserting lines under a "
                     "heading of a memory file (the file itself untouched).")
    async def memory_propose_delta(params: MemoryProposeParams) -> MemoryProposeResult:
        made = await plane.call(
            params.workspace_dir, propose_delta, params.project_id, params.title,
            params.under_heading, list(params.insert_lines), params.visibility,
            params.produced_by, params.run_id, params.context_pack_id, params.target_file,
            list(params.evidence) if params.evidence is not None else None)
        return MemoryProposeResult(**made)

    @registry.method("memory.approve_delta", params=MemoryApproveParams,
                     result=DecisionResult, errors=[FAILED],
                     summary="Decide a memory delta once: approved applies its patch; "
                     "denied (extension) only records the review.")
    async def memory_approve_delta(params: MemoryApproveParams) -> DecisionResult:
        decided = await plane.call(params.workspace_dir, approve_delta, params.project_id,
                                   params.artifact_id, params.actor_id, params.actor_role,
                                   params.actor_team_id, params.notes, params.decision)
        return DecisionResult(**decided)

    @registry.method("milestone.approve", params=MilestoneApproveParams,
                     result=MilestoneApproveResult, errors=[FAILED],
                     summary="Approve a milestone on its report and evidence: the "
                     "milestone (and the task, when all are) marked done.")
    async def milestone_approve(params: MilestoneApproveParams) -> MilestoneApproveResult:
        decided = await plane.call(params.workspace_dir, approve_milestone, params.project_id,
                                   params.task_id, params.milestone_id,
                                   params.report_artifact_id, params.actor_id,
                                   params.actor_role, params.actor_team_id, params.notes)
        return MilestoneApproveResult(**decided)

    @registry.method("agent.record_mistake", params=RecordMistakeParams,
                     result=dict[str, Any], errors=[FAILED],
                     summary="Record a worker's mistake; at the threshold its prevention "
                     "rule is promoted into the worker's AGENTS.md (once).")
    async def agent_record_mistake(params: RecordMistakeParams) -> dict[str, Any]:
        return await plane.call(
            params.workspace_dir, record_mistake, params.worker_agent_id,
            params.manager_actor_id, params.manager_role, params.mistake_key, params.summary,
            params.prevention_rule, params.project_id, params.run_id, params.task_id,
            params.milestone_id,
            list(params.evidence_artifact_ids) if params.evidence_artifact_ids else None,
            params.promote_threshold)

    @registry.method("agent.refresh_context", params=RefreshContextParams,
                     result=dict[str, Any], errors=[FAILED],
                     summary="Rewrite the managed context index of an agent's AGENTS.md "
                     "(its assigned tasks, newest first, and their scope).")
    async def agent_refresh_context(params: RefreshContextParams) -> dict[str, Any]:
        return await plane.call(params.workspace_dir, refresh_context, params.agent_id,
                                params.project_id, params.max_tasks, params.max_scope_paths)

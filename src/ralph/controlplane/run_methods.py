"""`run.create`, `run.list`, `run.replay`."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field, StrictInt

from ralph.company.runs import create_run, list_runs, replay_run
from ralph.controlplane.params import Str1, WorkspaceParams
from ralph.controlplane.plane import FAILED, Plane
from ralph.rpc import Registry


class RunCreateParams(WorkspaceParams):
    project_id: Str1
    agent_id: Str1
    provider: Str1


class RunCreateResult(BaseModel):
    run_id: str
    context_pack_id: str
    run_dir: str


class RunListParams(WorkspaceParams):
    project_id: Str1 | None = None


class RunReplayParams(WorkspaceParams):
    project_id: Str1
    run_id: Str1
    tail: Annotated[StrictInt, Field(gt=0)] | None = None


def register(registry: Registry, plane: Plane) -> None:
    @registry.method("run.create", params=RunCreateParams, result=RunCreateResult,
                     errors=[FAILED], summary="A new run of an agent in a project "
                     "(run.yaml, events.jsonl with run.started, outputs/, a context pack).")
    async def run_create(params: RunCreateParams) -> RunCreateResult:
        made = await plane.call(params.workspace_dir, create_run, params.project_id,
                                params.agent_id, params.provider)
        return RunCreateResult(**made)

    @registry.method("run.list", params=RunListParams, result=list[dict[str, Any]],
                     errors=[FAILED], summary="Every run (newest first): {project_id, "
                     "run_id, created_at, status, provider, agent_id}.")
    async def run_list(params: RunListParams) -> list[dict[str, Any]]:
        return await plane.call(params.workspace_dir, list_runs, params.project_id)

    @registry.method("run.replay", params=RunReplayParams, result=dict[str, Any],
                     errors=[FAILED], summary="A run's events (the last `tail`) and the "
                     "lines of its events file that are not events.")
    async def run_replay(params: RunReplayParams) -> dict[str, Any]:
        return await plane.call(params.workspace_dir, replay_run, params.project_id,
                                params.run_id, params.tail)

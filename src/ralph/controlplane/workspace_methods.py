"""`workspace.open`, `workspace.init`, `workspace.validate`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, Field, StrictBool, StrictStr

from ralph.company.workspace import DEFAULT_COMPANY_NAME, init_workspace, validate_workspace
from ralph.controlplane.params import WorkspaceParams
from ralph.controlplane.plane import FAILED, Plane
from ralph.rpc import Registry


class WorkspaceInitParams(WorkspaceParams):
    company_name: Annotated[StrictStr, Field(min_length=1)] = DEFAULT_COMPANY_NAME
    force: StrictBool = False


class WorkspaceOpenResult(BaseModel):
    workspace_dir: str
    valid: bool
    issues: list[dict[str, str]]


class OkResult(BaseModel):
    ok: bool


def register(registry: Registry, plane: Plane) -> None:
    @registry.method("workspace.open", params=WorkspaceParams, result=WorkspaceOpenResult,
                     summary="Validate a workspace (read only).")
    async def workspace_open(params: WorkspaceParams) -> WorkspaceOpenResult:
        issues = await plane.call(params.workspace_dir, validate_workspace)
        return WorkspaceOpenResult(workspace_dir=params.workspace_dir, valid=not issues,
                                   issues=[issue.to_dict() for issue in issues])

    @registry.method("workspace.init", params=WorkspaceInitParams, result=OkResult,
                     errors=[FAILED], summary="Create a workspace's directories and files.")
    async def workspace_init(params: WorkspaceInitParams) -> OkResult:
        await plane.call(params.workspace_dir, _init, params.company_name, params.force,
                         params.workspace_dir)
        return OkResult(ok=True)

    @registry.method("workspace.validate", params=WorkspaceParams, result=dict[str, Any],
                     summary="Every problem of a workspace: {ok: true}, or {ok: false, "
                             "issues: [{code, message, path?}]}.")
    async def workspace_validate(params: WorkspaceParams) -> dict[str, Any]:
        issues = await plane.call(params.workspace_dir, validate_workspace)
        if not issues:
            return {"ok": True}
        return {"ok": False, "issues": [issue.to_dict() for issue in issues]}


def _init(root: Path, company_name: str, force: bool, shown_as: str) -> None:
    init_workspace(root, company_name, force=force, shown_as=shown_as)

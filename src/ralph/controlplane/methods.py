"""The control plane's methods (docs/protocols/agentcompany.md): names and params as
AgentCompany protocol v1 writes them, results as its implementation answers. Unknown
params are ignored (as the original's schemas drop them); a bad one is -32602 with each
problem in `data`; anything the company service refuses is -32000 with its message and
`data`.

Requests run concurrently (a long wait never holds up another request), but the requests
about one workspace are handled in the order they arrived: a client that sends
`workspace.init` and then `workspace.validate` without waiting for the first answer, as
clients of the original (which handled one request at a time) may, gets the validation of
the workspace just made.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictStr

from ralph import __version__
from ralph.company.workspace import (
    DEFAULT_COMPANY_NAME,
    WorkspaceError,
    init_workspace,
    validate_workspace,
)
from ralph.rpc import APPLICATION_ERROR, Registry, RpcError

FAILED = (APPLICATION_ERROR, "Application error")


def _absolute(value: str) -> str:
    if not Path(value).is_absolute():
        raise ValueError(f"must be an absolute path, not {value!r}")
    if "\x00" in value:
        raise ValueError("must not hold a NUL character")
    return value


WorkspaceDir = Annotated[StrictStr, Field(min_length=1), AfterValidator(_absolute)]


class _Params(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class WorkspaceParams(_Params):
    workspace_dir: WorkspaceDir


class WorkspaceInitParams(WorkspaceParams):
    company_name: Annotated[StrictStr, Field(min_length=1)] = DEFAULT_COMPANY_NAME
    force: StrictBool = False


class IssueModel(BaseModel):
    code: str
    message: str
    path: str | None = None


class WorkspaceOpenResult(BaseModel):
    workspace_dir: str
    valid: bool
    issues: list[dict[str, str]]


class OkResult(BaseModel):
    ok: bool


def failed(message: str, **data: Any) -> RpcError:
    """An application error: -32000, its message, and `data` (what it is about)."""
    return RpcError(APPLICATION_ERROR, message, data)


class InOrder:
    """One lock per workspace, taken by each request about it as it starts: the requests
    of one workspace run one after the other, in the order they arrived (a task runs up to
    its first wait in the order it was made, and a lock serves its waiters in turn)."""

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}

    def of(self, workspace_dir: str) -> asyncio.Lock:
        key = os.path.normpath(workspace_dir)
        return self._locks.setdefault(key, asyncio.Lock())


def build_registry() -> Registry:
    in_order = InOrder()
    registry = Registry(title="AgentCompany control plane (Ralph)", version=__version__,
                        description="AgentCompany protocol v1: JSON-RPC 2.0 over stdio")

    @registry.method("workspace.open", params=WorkspaceParams, result=WorkspaceOpenResult,
                     summary="Validate a workspace (read only).")
    async def workspace_open(params: WorkspaceParams) -> WorkspaceOpenResult:
        async with in_order.of(params.workspace_dir):
            issues = await asyncio.to_thread(validate_workspace, Path(params.workspace_dir))
        return WorkspaceOpenResult(workspace_dir=params.workspace_dir, valid=not issues,
                                   issues=[issue.to_dict() for issue in issues])

    @registry.method("workspace.init", params=WorkspaceInitParams, result=OkResult,
                     errors=[FAILED], summary="Create a workspace's directories and files.")
    async def workspace_init(params: WorkspaceInitParams) -> OkResult:
        try:
            async with in_order.of(params.workspace_dir):
                await asyncio.to_thread(init_workspace, Path(params.workspace_dir),
                                        params.company_name, force=params.force,
                                        shown_as=params.workspace_dir)
        except WorkspaceError as exc:
            raise failed(str(exc), workspace_dir=params.workspace_dir) from None
        except OSError as exc:
            raise failed(f"{params.workspace_dir}: {exc.strerror or exc}",
                         workspace_dir=params.workspace_dir) from None
        return OkResult(ok=True)

    @registry.method("workspace.validate", params=WorkspaceParams, result=dict[str, Any],
                     summary="Every problem of a workspace: {ok: true}, or {ok: false, "
                             "issues: [{code, message, path?}]}.")
    async def workspace_validate(params: WorkspaceParams) -> dict[str, Any]:
        async with in_order.of(params.workspace_dir):
            issues = await asyncio.to_thread(validate_workspace, Path(params.workspace_dir))
        if not issues:
            return {"ok": True}
        return {"ok": False, "issues": [issue.to_dict() for issue in issues]}

    return registry

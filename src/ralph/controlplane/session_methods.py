"""`session.launch`, `session.poll`, `session.collect`, `session.stop`, `session.list`
(ralph.company.sessions).

A launch is checked in the workspace's request order and answered once its session is
recorded; everything else about sessions runs beside the other requests: `session.collect`
waits without holding anything, so a poll (or any request) is answered meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, Field, StrictStr, model_validator

from ralph.company.layout import CompanyError
from ralph.company.session_exec import LaunchRequest, Prepared, prepare_launch
from ralph.company.sessions import SessionManager
from ralph.controlplane.params import Params, RunStatus, Str1, WorkspaceDir, WorkspaceParams
from ralph.controlplane.plane import FAILED, Plane, failed
from ralph.rpc import Registry

T = TypeVar("T")


class SessionLaunchParams(WorkspaceParams):
    project_id: Str1
    run_id: Str1
    argv: Annotated[list[Str1], Field(min_length=1)] | None = None
    repo_id: Str1 | None = None
    workdir_rel: Str1 | None = None
    task_id: Str1 | None = None
    milestone_id: Str1 | None = None
    stdin_text: StrictStr | None = None
    env: dict[StrictStr, StrictStr] | None = None
    session_ref: Str1 | None = None
    agent: Str1 | None = None  # (extension) a Ralph agent, run on prompt_text
    prompt_text: Str1 | None = None

    @model_validator(mode="after")
    def _what_runs(self) -> SessionLaunchParams:
        if self.agent is None:
            if self.argv is None:
                raise ValueError("argv is required (or agent with prompt_text)")
            if self.prompt_text is not None:
                raise ValueError("prompt_text goes with agent (a command reads stdin_text)")
        else:
            if self.prompt_text is None:
                raise ValueError("agent needs prompt_text: what the agent is to do")
            if self.stdin_text is not None:
                raise ValueError("an agent reads prompt_text, not stdin_text")
        return self


class SessionRefParams(Params):
    session_ref: Str1
    workspace_dir: WorkspaceDir | None = None  # (extension) where to look for it too


class SessionListParams(Params):
    workspace_dir: WorkspaceDir | None = None
    project_id: Str1 | None = None
    run_id: Str1 | None = None
    status: RunStatus | None = None


class SessionLaunchResult(BaseModel):
    session_ref: str


def register(registry: Registry, plane: Plane) -> None:
    manager = SessionManager(lambda: list(plane.workspaces))
    plane.session_rows = lambda workspace_dir: manager.rows(workspace_dir=workspace_dir)
    plane.on_close(manager.close)

    async def note(workspace_dir: str | None) -> None:
        if workspace_dir is not None:
            await plane.know(workspace_dir)

    @registry.method("session.launch", params=SessionLaunchParams, result=SessionLaunchResult,
                     errors=[FAILED], summary="Run a command (or a Ralph agent) for a run in "
                     "the background: {session_ref} once it is checked and recorded.")
    async def session_launch(params: SessionLaunchParams) -> SessionLaunchResult:
        request = LaunchRequest(**params.model_dump())
        ref = request.ref
        try:
            manager.claim(ref)
        except CompanyError as exc:
            raise failed(str(exc), **exc.data) from None
        pending = asyncio.ensure_future(plane.call(
            params.workspace_dir, prepare_launch, request, list(plane.workspaces)))

        def settle(done: asyncio.Future[Prepared]) -> None:
            # A launch whose request was cancelled still starts once it was recorded: a
            # session recorded running must run (or it would read as running forever).
            if not done.cancelled() and done.exception() is None:
                manager.start(done.result())
            else:
                manager.unclaim(ref)

        try:
            prepared = await asyncio.shield(pending)
        except asyncio.CancelledError:
            pending.add_done_callback(settle)
            raise
        except BaseException:
            manager.unclaim(ref)
            raise
        return SessionLaunchResult(session_ref=manager.start(prepared))

    @registry.method("session.poll", params=SessionRefParams, result=dict[str, Any],
                     errors=[FAILED], summary="A session as it is now: {session_ref, "
                     "project_id, run_id, status, exit_code, signal, error?}.")
    async def session_poll(params: SessionRefParams) -> dict[str, Any]:
        await note(params.workspace_dir)
        return await plane.off_loop(manager.poll, params.session_ref, params.workspace_dir)

    @registry.method("session.collect", params=SessionRefParams, result=dict[str, Any],
                     errors=[FAILED], summary="Wait for a session to end: its poll fields, "
                     "events_relpath and the sorted output_relpaths.")
    async def session_collect(params: SessionRefParams) -> dict[str, Any]:
        await note(params.workspace_dir)
        return await _refused(manager.collect(params.session_ref, params.workspace_dir))

    @registry.method("session.stop", params=SessionRefParams, result=dict[str, Any],
                     errors=[FAILED], summary="Stop a session (SIGTERM, SIGKILL 1.5 s "
                     "later): its poll fields at once.")
    async def session_stop(params: SessionRefParams) -> dict[str, Any]:
        await note(params.workspace_dir)
        return await _refused(manager.stop(params.session_ref, params.workspace_dir))

    @registry.method("session.list", params=SessionListParams, result=list[dict[str, Any]],
                     errors=[FAILED], summary="Sessions newest first, filtered: poll fields "
                     "+ workspace_dir, started_at_ms, ended_at_ms?.")
    async def session_list(params: SessionListParams) -> list[dict[str, Any]]:
        await note(params.workspace_dir)
        return await plane.off_loop(manager.rows, params.workspace_dir, params.project_id,
                                    params.run_id, params.status)


async def _refused(action: Awaitable[T]) -> T:
    """`action`'s result; a CompanyError as -32000 with its message and data, a file that
    cannot be read or written as -32000 naming it."""
    try:
        return await action
    except CompanyError as exc:
        raise failed(str(exc), **exc.data) from None
    except OSError as exc:
        raise failed(f"{exc.filename or 'a session file'}: {exc.strerror or exc}") from None

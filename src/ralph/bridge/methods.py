"""The bridge's methods: thin translations from the protocol to the loop service."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Annotated, Any, Literal

import orjson
from pydantic import Field, RootModel

from ralph import __version__
from ralph.bridge.models import (
    EVENT_MODELS,
    AgentOutput,
    BridgeStarted,
    BridgeStopped,
    ErrorEvent,
    IterationFinished,
    IterationStarted,
    PauseResult,
    PingResult,
    RemoteRunParams,
    RemoteRunResult,
    RunParams,
    RunPaused,
    RunResult,
    RunResumed,
    RunStarted,
    RunStopped,
    StatusResult,
    StepParams,
    StepResult,
    StopResult,
    TaskBlocked,
)
from ralph.bridge.projection import run_event
from ralph.errors import RalphError
from ralph.loop import LoopBusy, LoopService, NothingToDo
from ralph.rpc import APPLICATION_ERROR, RATE_LIMITED, RawJson, Registry, RpcError
from ralph.scale.view import RemoteRuns, RunNotFound
from ralph.store.frame import format_ts

BUSY = (APPLICATION_ERROR, "a run is already active (data.activeRunId names it)")
LIMITED = (RATE_LIMITED, "Rate limited: loop.rate_limit_per_hour allows no agent start now "
                         "(data.retryAfterSeconds)")
FAILED = (APPLICATION_ERROR, "the loop could not do it (message says why; data.error names "
                             "the kind)")
NO_SUCH_RUN = (APPLICATION_ERROR, "no such run: the store has no events of it and Temporal "
                                  "does not know it (data.error is RunNotFound, data.runId "
                                  "names it); or Temporal or the store cannot be asked "
                                  "(data.error names the kind)")


EventUnion = Annotated[BridgeStarted | BridgeStopped | RunStarted | RunStopped | RunPaused
                       | RunResumed | IterationStarted | IterationFinished | ErrorEvent
                       | AgentOutput | TaskBlocked, Field(discriminator="type")]


class EventParams(RootModel[EventUnion]):
    """One of the bridge's events; `type` says which."""


def now() -> str:
    return format_ts(time.time_ns() // 1_000_000)


def app_error(exc: RalphError) -> RpcError:
    """A loop error as a JSON-RPC application error: -32000, with what a client needs."""
    if isinstance(exc, LoopBusy):
        return RpcError(APPLICATION_ERROR, str(exc), {"activeRunId": exc.active_run_id})
    data: dict[str, Any] = {"error": type(exc).__name__}
    if isinstance(exc, NothingToDo):
        data["complete"] = exc.complete
    return RpcError(APPLICATION_ERROR, str(exc), data)


def _around_time(serialize: Callable[[Any], bytes],
                 result: Callable[[str], Any]) -> tuple[bytes, bytes]:
    """A result's JSON before its `time` and after it, written once by the method's own
    serializer: the answer is then `head"<time>"tail` (a timestamp needs no escaping),
    without a model or a serializer call per request."""
    marker = "\x00time\x00"  # in no path or version: a NUL cannot be in either
    encoded = serialize(result(marker))
    quoted = orjson.dumps(marker)
    if encoded.count(quoted) != 1:
        raise ValueError("the result's time cannot be told from its other fields")
    head, _, tail = encoded.partition(quoted)
    return head, tail


def start_wait(service: LoopService) -> float:
    """Seconds until loop.rate_limit_per_hour allows an agent start (0: now); -32000 if the
    state cannot be read. Each face says "rate limited" its own way."""
    try:
        return service.start_slot_wait()
    except RalphError as exc:  # state.json unreadable: the same -32000 as everywhere
        raise app_error(exc) from None


def status_result(service: LoopService) -> StatusResult:
    try:
        report = service.status()
    except RalphError as exc:
        raise app_error(exc) from None
    return StatusResult.of(report)  # the report's records, typed: nothing to validate


async def step_result(service: LoopService, agent: str | None) -> StepResult:
    """One iteration; its result, or the error a client gets."""
    try:
        result = await service.step(agent)
    except RalphError as exc:
        raise app_error(exc) from None
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # this request itself is being cancelled (the face is closing)
        raise RpcError(APPLICATION_ERROR, "the step was stopped", {"stopped": True}) from None
    return StepResult.model_validate(result.model_dump(include=set(StepResult.model_fields)))


async def run_result(service: LoopService, agent: str | None,
                     max_iterations: int | None) -> RunResult:
    try:
        run_id = await service.start_run(agent, max_iterations)
    except RalphError as exc:
        raise app_error(exc) from None
    return RunResult(runId=run_id)


async def stop_result(service: LoopService) -> StopResult:
    reply = await service.request("stop")
    return StopResult(stopped=reply.ok)


async def pause_result(service: LoopService, action: Literal["pause", "resume"]
                       ) -> PauseResult:
    reply = await service.request(action)
    return PauseResult(ok=reply.ok, runId=reply.run_id, paused=reply.paused)


async def remote_run_result(remote: RemoteRuns, params: RemoteRunParams) -> RemoteRunResult:
    """A run by its id (ralph.scale.view), its events as the bridge's with their `seq`."""
    try:
        view = await remote.view(params.runId, events_after=params.afterSeq,
                                 limit=params.limit, project=run_event)
    except RunNotFound as exc:
        raise RpcError(APPLICATION_ERROR, str(exc),
                       {"error": type(exc).__name__, "runId": exc.run_id}) from None
    except RalphError as exc:  # Temporal or the shared store cannot be asked
        raise app_error(exc) from None
    return RemoteRunResult.model_validate(view)


def build_registry(service: LoopService, remote: RemoteRuns | None = None) -> Registry:
    """The bridge protocol on `service` (one per bridge process); `remote`: where
    `remoteRun` finds runs (default: from the environment, ralph.scale.view)."""
    runs = remote if remote is not None else RemoteRuns.from_env(lambda: service.store)
    registry = Registry(title="Ralph bridge", version=__version__,
                        description="The Golden Ralph Loop over JSON-RPC 2.0 on stdio "
                                    "(vscode-bridge-protocol v1).")

    def not_limited() -> None:
        wait = start_wait(service)
        if wait > 0:
            raise RpcError(RATE_LIMITED, f"rate limited: no agent start allowed for "
                                         f"{wait:.0f} s (loop.rate_limit_per_hour)",
                           {"retryAfterSeconds": round(wait, 1)})

    # ping and status never wait: registered sync, they are answered on the turn their
    # request is read, without a task (the status is computed from a revalidated cache).
    @registry.method("ping", result=PingResult, summary="Health check.", sync=True)
    def ping() -> RawJson:
        return RawJson(b'"'.join((ping_head, now().encode(), ping_tail)))

    ping_head, ping_tail = _around_time(
        registry.methods["ping"].serialize,
        lambda time: PingResult(version=__version__, cwd=str(service.paths.root), time=time))

    @registry.method("status", result=StatusResult, errors=[FAILED],
                     summary="PRD progress and run state.", sync=True)
    def status() -> StatusResult:
        return status_result(service)

    @registry.method("step", params=StepParams, result=StepResult, positional=("agent",),
                     errors=[BUSY, LIMITED, FAILED],
                     summary="Run exactly one iteration (a fresh agent invocation).")
    async def step(params: StepParams) -> StepResult:
        not_limited()
        return await step_result(service, params.agent)

    @registry.method("run", params=RunParams, result=RunResult,
                     positional=("agent", "maxIterations"), errors=[BUSY, LIMITED, FAILED],
                     summary="Start a run in the background; its events follow.")
    async def run(params: RunParams) -> RunResult:
        not_limited()
        return await run_result(service, params.agent, params.maxIterations)

    @registry.method("stop", result=StopResult,
                     summary="Stop the active run now (its agent too), whichever process "
                             "runs it.")
    async def stop() -> StopResult:
        return await stop_result(service)

    @registry.method("pause", result=PauseResult,
                     summary="Pause the active run before its next iteration.")
    async def pause() -> PauseResult:
        return await pause_result(service, "pause")

    @registry.method("resume", result=PauseResult,
                     summary="Resume a paused run.")
    async def resume() -> PauseResult:
        return await pause_result(service, "resume")

    # An extension: a run by its id, from the shared store (and Temporal, if named).
    @registry.method("remoteRun", params=RemoteRunParams, result=RemoteRunResult,
                     errors=[NO_SUCH_RUN],
                     summary="Extension: a run by its id (one on Temporal, or any run in "
                             "the store): its status and a page of its events.")
    async def remote_run(params: RemoteRunParams) -> RemoteRunResult:
        return await remote_run_result(runs, params)

    registry.notification_schema("event", EventParams,
                                 summary="A loop event: " + ", ".join(
                                     m.model_fields["type"].default for m in EVENT_MODELS))
    return registry

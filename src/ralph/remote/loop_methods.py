"""The remote API's loop and notes methods (`loop/*`, `tasks/list`, `notes/*`): each calling
the same loop-service function as the editor bridge.

The loop's methods are the bridge's (docs/protocols/bridge.md), under the document's naming
style, with the bridge's results and errors field for field, so that the two faces agree:
`loop/status` is the bridge's `status`, `loop/step` its `step`, `loop/run` its `run`
(`{runId}`), `loop/stop`, `loop/pause` and `loop/resume` its `stop`, `pause` and `resume`.
Both faces call the same functions (ralph.bridge.methods: `status_result`, `step_result`,
...): a busy loop (-32000 with `data.activeRunId`) and the other failures (-32000 with
`data.error`) are the bridge's. The rate limit of agent starts (loop.rate_limit_per_hour)
is -32000 "rate limited" with `data.retry_after` (and the bridge's `retryAfterSeconds`):
the bridge's -32001 means "agent already running" in this API. Params are snake_case
(`max_iterations`; the bridge's `maxIterations` is accepted too, not both) and, as on the
bridge, an unknown one is -32602. A step runs on if its client goes away.

The others translate to the services: `loop/iterations` pages the history
(ralph.loop.history; an item is the `event/loop_iteration_finished` params of that
iteration, plus its task's `title`, `commit`, `status`, `verified` and `reason`),
`tasks/list` is `ralph tasks --json` (ralph.loop.tasklist), `notes/list` and `notes/add`
are ralph.notes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import asdict

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, StrictInt, field_validator

from ralph.bridge.methods import (
    BUSY,
    FAILED,
    app_error,
    pause_result,
    run_result,
    start_wait,
    status_result,
    step_result,
    stop_result,
)
from ralph.bridge.models import (
    AgentName,
    IterationFinished,
    PauseResult,
    RunResult,
    StatusResult,
    StepResult,
    StopResult,
)
from ralph.bridge.projection import project
from ralph.errors import RalphError
from ralph.loop import LoopService
from ralph.loop.history import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    IterationHistory,
    unfinished_iteration,
)
from ralph.loop.tasklist import TaskList, TasksUnreadable, task_list
from ralph.notes import (
    DEFAULT_SESSION,
    Note,
    NoteError,
    NoteType,
    add_note,
    check_session,
    list_notes,
)
from ralph.remote.loop_events import (
    EVENT_MODELS,
    LoopIterationFinished,
    LoopIterationStarted,
    loop_events,
)
from ralph.rpc import APPLICATION_ERROR, INVALID_PARAMS, Registry, RpcError
from ralph.store import Frame

log = logging.getLogger("ralph.remote")

LIMITED = (APPLICATION_ERROR, "rate limited: loop.rate_limit_per_hour allows no agent start "
                              "now (data.retry_after)")
NOTES_DEFAULT_LIMIT = 50
NOTES_MAX_LIMIT = 1000


class LoopCurrentResult(BaseModel):
    iteration: LoopIterationStarted | None


class _Params(BaseModel):
    # As the bridge's: a misspelt parameter (`max_iteration`) is an error, not ignored.
    model_config = ConfigDict(extra="forbid", frozen=True)


class LoopStepParams(_Params):
    agent: AgentName | None = None
    """Default: `loop.default_agent` in ralph.toml."""


class LoopRunParams(_Params):
    agent: AgentName | None = None
    max_iterations: StrictInt | None = Field(
        default=None, ge=1, validation_alias=AliasChoices("max_iterations", "maxIterations"),
        description="Default: loop.max_iterations in ralph.toml (`maxIterations`, the "
                    "bridge's name, is accepted too)")


class LoopIterationsParams(_Params):
    before: StrictInt | None = Field(
        default=None, ge=1,
        description="A store seq: the iterations recorded before it (a page's next_before); "
                    "default: the newest")
    limit: StrictInt = Field(default=DEFAULT_LIMIT, ge=1, le=MAX_LIMIT)


class IterationRecord(LoopIterationFinished):
    """An iteration as `event/loop_iteration_finished` gives it, plus its task's title, its
    commit, how it ended (`status`: done, not_done, agent_failed, stopped, interrupted,
    error), whether the task was verified done and why not."""

    title: str | None = None
    commit: str | None = None
    status: str | None = None
    verified: bool | None = None
    reason: str | None = None


class LoopIterationsResult(BaseModel):
    iterations: list[IterationRecord]
    """Newest first."""
    next_before: int | None
    """The `before` of the next (older) page; null: this page reaches the oldest."""
    total: int
    """Iterations recorded in all."""


class NotesListParams(_Params):
    type: NoteType | None = None
    session: str | None = None
    limit: StrictInt = Field(default=NOTES_DEFAULT_LIMIT, ge=1, le=NOTES_MAX_LIMIT)

    @field_validator("session")
    @classmethod
    def _session(cls, value: str | None) -> str | None:
        return None if value is None else check_session(value)


class NotesListResult(BaseModel):
    notes: list[Note]
    """Newest first."""


class NotesAddParams(_Params):
    type: NoteType
    text: str
    session: str = DEFAULT_SESSION
    iteration: StrictInt | None = Field(default=None, ge=1)

    @field_validator("session")
    @classmethod
    def _session(cls, value: str) -> str:
        return check_session(value)

    @field_validator("text")
    @classmethod
    def _text(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a note needs some text")
        return value


def iteration_record(frame: Frame) -> IterationRecord | None:
    """The history's item of an `iteration.finished` frame (None for an odd frame)."""
    try:
        event = project(frame)
        if not isinstance(event, IterationFinished):
            return None
        meta = frame.meta
        return IterationRecord(**event.model_dump(), seq=frame.seq,
                               title=meta.get("task_title"), commit=meta.get("commit"),
                               status=meta.get("status"), verified=meta.get("verified"),
                               reason=meta.get("reason"))
    except (TypeError, ValueError, KeyError) as exc:  # pydantic's ValidationError too
        log.warning("remote: frame %s (%s) cannot be an iteration: %s", frame.seq,
                    frame.topic, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return None


def _step_ended(steps: set[asyncio.Task[StepResult]]
                ) -> Callable[[asyncio.Task[StepResult]], None]:
    def ended(step: asyncio.Task[StepResult]) -> None:
        steps.discard(step)
        if not step.cancelled():
            step.exception()  # (retrieved: its client may be gone, and it said so already)

    return ended


def register(registry: Registry, service: LoopService,
             steps: set[asyncio.Task[StepResult]]) -> None:
    """Add the loop, task and notes methods on `service`. A step runs in a task of
    `steps`, not in its request: a phone that drops its connection does not stop it (the
    server waits for them when it ends)."""
    histories: list[IterationHistory] = []  # one, made on first use (it opens the store)

    def not_limited() -> None:
        wait = start_wait(service)
        if wait > 0:  # (-32001 is "agent already running" in this API: not the bridge's)
            raise RpcError(APPLICATION_ERROR, "rate limited",
                           {"retry_after": round(wait, 1), "retryAfterSeconds": round(wait, 1),
                            "reason": "loop.rate_limit_per_hour allows no agent start now"})

    @registry.method("loop/status", result=StatusResult, errors=[FAILED], sync=True,
                     summary="PRD progress and run state (the bridge's `status`).")
    def loop_status() -> StatusResult:
        return status_result(service)

    @registry.method("loop/step", params=LoopStepParams, result=StepResult,
                     positional=("agent",), errors=[BUSY, LIMITED, FAILED],
                     summary="Run exactly one iteration, answered when it ends (the "
                             "bridge's `step`).")
    async def loop_step(params: LoopStepParams) -> StepResult:
        not_limited()
        step = asyncio.get_running_loop().create_task(step_result(service, params.agent))
        steps.add(step)
        step.add_done_callback(_step_ended(steps))
        return await asyncio.shield(step)

    @registry.method("loop/run", params=LoopRunParams, result=RunResult,
                     positional=("agent", "max_iterations"), errors=[BUSY, LIMITED, FAILED],
                     summary="Start a run in the background; its events follow (the "
                             "bridge's `run`).")
    async def loop_run(params: LoopRunParams) -> RunResult:
        not_limited()
        return await run_result(service, params.agent, params.max_iterations)

    @registry.method("loop/stop", result=StopResult,
                     summary="Stop the active run now (its agent too), whichever process "
                             "runs it.")
    async def loop_stop() -> StopResult:
        return await stop_result(service)

    @registry.method("loop/pause", result=PauseResult,
                     summary="Pause the active run before its next iteration.")
    async def loop_pause() -> PauseResult:
        return await pause_result(service, "pause")

    @registry.method("loop/resume", result=PauseResult, summary="Resume a paused run.")
    async def loop_resume() -> PauseResult:
        return await pause_result(service, "resume")

    @registry.method("loop/current", result=LoopCurrentResult, errors=[FAILED],
                     summary="The iteration the active run is in now, as its "
                             "event/loop_iteration_started (null: none; an extension).")
    async def loop_current() -> LoopCurrentResult:
        # the status on the event loop, as loop/status (it shares the service's state with
        # a run of this process); the store read in a thread
        status = status_result(service)
        if not status.running:
            return LoopCurrentResult(iteration=None)
        return await asyncio.to_thread(current_iteration, service, status.activeRunId)

    @registry.method("loop/iterations", params=LoopIterationsParams,
                     result=LoopIterationsResult, errors=[FAILED],
                     summary="A page of the iteration history, newest first.")
    async def loop_iterations(params: LoopIterationsParams) -> LoopIterationsResult:
        if not histories:
            histories.append(IterationHistory(service.store))
        # the first call counts the history: not on the event loop
        return await asyncio.to_thread(iterations_page, histories[0], params)

    @registry.method("tasks/list", result=TaskList, errors=[FAILED], sync=True,
                     summary="Every task with its status, attempts and block (`ralph tasks`), "
                             "and the PRD's warnings.")
    def tasks_list() -> TaskList:
        try:
            return task_list(service.paths, service.config.files)
        except TasksUnreadable as exc:
            error = app_error(exc)
            error.data["warnings"] = [asdict(warning) for warning in exc.warnings]
            raise error from None
        except RalphError as exc:  # state.json unreadable
            raise app_error(exc) from None

    @registry.method("notes/list", params=NotesListParams, result=NotesListResult,
                     errors=[FAILED],
                     summary="Notes, newest first, of one session or all, of one type or all.")
    async def notes_list(params: NotesListParams) -> NotesListResult:
        try:
            notes = await asyncio.to_thread(list_notes, service.store,
                                            note_type=params.type, session=params.session)
        except RalphError as exc:
            raise app_error(exc) from None
        return NotesListResult(notes=notes[::-1][:params.limit])

    @registry.method("notes/add", params=NotesAddParams, result=Note, errors=[FAILED],
                     summary="Record a note (`ralph notes add`).")
    async def notes_add(params: NotesAddParams) -> Note:
        try:
            return add_note(service.store, params.type, params.text, session=params.session,
                            iteration=params.iteration)
        except NoteError as exc:  # (the params' checks are the same: not expected)
            raise RpcError(INVALID_PARAMS, "Invalid params",
                           [{"loc": [], "msg": str(exc), "type": "value_error"}]) from None
        except RalphError as exc:
            raise app_error(exc) from None

    for name, model in EVENT_MODELS.items():
        registry.notification_schema(name, model, summary=f"The editor bridge's "
                                     f"`{name.removeprefix('event/loop_')}` event, with the "
                                     "store's `seq`.")


def iterations_page(history: IterationHistory,
                    params: LoopIterationsParams) -> LoopIterationsResult:
    try:
        page = history.page(params.before, params.limit)
    except RalphError as exc:  # the store cannot be read
        raise app_error(exc) from None
    records = [record for record in map(iteration_record, page.frames) if record is not None]
    return LoopIterationsResult(iterations=records, next_before=page.next_before,
                                total=page.total)


def current_iteration(service: LoopService, run_id: str | None) -> LoopCurrentResult:
    """The iteration of the active run `run_id` now (None: it is between two, or the newest
    iteration started is a dead run's, not recovered yet)."""
    try:
        frame = unfinished_iteration(service.store)
    except RalphError as exc:
        raise app_error(exc) from None
    if frame is None or (run_id is not None and frame.meta.get("run_id") != run_id):
        return LoopCurrentResult(iteration=None)
    events = loop_events(frame)
    if not events:
        return LoopCurrentResult(iteration=None)
    return LoopCurrentResult(iteration=LoopIterationStarted.model_validate(events[0][1]))

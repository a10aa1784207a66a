"""The bridge protocol's params, results and events, field for field as the protocol
(vscode-bridge-protocol v1) names them (snake_case where it does, camelCase
where it does). Params forbid unknown fields: a misspelt parameter is an error, not ignored."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from ralph.loop.models import BlockedTask, Cost, StatusFields, StatusReport
from ralph.loop.results import StepFields
from ralph.scale.view import DEFAULT_LIMIT, MAX_LIMIT, RUN_ID_PATTERN


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Result(BaseModel):
    model_config = ConfigDict(frozen=True)


class NoParams(_Params):
    """`{}` (or no params)."""


AgentName = Annotated[str, Field(min_length=1, max_length=256)]


class StepParams(_Params):
    agent: AgentName | None = None
    """Default: `loop.default_agent` in ralph.toml, else `codex`."""


class RunParams(_Params):
    agent: AgentName | None = None
    maxIterations: StrictInt | None = Field(default=None, ge=1)
    """Default: `loop.max_iterations` in ralph.toml."""


class RemoteRunParams(_Params):
    """Extension (`remoteRun`): a run by its id, a page of its events."""

    runId: Annotated[str, Field(pattern=RUN_ID_PATTERN)]
    afterSeq: StrictInt = Field(default=0, ge=0)
    """The events after this store seq (a page's `lastSeq`); default: from the first."""
    limit: StrictInt = Field(default=DEFAULT_LIMIT, ge=1, le=MAX_LIMIT)
    """At most this many frames of the run's stream are read for one answer."""


class PingResult(_Result):
    ok: Literal[True] = True
    version: str
    cwd: str
    time: str
    """UTC, ISO-8601 with milliseconds."""


# A dataclass, as the loop's report it is taken from (`of`), which has these fields and more.
@dataclass
class StatusResult(StatusFields):
    """The documented fields (`ralph.loop.models.StatusFields`) and our extensions:
    `blocked` (the blocked tasks with their reasons), `cost` (tokens and USD of the last run
    and of all runs) and `prd_error` (why the PRD cannot be read: `total` is then 0)."""

    blocked: list[BlockedTask]
    cost: Cost
    prd_error: str | None

    @classmethod
    def of(cls, report: StatusReport) -> StatusResult:
        return cls(**{name: getattr(report, name) for name in _STATUS_RESULT_FIELDS})


_STATUS_RESULT_FIELDS = tuple(field.name for field in fields(StatusResult))


class StepResult(_Result, StepFields):
    """Exactly the documented fields (`ralph.loop.models.StepFields`)."""


class RunResult(_Result):
    runId: str


class StopResult(_Result):
    ok: Literal[True] = True
    stopped: bool


class PauseResult(_Result):
    ok: bool
    runId: str | None
    paused: bool


class RemoteRunStatus(_Result):
    """A run's status (ralph.scale.model.RunStatus, camelCase): its workflow's answer to its
    `status` query, or what its events tell."""

    runId: str
    phase: str
    """starting, running, paused, stopping, final_check, finishing or ended (from the
    events: starting, running, paused or ended)."""
    iteration: int
    maxIterations: int
    done: int
    total: int
    paused: bool
    stopRequested: bool
    lastStatus: str | None
    lastTask: str | None
    """The task id of the last iteration."""
    reason: str | None
    message: str | None
    branch: str
    repo: str


class RemoteRunResult(_Result):
    """Extension (`remoteRun`): a run by its id (ralph.scale.view.remote_run)."""

    runId: str
    status: RemoteRunStatus
    statusSource: Literal["temporal", "store"]
    """Where `status` comes from: the run's workflow, or its events in the store."""
    temporalError: str | None
    """Why Temporal did not give the status, when a Temporal server is named but could not."""
    events: list[dict[str, Any]]
    """The run's events after `afterSeq`, oldest first, each an `event` notification's
    params (the fields of its `type`) plus the frame's `seq`; `agent_output` one per frame
    (not coalesced), with `chars`."""
    lastSeq: int
    """The seq of the last frame read: the next page's `afterSeq`."""
    more: bool
    """Frames after `lastSeq` were there already: ask again for them."""


# -- events (params of the `event` notification) ---------------------------------------------

StopReasonName = Literal["complete", "no_progress", "max_iterations", "stopped", "error",
                         "unknown"]


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True)
    ts: str


class BridgeStarted(_Event):
    type: Literal["bridge_started"] = "bridge_started"


class BridgeStopped(_Event):
    type: Literal["bridge_stopped"] = "bridge_stopped"


class RunStarted(_Event):
    type: Literal["run_started"] = "run_started"
    runId: str
    agent: str
    maxIterations: int
    startIteration: int


class RunStopped(_Event):
    type: Literal["run_stopped"] = "run_stopped"
    runId: str
    reason: StopReasonName
    message: str | None = None
    """Extension: why, in one line (a budget stop is reported as `stopped` with this naming
    the budget: the protocol's reasons have no `budget`)."""


class RunPaused(_Event):
    type: Literal["run_paused"] = "run_paused"
    runId: str


class RunResumed(_Event):
    type: Literal["run_resumed"] = "run_resumed"
    runId: str


class IterationStarted(_Event):
    type: Literal["iteration_started"] = "iteration_started"
    runId: str
    iteration: int
    agent: str
    task_id: str | None
    title: str | None


class IterationFinished(_Event):
    type: Literal["iteration_finished"] = "iteration_finished"
    runId: str
    iteration: int
    agent: str
    task_id: str | None
    exitSignal: bool | None
    returnCode: int | None
    repoClean: bool
    gatesOk: bool | None
    judgeOk: bool | None
    reviewOk: bool | None
    blocked: bool
    attemptId: str | None
    receiptsDir: str | None
    contextDir: str | None
    durationSeconds: float
    logPath: str | None
    # Extensions: what the iteration's agents used (null where no agent reported it).
    tokensIn: int | None = None
    tokensOut: int | None = None
    costUsd: float | None = None


class AgentOutput(_Event):
    """Extension: the agent's output as it comes, coalesced (consecutive pieces of one kind
    joined, at most a few per second, a budget of characters per second: an agent printing
    megabytes cannot flood the editor; what is skipped is said, and is in the log)."""

    type: Literal["agent_output"] = "agent_output"
    runId: str
    iteration: int | None
    kind: str
    """text, reasoning, tool_use, tool_result or error."""
    content: str
    role: str | None = None
    """`judge` or `review` for their agents' output; null for the iteration's agent."""


class TaskBlocked(_Event):
    """Extension: a task was blocked after its failed attempts; it is skipped from now on."""

    type: Literal["task_blocked"] = "task_blocked"
    runId: str
    task_id: str
    reason: str


class ErrorEvent(_Event):
    type: Literal["error"] = "error"
    runId: str | None
    message: str


EVENT_MODELS: tuple[type[_Event], ...] = (
    BridgeStarted, BridgeStopped, RunStarted, RunStopped, RunPaused, RunResumed,
    IterationStarted, IterationFinished, ErrorEvent, AgentOutput, TaskBlocked)

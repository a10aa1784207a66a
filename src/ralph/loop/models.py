"""The loop's typed records: an iteration's result (the bridge's `step` result), a run's
outcome, and the status report. Field names follow the bridge protocol to the letter."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ralph.loop.usage import RunSpend, Spend

IterationStatus = Literal[
    "done",  # the task was verified done
    "not_done",  # the agent ran; verification did not pass
    "agent_failed",  # the agent errored, timed out or could not authenticate
    "stopped",  # a stop request or Ctrl-C ended it
    "interrupted",  # the orchestrator died during it (found and recorded afterwards)
    "error",  # the orchestrator could not go on (a missing prompt file, a git failure)
]
StopReason = Literal["complete", "no_progress", "max_iterations", "stopped", "error", "budget"]


class StepFields(BaseModel):
    """The `step` result of the bridge protocol, field for field."""

    # defer_build: a step's and a run's models are built when first used, not by every
    # import of this module (`ralph status` imports it for StatusReport and uses neither).
    model_config = ConfigDict(frozen=True, defer_build=True)

    iteration: int
    agent: str
    task_id: str | None
    exit_signal: bool | None
    return_code: int | None
    log_path: str | None
    progress_made: bool
    no_progress_streak: int
    gates_ok: bool
    repo_clean: bool
    judge_ok: bool | None
    review_ok: bool | None
    blocked: bool
    attempt_id: str | None
    receipts_dir: str | None
    context_dir: str | None
    task_title: str | None


class StepResult(StepFields):
    """One iteration: the bridge protocol's `step` result plus our records."""

    iteration_id: str
    run_id: str
    status: IterationStatus
    verified: bool
    reason: str | None  # why the task was not verified done (None when it was)
    agent_status: str | None
    commit: str | None
    started_at: str
    finished_at: str
    duration_seconds: float
    # What the iteration's agents used (the worker, a judge, a reviewer): None where no
    # agent run reported it; `usage` per agent name.
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    usage: dict[str, Spend] = Field(default_factory=dict)
    # The gates ran (`gates_ok` is then their verdict; when they did not, it is false here
    # and in the bridge's `step` result, and null in its `iteration_finished` event).
    gates_ran: bool = False


class LastIteration(BaseModel):
    """`status.last`: the last iteration, as state.json keeps it."""

    iteration_id: str
    iteration: int
    run_id: str | None
    task_id: str | None
    task_title: str | None
    status: IterationStatus
    exit_code: int | None
    started_at: str
    finished_at: str | None
    verified: bool
    reason: str | None


class RunOutcome(BaseModel):
    """How a run ended, with the figures of its summary."""

    model_config = ConfigDict(defer_build=True)  # as StepFields

    run_id: str
    reason: StopReason
    message: str
    iterations: int
    done: int
    total: int
    blocked: int = 0
    open: int = 0  # neither done nor blocked
    duration_seconds: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float | None = None  # None: no agent run reported a cost
    agents: dict[str, Spend] = Field(default_factory=dict)  # spend per agent name


class NextTask(BaseModel):
    task_id: str
    title: str
    kind: str


class BlockedTask(BaseModel):
    task_id: str
    title: str
    reason: str | None


class StatusFields(BaseModel):
    """The `status` result of the bridge protocol, field for field."""

    version: str
    cwd: str
    prd: str
    progress: str
    agents: str
    prompt: str
    done: int
    total: int
    next: NextTask | None
    running: bool
    paused: bool
    activeRunId: str | None
    last: LastIteration | None


class Cost(BaseModel):
    """`status.cost`: tokens and USD of the last run (the active one while it runs) and of
    all runs, from state.json."""

    last_run: RunSpend | None
    all_runs: RunSpend


class StatusReport(StatusFields):
    """`ralph status` and the bridge's `status`: bounded work, whatever the history."""

    blocked: list[BlockedTask]
    iterations: int
    no_progress_streak: int
    cost: Cost
    # Why the PRD could not be read (missing, no tasks, a syntax error), on one line: the
    # report then counts no task (`total` 0, `next` null) instead of failing.
    prd_error: str | None = None

"""An iteration's result (the bridge's `step` result, field for field) and a run's outcome.

Pydantic models: the bridge validates and documents them (OpenRPC). The status report's
records are plain dataclasses, in ralph.loop.models."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ralph.loop.models import IterationStatus, StopReason
from ralph.loop.usage import Spend


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

"""What a run's workflow and its activities pass each other: plain dataclasses of JSON values.

Temporal records every one of them in the run's history, and the workflow's code runs in a
sandbox that must stay deterministic, so this module holds data only (the standard library).
The loop's own state (ralph.loop.state.LoopState) travels as its JSON object: the workflow
carries it from iteration to iteration without reading it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Where the CLI, `ralph bridge` and `ralph serve` find Temporal by default.
TEMPORAL_ENV = "RALPH_TEMPORAL"
NAMESPACE_ENV = "RALPH_TEMPORAL_NAMESPACE"
QUEUE_ENV = "RALPH_TEMPORAL_QUEUE"

WORKFLOW = "RalphRun"
DEFAULT_QUEUE = "ralph"
DEFAULT_NAMESPACE = "default"

START_ACTIVITY = "ralph.start_run"
ITERATION_ACTIVITY = "ralph.iteration"
FINAL_CHECK_ACTIVITY = "ralph.final_check"
FINISH_ACTIVITY = "ralph.finish_run"
EVENT_ACTIVITY = "ralph.record_event"


@dataclass
class RunSpec:
    """A run on Temporal: what `ralph run --on temporal` asks for."""

    run_id: str
    repo: str  # a git URL, or a path to a (bare) repository every worker reaches
    branch: str  # the run's own branch (ralph/<run_id>), made from `base` at the start
    base: str | None = None  # the branch to start from (None: the repository's default)
    agent: str | None = None
    max_iterations: int = 0  # 0: the project's loop.max_iterations
    # Per iteration: heartbeats tell Temporal the worker lives; an attempt that misses them
    # for `heartbeat_seconds` is retried on another worker, up to `attempts` times.
    heartbeat_seconds: float = 30.0
    iteration_timeout_seconds: float = 4 * 3600.0
    attempts: int = 3


@dataclass
class Progress:
    """The tracker at the branch's head, as the loop's decisions need it."""

    total: int = 0
    done: int = 0
    all_done: bool = False
    has_next: bool = False


@dataclass
class Started:
    agent: str
    limit: int
    started_at: str
    head: str
    progress: Progress
    state: dict[str, Any] = field(default_factory=dict)


@dataclass
class IterationInput:
    spec: RunSpec
    iteration: int  # the run's iteration number, from 1
    state: dict[str, Any]


@dataclass
class IterationOutput:
    """One iteration's result, also recorded in its commit on the branch (a retried
    activity that finds that commit returns this instead of working again)."""

    iteration: int
    status: str  # ralph.loop.models.IterationStatus, or "push_rejected"
    verified: bool
    task_id: str | None
    reason: str | None
    commit: str | None  # the branch's head after the push
    state: dict[str, Any]
    progress: Progress
    over_budget: str | None = None
    no_progress_limit: int = 3  # the project's loop.no_progress_limit
    worker: str = ""
    replayed: bool = False  # found already done on the branch (a retried attempt)


@dataclass
class FinalCheckInput:
    spec: RunSpec
    state: dict[str, Any]
    last_verified: bool


@dataclass
class FinalCheck:
    ok: bool
    why: str


@dataclass
class FinishInput:
    spec: RunSpec
    state: dict[str, Any]
    reason: str
    message: str
    iterations: int
    started_at: str | None


@dataclass
class EventInput:
    """An event the workflow records (run.paused, run.resumed): `key` makes a retried record
    a no-op."""

    run_id: str
    topic: str
    meta: dict[str, Any]
    key: str


@dataclass
class RunEnd:
    run_id: str
    reason: str
    message: str
    iterations: int
    done: int = 0
    total: int = 0


@dataclass
class RunStatus:
    """The `status` query's answer."""

    run_id: str
    phase: str  # starting, running, paused, stopping, final_check, finishing, ended
    iteration: int
    max_iterations: int
    done: int
    total: int
    paused: bool
    stop_requested: bool
    last_status: str | None = None
    last_task: str | None = None
    reason: str | None = None
    message: str | None = None
    branch: str = ""
    repo: str = ""

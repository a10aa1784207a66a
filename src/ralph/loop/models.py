"""The status report's records (`ralph status`, the bridge's `status`), and the names of an
iteration's and a run's outcomes. Field names follow the bridge protocol to the letter.

Plain dataclasses, not pydantic models: `ralph status` builds and prints them, and importing
pydantic would take most of its start-up budget. An iteration's and a run's results are
pydantic models, in ralph.loop.results."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ralph.loop.usage import RunSpend

IterationStatus = Literal[
    "done",  # the task was verified done
    "not_done",  # the agent ran; verification did not pass
    "agent_failed",  # the agent errored, timed out or could not authenticate
    "stopped",  # a stop request or Ctrl-C ended it
    "interrupted",  # the orchestrator died during it (found and recorded afterwards)
    "error",  # the orchestrator could not go on (a missing prompt file, a git failure)
]
# A run's iteration limit that means none (`ralph nu --iterations 0`): until it ends otherwise.
NO_ITERATION_LIMIT = 1_000_000_000
StopReason = Literal["complete", "no_progress", "max_iterations", "stopped", "error", "budget"]


@dataclass
class LastIteration:
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


@dataclass
class NextTask:
    task_id: str
    title: str
    kind: str


@dataclass
class BlockedTask:
    task_id: str
    title: str
    reason: str | None


@dataclass
class Cost:
    """`status.cost`: tokens and USD of the last run (the active one while it runs) and of
    all runs, from state.json."""

    last_run: RunSpend | None
    all_runs: RunSpend


@dataclass
class StatusFields:
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


@dataclass
class StatusReport(StatusFields):
    """`ralph status` and the bridge's `status`: bounded work, whatever the history."""

    blocked: list[BlockedTask]
    iterations: int
    no_progress_streak: int
    cost: Cost
    # Why the PRD could not be read (missing, no tasks, a syntax error), on one line: the
    # report then counts no task (`total` 0, `next` null) instead of failing.
    prd_error: str | None = None

"""The loop's errors: all RalphErrors, so every face reports them in one line."""

from __future__ import annotations

from ralph.errors import RalphError


class LoopError(RalphError):
    """The loop cannot go on: a missing prompt file, not a git repository, a dirty tree."""


class LoopBusy(LoopError):
    """A run is already active for this project (in this process or another)."""

    def __init__(self, message: str, active_run_id: str | None) -> None:
        super().__init__(message)
        self.active_run_id = active_run_id


class NothingToDo(LoopError):
    """No task is ready: every task is done, or the rest are blocked."""

    def __init__(self, message: str, *, complete: bool) -> None:
        super().__init__(message)
        self.complete = complete


class LoopClosed(LoopError):
    """The service is shutting down (its face is closing): no new step or run starts."""


class AgentUnusable(LoopError):
    """The agent cannot work here and no retry would change that (it cannot start, is not
    logged in, or its CLI rejects its configuration): the run stops with reason `error`,
    without counting an attempt. `outcome` is the agent run that showed it, if it ran."""

    def __init__(self, message: str, outcome: object = None) -> None:
        super().__init__(message)
        self.outcome = outcome

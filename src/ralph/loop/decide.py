"""The loop's decisions: what a run does next, from what it knows (no I/O, no clock).

The local loop (LoopService) and a run on Temporal (ralph.scale.workflow, whose code must be
deterministic) both call these functions, so that a run ends for the same reasons with the
same words wherever it runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ralph.loop.models import StopReason
from ralph.wording import counted, every_task

STOPPED_MESSAGE = "stopped on request"


@dataclass(frozen=True)
class Progress:
    """The tracker as the run sees it before a turn."""

    total: int
    all_done: bool
    has_next: bool  # a task can start (not every remaining one blocked or waiting on one)


@dataclass(frozen=True)
class Stop:
    reason: StopReason
    message: str


@dataclass(frozen=True)
class Turn:
    """What to do next: `final_check` (every task is marked done), `wait` (paused), or
    `iterate`; or stop (`stop` is then set)."""

    action: Literal["stop", "final_check", "wait", "iterate"]
    stop: Stop | None = None


def next_turn(progress: Progress, *, count: int, limit: int, stop_requested: bool,
              paused: bool) -> Turn:
    """Before each turn of a run: stop, check the finished work, hold, or iterate."""
    if stop_requested:
        return Turn("stop", Stop("stopped", STOPPED_MESSAGE))
    if progress.all_done:
        return Turn("final_check")
    if not progress.has_next:
        return Turn("stop", Stop("no_progress", "no task can move: every remaining task is "
                                 "blocked or waits on a blocked one"))
    if count >= limit:
        return Turn("stop", Stop("max_iterations",
                                 f"reached the limit of {counted(limit, 'iteration')}"))
    if paused:  # only a run with something left to do holds (then looks again)
        return Turn("wait")
    return Turn("iterate")


def after_final_check(ok: bool, why: str, *, total: int, session: str | None = None) -> Stop:
    """Every task was marked done and the final check ran (or was not needed)."""
    if not ok:
        return Stop("error", why)
    if session is not None:
        return Stop("complete", f"session {session} is verified complete")
    return Stop("complete", f"{every_task(total)} verified done")


def after_iteration(*, over_budget: str | None, done: int, total: int,
                    no_progress_streak: int, no_progress_limit: int) -> Stop | None:
    """After an iteration: the budget spent, or too many iterations without progress."""
    if over_budget is not None and (not total or done < total):
        return Stop("budget", over_budget)  # every task done: complete, at the next turn
    if no_progress_streak >= no_progress_limit:
        return Stop("no_progress", f"no progress in {no_progress_streak} iterations in a row")
    return None

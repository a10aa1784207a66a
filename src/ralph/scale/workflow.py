"""RalphRun: a run of the loop as a Temporal workflow.

Its code is the loop's decisions only (ralph.loop.decide, the functions the local loop calls):
what to do next comes from the activities' results, and everything that touches the world
(git, agents, gates, the store) is an activity that any worker runs. Temporal keeps the
workflow's history, so a run outlives the machines that work on it: a worker that dies
mid-iteration has its activity retried elsewhere, a restarted Temporal server replays the
history and goes on.

Signals: `stop`, `pause`, `resume`. Query: `status`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, CancelledError

with workflow.unsafe.imports_passed_through():
    from ralph.loop import decide
    from ralph.scale.model import (
        EVENT_ACTIVITY,
        FINAL_CHECK_ACTIVITY,
        FINISH_ACTIVITY,
        ITERATION_ACTIVITY,
        START_ACTIVITY,
        WORKFLOW,
        EventInput,
        FinalCheck,
        FinalCheckInput,
        FinishInput,
        IterationInput,
        IterationOutput,
        Progress,
        RunEnd,
        RunSpec,
        RunStatus,
        Started,
    )

# The short activities (start, final check, finish, an event) retry until a worker takes
# them: a run whose workers are all down waits for one, it does not fail.
_SHORT = timedelta(minutes=30)
_SHORT_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), backoff_coefficient=2.0,
                           maximum_interval=timedelta(seconds=30))
# A start that cannot work (no tasks, an unknown agent) fails alike on every worker; one that
# cannot reach the repository or the store is tried for about five minutes.
_START_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1),
                           maximum_interval=timedelta(seconds=60), maximum_attempts=10,
                           non_retryable_error_types=["RalphError"])


@workflow.defn(name=WORKFLOW)
class RalphRun:
    def __init__(self) -> None:
        self._stop = False
        self._paused = False
        self._status = RunStatus(run_id="", phase="starting", iteration=0, max_iterations=0,
                                 done=0, total=0, paused=False, stop_requested=False)
        # The iteration or final check under way, which a stop cancels.
        self._current: workflow.ActivityHandle[Any] | None = None

    @workflow.run
    async def run(self, spec: RunSpec) -> RunEnd:
        status = self._status
        status.run_id, status.branch, status.repo = spec.run_id, spec.branch, spec.repo
        try:
            started: Started = await workflow.execute_activity(
                START_ACTIVITY, spec, result_type=Started, start_to_close_timeout=_SHORT,
                heartbeat_timeout=_beats(spec), retry_policy=_START_RETRY)
        except ActivityError as exc:  # a run that cannot start (no tasks, no such agent)
            status.phase, status.reason, status.message = "ended", "error", _cause(exc)
            return RunEnd(spec.run_id, "error", status.message, 0)
        status.max_iterations = started.limit
        progress, state = started.progress, started.state
        self._show(progress)
        count = 0
        last_verified = False
        while True:
            turn = decide.next_turn(
                decide.Progress(progress.total, progress.all_done, progress.has_next),
                count=count, limit=started.limit, stop_requested=self._stop,
                paused=self._paused)
            if turn.stop is not None:
                end = turn.stop
                break
            if turn.action == "final_check":
                status.phase = "final_check"
                end = await self._final_check(spec, state, last_verified, progress)
                break
            if turn.action == "wait":
                await self._hold(spec)
                continue
            status.phase = "running"
            status.iteration = count + 1
            try:
                out = await self._iterate(spec, count + 1, state)
            except ActivityError as exc:
                if self._stop:
                    end = decide.Stop("stopped", decide.STOPPED_MESSAGE)
                    count += 1
                    break
                end = decide.Stop("error", f"iteration {count + 1} failed on every attempt: "
                                           f"{_cause(exc)}")
                count += 1
                break
            count += 1
            state, progress, last_verified = out.state, out.progress, out.verified
            status.last_status, status.last_task = out.status, out.task_id
            self._show(progress)
            ended = decide.after_iteration(
                over_budget=out.over_budget, done=progress.done, total=progress.total,
                no_progress_streak=int(state.get("no_progress_streak", 0)),
                no_progress_limit=out.no_progress_limit)
            if ended is not None:
                end = ended
                break
        status.phase = "finishing"
        status.reason, status.message = end.reason, end.message
        await workflow.execute_activity(
            FINISH_ACTIVITY, FinishInput(spec, state, end.reason, end.message, count,
                                         started.started_at),
            start_to_close_timeout=_SHORT, heartbeat_timeout=_beats(spec),
            retry_policy=_SHORT_RETRY)
        status.phase, status.paused = "ended", False
        return RunEnd(spec.run_id, end.reason, end.message, count, progress.done,
                      progress.total)

    async def _final_check(self, spec: RunSpec, state: dict[str, object],
                           last_verified: bool, progress: Progress) -> decide.Stop:
        """The final check, which a stop cancels (the run then ends as stopped, as a local
        run does) and whose failure ends the run as an error, recorded."""
        handle = workflow.start_activity(
            FINAL_CHECK_ACTIVITY, FinalCheckInput(spec, dict(state), last_verified),
            result_type=FinalCheck, start_to_close_timeout=_SHORT,
            heartbeat_timeout=_beats(spec), retry_policy=_SHORT_RETRY,
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED)
        self._current = handle
        try:
            check: FinalCheck = await handle
        except ActivityError as exc:
            if self._stop:
                return decide.Stop("stopped", decide.STOPPED_MESSAGE)
            return decide.Stop("error", f"the final check failed: {_cause(exc)}")
        finally:
            self._current = None
        if self._stop:
            return decide.Stop("stopped", decide.STOPPED_MESSAGE)
        return decide.after_final_check(check.ok, check.why, total=progress.total)

    async def _iterate(self, spec: RunSpec, number: int, state: dict[str, object]
                       ) -> IterationOutput:
        handle = workflow.start_activity(
            ITERATION_ACTIVITY, IterationInput(spec, number, dict(state)),
            result_type=IterationOutput,
            start_to_close_timeout=timedelta(seconds=spec.iteration_timeout_seconds),
            heartbeat_timeout=_beats(spec),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200),
                                     backoff_coefficient=2.0,
                                     maximum_interval=timedelta(seconds=10),
                                     maximum_attempts=spec.attempts,
                                     non_retryable_error_types=["RalphError"]),
            # A stop waits for the iteration to end as a stopped one (recorded and pushed,
            # or nothing pushed at all), never half-way.
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED)
        self._current = handle
        try:
            out: IterationOutput = await handle
            return out
        finally:
            self._current = None

    async def _hold(self, spec: RunSpec) -> None:
        """Paused before the next iteration: recorded, then held until resumed or stopped."""
        self._status.phase = "paused"
        await self._event(spec, "run.paused")
        await workflow.wait_condition(lambda: not self._paused or self._stop)
        if not self._stop:
            await self._event(spec, "run.resumed")

    async def _event(self, spec: RunSpec, topic: str) -> None:
        await workflow.execute_activity(
            EVENT_ACTIVITY, EventInput(spec.run_id, topic, {}, str(workflow.uuid4())),
            start_to_close_timeout=_SHORT, heartbeat_timeout=_beats(spec),
            retry_policy=_SHORT_RETRY)

    def _show(self, progress: Progress) -> None:
        self._status.done, self._status.total = progress.done, progress.total

    @workflow.signal
    def stop(self) -> None:
        self._stop = True
        self._status.stop_requested = True
        if self._status.phase != "ended":
            self._status.phase = "stopping"
        if self._current is not None and not self._current.done():
            self._current.cancel()

    @workflow.signal
    def pause(self) -> None:
        if not self._stop:
            self._paused = self._status.paused = True

    @workflow.signal
    def resume(self) -> None:
        self._paused = self._status.paused = False

    @workflow.query
    def status(self) -> RunStatus:
        return self._status


def _beats(spec: RunSpec) -> timedelta:
    """Every activity heartbeats (ralph.scale.activities): one whose worker died is retried
    elsewhere after this long, not after its whole timeout."""
    return timedelta(seconds=spec.heartbeat_seconds)


def _cause(exc: BaseException) -> str:
    """The innermost message of an activity's failure (its last attempt's error)."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    if isinstance(exc, CancelledError):
        return "cancelled"
    return str(exc) or type(exc).__name__

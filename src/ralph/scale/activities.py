"""The activities of a RalphRun: what a worker does for a run, with the loop service's code.

Each activity checks the run's branch out in the worker's own work directory for the run
(`<workdir>/<run_id>`), works there with a LoopService on the shared store, and moves work on
through git: an iteration ends with a marker commit (`Ralph-Iteration: <run_id>/<n>`, its
result in a `Ralph-Result` trailer) pushed with the iteration's own commits in one push. A
retried attempt first looks for that marker on the branch: found, the iteration was done and
its recorded result is returned; not found, the attempt starts again from the branch's head.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import shutil
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
from temporalio import activity
from temporalio.exceptions import ApplicationError

from ralph.errors import RalphError
from ralph.git import GitError
from ralph.loop import decide
from ralph.loop.errors import LoopBusy
from ralph.loop.iteration import now_ts
from ralph.loop.models import StopReason
from ralph.loop.service import LoopService
from ralph.loop.state import LoopState, load_state
from ralph.records import convert, declared_fields
from ralph.scale import gitwork
from ralph.scale.model import (
    EVENT_ACTIVITY,
    FINAL_CHECK_ACTIVITY,
    FINISH_ACTIVITY,
    ITERATION_ACTIVITY,
    START_ACTIVITY,
    EventInput,
    FinalCheck,
    FinalCheckInput,
    FinishInput,
    IterationInput,
    IterationOutput,
    Progress,
    RunSpec,
    Started,
)
from ralph.store import Store, StoreError

log = logging.getLogger("ralph.scale")

# How many of a topic's last frames are looked through for one already recorded by an
# earlier attempt of the same activity (run.started, run.stopped, an event).
_RECENT = 500


def state_to_json(state: LoopState) -> dict[str, Any]:
    body: dict[str, Any] = orjson.loads(orjson.dumps(
        state, default=declared_fields, option=orjson.OPT_PASSTHROUGH_DATACLASS))
    return body


def state_from_json(body: dict[str, Any]) -> LoopState:
    return convert(body, LoopState) if body else LoopState()


class RunActivities:
    """The activities one worker process runs; `workdir` holds a directory per run."""

    def __init__(self, store: Store, workdir: Path, *, name: str | None = None,
                 heartbeat_seconds: float = 1.0) -> None:
        self.store = store
        self.workdir = workdir
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"
        self.heartbeat_seconds = heartbeat_seconds
        # One activity at a time in a run's directory: a retry Temporal gives this same worker
        # while an attempt it gave up on is still finishing here (its heartbeats were late)
        # waits for it, rather than resetting the tree under it.
        self._run_locks: dict[str, asyncio.Lock] = {}

    def all(self) -> list[Any]:
        return [self.start_run, self.run_iteration, self.final_check, self.finish_run,
                self.record_event]

    def run_dir(self, run_id: str) -> Path:
        return self.workdir / run_id

    def _run_lock(self, run_id: str) -> asyncio.Lock:
        return self._run_locks.setdefault(run_id, asyncio.Lock())

    # -- the activities -----------------------------------------------------------------------

    @activity.defn(name=START_ACTIVITY)
    async def start_run(self, spec: RunSpec) -> Started:
        """Make the run's branch, check what a local start checks, record `run.started`."""
        async with self._working(spec.run_id):
            head = await gitwork.create_run_branch(
                spec.repo, spec.branch, base=spec.base,
                scratch=self.workdir / ".scratch" / spec.run_id)
            await gitwork.checkout_branch(spec.repo, spec.branch, self.run_dir(spec.run_id))
            service = LoopService(self.run_dir(spec.run_id), store=self.store)
            try:
                limit = spec.max_iterations or service.config.loop.max_iterations
                earlier = self._recorded("run.started", spec.run_id)
                if earlier is not None:  # an earlier attempt recorded it, then died
                    agent = str(earlier.get("agent", spec.agent or ""))
                else:
                    agent = await service.record_remote_start(
                        spec.run_id, spec.agent, limit, self._tags(spec))
                progress, done = service.remote_progress()
            finally:
                service.close()
            return Started(agent=agent, limit=limit, started_at=now_ts(), head=head,
                           progress=_progress(progress, done),
                           state=state_to_json(LoopState()))

    @activity.defn(name=ITERATION_ACTIVITY)
    async def run_iteration(self, job: IterationInput) -> IterationOutput:
        """One iteration, done once: found on the branch already, its recorded result."""
        spec = job.spec
        key = gitwork.work_key(spec.run_id, job.iteration)
        workdir = self.run_dir(spec.run_id)
        async with self._working(spec.run_id):
            await gitwork.checkout_branch(spec.repo, spec.branch, workdir)
            attempt = activity.info().attempt
            # Only a retry can find its iteration done already (by an attempt that died or
            # was given up on after it pushed): the first attempt of a key is its first run.
            done = await self._marked(workdir, spec, key) if attempt > 1 else None
            if done is not None:
                return done
            if attempt > 1:
                self._emit(spec.run_id, "iteration.retried", {
                    "iteration": job.iteration, "attempt": attempt, "worker": self.name,
                    "message": f"iteration {job.iteration} starts again (attempt {attempt}) "
                               "from the branch's head: the last attempt did not finish"})
            service = LoopService(workdir, store=self.store)
            try:
                return await self._iterate(service, job, key)
            finally:
                service.close()

    async def _marked(self, workdir: Path, spec: RunSpec, key: str) -> IterationOutput | None:
        """The iteration's recorded result if its marker is on the branch (as last fetched):
        it was done, by an attempt that may not have lived to report it."""
        mark = await gitwork.find_mark(workdir, spec.branch, key)
        if mark is None:
            return None
        done = convert(mark.result, IterationOutput)
        done.replayed = True
        done.commit = mark.sha
        return done

    async def _iterate(self, service: LoopService, job: IterationInput,
                       key: str) -> IterationOutput:
        spec = job.spec
        workdir = self.run_dir(spec.run_id)
        before = state_from_json(job.state)
        work = asyncio.ensure_future(service.remote_iteration(
            spec.run_id, spec.agent, before, tags={"worker": self.name}))
        cancelled = False
        try:
            result, state = await asyncio.shield(work)
            ended = (result.status, result.verified, result.task_id, result.reason)
        except asyncio.CancelledError:
            why = activity.cancellation_details()
            if why is not None and why.timed_out:
                # Temporal gave this attempt up (its heartbeats came late: a store that was
                # down held this worker back) and retries it. The work goes on to its end and
                # is pushed with its marker, which the retry finds and takes as its result.
                result, state = await work
                ended = (result.status, result.verified, result.task_id, result.reason)
            elif why is None or not why.cancel_requested:
                # The worker is shutting down: the iteration stops and nothing is pushed;
                # another worker does it again from the branch's head.
                service.stop()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await work
                raise
            else:
                # A stop (the workflow cancelled this activity): the iteration ends as a
                # stopped one, recorded and committed as a local stop does, and pushed.
                cancelled = True
                service.stop()
                try:
                    result, state = await work
                    ended = (result.status, result.verified, result.task_id, result.reason)
                except asyncio.CancelledError:
                    state = load_state(service.paths.state, repair=False)
                    last = state.last
                    if state.iteration_count <= before.iteration_count or last is None:
                        raise  # stopped before it began: nothing to record or push
                    ended = ("stopped", False, last.task_id, last.reason)
                state.active_run = state.in_flight = None
        status, verified, task_id, reason = ended
        progress, done = service.remote_progress(state)
        out = IterationOutput(
            iteration=job.iteration, status=status, verified=verified, task_id=task_id,
            reason=reason, commit=None, state=state_to_json(state),
            progress=_progress(progress, done),
            over_budget=service.remote_over_budget(spec.run_id, state),
            no_progress_limit=service.config.loop.no_progress_limit, worker=self.name)
        subject = (f"ralph: iteration {job.iteration} of {spec.run_id}"
                   f"{f' ({task_id})' if task_id else ''}: {status}")
        out.commit = await gitwork.mark_iteration(workdir, key=key, run_id=spec.run_id,
                                                  subject=subject,
                                                  result=dataclasses.asdict(out))
        try:
            await gitwork.push_branch(workdir, spec.branch)
        except gitwork.PushRejected as exc:
            out = await self._rejected(job, key, str(exc))
        if cancelled:
            raise asyncio.CancelledError
        return out

    async def _rejected(self, job: IterationInput, key: str, why: str) -> IterationOutput:
        """The branch moved while the iteration worked: a failed attempt, nothing forced. Its
        work stays on this worker only; the run goes on from the branch's new head. Unless
        what moved the branch is this very iteration, done by another attempt (one Temporal
        had given up on, which pushed all the same): then that is its result."""
        spec = job.spec
        head = await gitwork.checkout_branch(spec.repo, spec.branch, self.run_dir(spec.run_id))
        marked = await self._marked(self.run_dir(spec.run_id), spec, key)
        if marked is not None:
            return marked
        self._emit(spec.run_id, "loop.warning", {"message": why, "iteration": job.iteration})
        state = state_from_json(job.state)
        state.iteration_count += 1
        state.no_progress_streak += 1
        service = LoopService(self.run_dir(spec.run_id), store=self.store)
        try:
            progress, done = service.remote_progress(state)
            limit = service.config.loop.no_progress_limit
        finally:
            service.close()
        return IterationOutput(iteration=job.iteration, status="push_rejected", verified=False,
                               task_id=None, reason=why, commit=head,
                               state=state_to_json(state), progress=_progress(progress, done),
                               no_progress_limit=limit, worker=self.name)

    @activity.defn(name=FINAL_CHECK_ACTIVITY)
    async def final_check(self, job: FinalCheckInput) -> FinalCheck:
        """Every task is marked done: the gates once more, unless the last iteration was
        verified (the local loop's final check)."""
        async with self._working(job.spec.run_id):
            workdir = self.run_dir(job.spec.run_id)
            await gitwork.checkout_branch(job.spec.repo, job.spec.branch, workdir)
            service = LoopService(workdir, store=self.store)
            try:
                ok, why = await service.remote_final_check(
                    job.spec.run_id, state_from_json(job.state), job.last_verified)
            finally:
                service.close()
            return FinalCheck(ok, why)

    @activity.defn(name=FINISH_ACTIVITY)
    async def finish_run(self, job: FinishInput) -> None:
        """Record `run.stopped`, with the figures of the branch's head."""
        spec = job.spec
        async with self._working(spec.run_id, retry_all=True):
            if self._recorded("run.stopped", spec.run_id) is not None:
                return
            workdir = self.run_dir(spec.run_id)
            await gitwork.checkout_branch(spec.repo, spec.branch, workdir)
            service = LoopService(workdir, store=self.store)
            try:
                reason: StopReason = job.reason  # type: ignore[assignment]  # from decide
                service.record_remote_stop(spec.run_id, state_from_json(job.state), reason,
                                           job.message, job.iterations, job.started_at,
                                           self._tags(spec))
            finally:
                service.close()
            # The run is over: this worker's checkout of it goes (the branch has the work).
            await asyncio.to_thread(shutil.rmtree, workdir, True)
            await asyncio.to_thread(shutil.rmtree, self.workdir / ".scratch" / spec.run_id,
                                    True)

    @activity.defn(name=EVENT_ACTIVITY)
    async def record_event(self, event: EventInput) -> None:
        async with self._working(event.run_id, retry_all=True):
            if self._recorded(event.topic, event.run_id, key=event.key) is None:
                self._emit(event.run_id, event.topic, {**event.meta, "key": event.key})

    # -- helpers ------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _working(self, run_id: str, *, retry_all: bool = False) -> AsyncIterator[None]:
        """Heartbeat while the activity works (a dead worker is noticed by the missing
        beats), one activity of a run at a time on this worker, and the errors that no
        other attempt could get past (no tasks, an unknown agent, a bad branch name) turned
        into failures Temporal does not retry. `retry_all`: recording the run's end or an
        event must happen, whatever it takes."""
        beats = asyncio.ensure_future(self._beat())
        try:
            async with self._run_lock(run_id):
                yield
        except (RalphError, ValueError) as exc:
            if retry_all or _passing(exc):
                raise
            raise ApplicationError(str(exc), type="RalphError", non_retryable=True) from None
        finally:
            beats.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beats

    async def _beat(self) -> None:
        while True:
            activity.heartbeat(self.name)
            await asyncio.sleep(self.heartbeat_seconds)

    def _tags(self, spec: RunSpec) -> dict[str, Any]:
        """What a remote run's start and end records carry besides a local run's fields."""
        return {"on": "temporal", "branch": spec.branch, "worker": self.name}

    def _emit(self, run_id: str, topic: str, meta: dict[str, Any]) -> None:
        from ralph.loop.events import run_stream  # noqa: PLC0415 - small

        self.store.append(topic, {"run_id": run_id, **meta}, stream=run_stream(run_id))

    def _recorded(self, topic: str, run_id: str, *, key: str | None = None
                  ) -> dict[str, Any] | None:
        """The meta of a `topic` frame of this run (with `key`) already in the store."""
        for frame in reversed(self.store.last(topic, _RECENT)):
            if frame.meta.get("run_id") == run_id and (key is None
                                                       or frame.meta.get("key") == key):
                return frame.meta
        return None


def _passing(exc: BaseException) -> bool:
    """An error another attempt may not meet: the store, git or the repository, the project
    busy with another attempt that is still finishing."""
    return isinstance(exc, StoreError | GitError | gitwork.RepoError | LoopBusy)


def _progress(progress: decide.Progress, done: int) -> Progress:
    return Progress(total=progress.total, done=done, all_done=progress.all_done,
                    has_next=progress.has_next)

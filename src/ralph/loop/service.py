"""The loop service: step, run (foreground or background), pause, resume, stop, status.

Every face calls this one service. One run at a time per project: in this process (checked
here) and across processes (the flock of `.ralph/loop.lock`). A process that dies in the
middle of an iteration leaves `in_flight` in state.json; the next start kills the agent it
left behind, records the iteration as interrupted, and goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from ralph.agents import adapter_for
from ralph.agents.base import AgentCommand
from ralph.agents.opencode import OpencodeAdapter
from ralph.agents.runner import resolve_program
from ralph.agents.server import AgentServer
from ralph.config import CONFIG_FILE, Config, ConfigError, ResolvedAgent, load_config, parse_config
from ralph.errors import RalphError
from ralph.git import Git, WorkTree
from ralph.loop.control import ControlAction, ControlFollower, ControlReply, ask, describe
from ralph.loop.decide import (
    STOPPED_MESSAGE,
    Progress,
    after_final_check,
    after_iteration,
    next_turn,
)
from ralph.loop.errors import LoopBusy, LoopClosed, LoopError, NothingToDo
from ralph.loop.events import EventSink, Observer, run_stream
from ralph.loop.gates import run_gates
from ralph.loop.iteration import (
    RUNTIME,
    Iteration,
    LoopContext,
    last_iteration,
    note_progress,
    now_ts,
    reopen_tasks,
)
from ralph.loop.lock import ProjectLock
from ralph.loop.models import StatusReport, StopReason
from ralph.loop.paths import ProjectPaths
from ralph.loop.plan import SessionPlan
from ralph.loop.prdcheck import prd_warnings
from ralph.loop.protect import Guard, changed_after, protected_for, put_back, put_back_note
from ralph.loop.ratelimit import HOUR_S
from ralph.loop.results import RunOutcome, StepResult
from ralph.loop.state import (
    ActiveRun,
    InFlight,
    LoopState,
    load_state,
    owner_died,
    save_state,
)
from ralph.loop.status import StatusSource, project_status
from ralph.loop.usage import RunSpend, budget_reached
from ralph.loop.worktree import (
    attempt_message,
    by_gates,
    prepare_tree,
    ralph_files,
    remember_gate_outputs,
)
from ralph.proc import group_alive, kill_group, kill_owned, owner_id
from ralph.store import Store
from ralph.store.ids import IdGenerator
from ralph.store.streams import stream_path
from ralph.tracker import Snapshot, open_tracker

T = TypeVar("T")
log = logging.getLogger("ralph.loop")
_ids = IdGenerator()


HEARTBEAT_S = 1.0
STARTING_WAIT_S = 5.0  # a stop or pause waits this long for a run that is starting
# A dead process's last sign of life can be a heartbeat old, and its guard takes up to about
# 1.5 s to end what it left: files written that much later are still the agent's.
LIFE_SLACK_NS = 3_000_000_000
NO_GATES_WARNING = ("no gates are configured ([gates] commands in ralph.toml): a ticked box "
                    "is then the only evidence that a task is done")
NO_GATES_SESSION_WARNING = ("no gates are configured ([gates] commands in ralph.toml): the "
                            "session's notes are then the only evidence that it is done")


def seconds_since(ts: str | None) -> float:
    """Seconds from a recorded UTC timestamp to now (0 if there is none or it is odd)."""
    if not ts:
        return 0.0
    try:
        then = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    return max(0.0, (datetime.now(UTC) - then).total_seconds())


def new_run_id() -> str:
    return "run_" + _ids.next()[0]


class LoopService:
    """The Ralph loop for the project at `root`."""

    def __init__(self, root: Path, *, config: Config | None = None, store: Store | None = None,
                 observer: Observer | None = None, plan: SessionPlan | None = None) -> None:
        self.paths = ProjectPaths(root)
        self.plan = plan  # a named session's (`ralph nu`), else the project's tracker
        self.config = config if config is not None else load_config(root)
        self._config_put_back = False
        self.observer = observer
        self._store = store
        self._own_store = store is None
        self.git = Git(root)
        self._lock = ProjectLock(self.paths.lock)
        self._active_run_id: str | None = None
        self._run_task: asyncio.Task[RunOutcome] | None = None
        self._stoppable: asyncio.Task[Any] | None = None  # the iteration or final check now
        self._stop_requested = False
        self._pausable = False  # the active run has a next iteration to pause before
        self._closed_because: str | None = None
        self._paused = False
        self._resumed: asyncio.Event | None = None
        self._state: LoopState | None = None
        self._status_source = StatusSource(self.paths, self.config.files)
        self._server: AgentServer | None = None  # the active run's agent server

    @property
    def server_command(self) -> str | None:
        """The active run's agent server's command (`web`, `serve`), if it has one."""
        server = self._server
        return server.argv[1] if server is not None and len(server.argv) > 1 else None

    @property
    def active_run_id(self) -> str | None:
        return self._active_run_id

    def close(self) -> None:
        """Release the project; a background run must have ended (see `aclose`)."""
        if self._run_task is not None and not self._run_task.done():
            raise LoopError("a background run is still active: stop it and wait first")
        self._lock.release()
        if self._own_store and self._store is not None:
            self._store.close()
            self._store = None

    @property
    def store(self) -> Store:
        """The project's event store, opened on first use (`status` never needs it); created
        by the first event appended, so that a face that only looks (a bridge asked for its
        status) leaves no `.ralph/store` behind."""
        if self._store is None:
            self._store = Store(self.paths.store, create=False)
        return self._store

    async def aclose(self) -> None:
        """Stop the background run if there is one, wait for it, then close."""
        await self.stop_and_wait()
        self.close()

    def refuse_new_work(self, why: str) -> None:
        """From now on every step or run is refused with LoopClosed (`why` says why): a face
        that is shutting down calls it before stopping what runs, so that a request already
        received but not yet started cannot start afterwards."""
        self._closed_because = why

    async def stop_and_wait(self) -> None:
        """Stop the active run, and wait for a background run to end (its run.stopped is
        then in the store)."""
        self.stop()
        if self._run_task is not None and not self._run_task.done():
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await self._run_task

    # -- entry points ------------------------------------------------------------------------

    async def step(self, agent: str | None = None, *, require_clean: bool = False,
                   allow_dirty: bool = False) -> StepResult:
        """Run exactly one iteration with a fresh agent."""
        run_id = new_run_id()
        clock = time.monotonic()
        async with self._session(run_id, agent, 1, "step",
                                 TreePolicy(require_clean, allow_dirty)) as (ctx, resolved):
            emit = EventSink(self.store, run_id, self.observer)
            result = await self._iterate(ctx, run_id, resolved, emit)
            done, total = self._progress(ctx)
            reason: StopReason = "complete" if done == total else "max_iterations"
            message = ("every task is verified done" if reason == "complete"
                       else "a step runs one iteration")
            self._finish_run(ctx, emit, reason, message, 1,
                             self._outcome(ctx, run_id, reason, message, 1, clock))
            return result

    async def run(self, agent: str | None = None, max_iterations: int | None = None, *,
                  require_clean: bool = False, allow_dirty: bool = False) -> RunOutcome:
        """Loop until every task is verified done, or another stop reason (foreground)."""
        return await self._run(new_run_id(), agent, max_iterations,
                               TreePolicy(require_clean, allow_dirty))

    async def start_run(self, agent: str | None = None, max_iterations: int | None = None, *,
                        require_clean: bool = False, allow_dirty: bool = False) -> str:
        """Start a run in the background (a task on the running event loop); its id.

        What the run would check first is checked here (see `check`), so that a run that
        cannot start is refused by this call rather than reported later by its events. The
        run's slot is reserved before that check: a `step` or a second run asked for
        meanwhile is refused, and a stop or pause asked for meanwhile is kept."""
        run_id = new_run_id()
        policy = TreePolicy(require_clean, allow_dirty)
        self._reserve(run_id, background=True)
        try:
            if max_iterations is not None and max_iterations < 1:
                raise LoopError("max iterations must be at least 1")
            await self.check(agent, policy)
            self._check_open()  # the face may have closed during the check
            if self._lock.is_held_elsewhere():
                raise self._busy_elsewhere()
        except BaseException:
            self._active_run_id = None
            raise
        self._run_task = asyncio.get_running_loop().create_task(
            self._run(run_id, agent, max_iterations, policy, reserved=True),
            name=f"ralph-run-{run_id}")
        return run_id

    async def wait(self) -> RunOutcome | None:
        """The outcome of the background run, when it ends (None if there is none)."""
        task = self._run_task
        return None if task is None else await task

    def stop(self) -> bool:
        """Stop the active run now: the agent's process group ends with it. Asked again
        (a second SIGTERM, a terminal's SIGHUP twice), it does not interrupt the stop
        already under way, which records and commits what the iteration left."""
        if self._active_run_id is None:
            return False
        first = not self._stop_requested
        self._stop_requested = True
        if self._resumed is not None:
            self._resumed.set()
        if first and self._stoppable is not None and not self._stoppable.done():
            self._stoppable.cancel()
        return True

    def pause(self) -> bool:
        """Pause the active run before its next iteration (a step has no next iteration:
        False)."""
        if self._active_run_id is None or self._stop_requested or not self._pausable:
            return False
        self._paused = True
        if self._resumed is not None:
            self._resumed.clear()
        self._set_paused(True)
        return True

    def resume(self) -> bool:
        if self._active_run_id is None or not self._paused:
            return False
        self._paused = False
        if self._resumed is not None:
            self._resumed.set()
        self._set_paused(False)
        return True

    @property
    def paused(self) -> bool:
        return self._paused

    async def request(self, action: ControlAction) -> ControlReply:
        """Stop, pause or resume the project's active run, whichever process runs it: this
        one directly, another through the store (ralph.loop.control). Every face calls
        this: `ralph stop` in a terminal and the bridge's `stop` do the same thing."""
        run_id = self._active_run_id
        if run_id is not None:
            ok, paused = self._apply_control(action)
            return ControlReply(ok=ok, run_id=run_id, paused=paused,
                                message=describe(action, run_id, ok=ok))
        # A run starting in another process holds the lock before it records itself
        # (recovery, checks, commits): wait for it a little rather than miss it.
        deadline = time.monotonic() + STARTING_WAIT_S
        while self._lock.is_held_elsewhere():
            active = load_state(self.paths.state, repair=False).active_run
            if active is not None and active.pid == self._lock.holder():
                return await ask(self.store, active.run_id, action, self.paths.lock)
            if time.monotonic() >= deadline:
                return ControlReply(ok=False, run_id=None, paused=False, answered=False,
                                    message="a run is starting in another process: try "
                                            "again in a moment")
            await asyncio.sleep(0.1)
        return ControlReply(ok=False, run_id=None, paused=False,
                            message="no run is active for this project")

    def _apply_control(self, action: ControlAction) -> tuple[bool, bool]:
        """Do `action` to this process's run: (done, paused now)."""
        if action == "stop":
            ok = self.stop()
        elif action == "pause":
            ok = self.pause()
        else:
            ok = self.resume()
        return ok, self._paused

    async def check(self, agent: str | None = None, policy: TreePolicy | None = None
                    ) -> ResolvedAgent:
        """What a start would check first (git, agent and its program, the tracker, changes
        in the tree), without starting or committing anything: faces call it to refuse a
        run at once rather than report its failure later."""
        state = load_state(self.paths.state, repair=False)
        ctx = LoopContext(self.paths, self.config, self.store, self.git, state,
                          source=self._status_source, plan=self.plan)
        return await self._preflight(ctx, agent, policy or TreePolicy(), run_id=None)

    def start_slot_wait(self) -> float:
        """Seconds until `loop.rate_limit_per_hour` allows another agent start (0: now)."""
        per_hour = self.config.loop.rate_limit_per_hour
        if per_hour <= 0:
            return 0.0
        now = time.time()
        starts = [t for t in load_state(self.paths.state, repair=False).agent_starts
                  if now - t < HOUR_S]
        if len(starts) < per_hour:
            return 0.0
        return max(0.0, starts[-per_hour] + HOUR_S - now)

    # -- a run whose loop is elsewhere (ralph.scale: a Temporal workflow) ---------------------

    async def remote_iteration(self, run_id: str, agent: str | None, state: LoopState,
                               tags: dict[str, Any] | None = None
                               ) -> tuple[StepResult, LoopState]:
        """One iteration of run `run_id` in this work directory, which the caller checked
        out on the run's branch, from the run's `state` (the workflow carries it from
        iteration to iteration, whichever machine runs them): as `step`, but the run's start,
        end, control and branch are the caller's. The state after it comes back with it."""
        self.paths.state.parent.mkdir(parents=True, exist_ok=True)  # a fresh clone has none
        save_state(self.paths.state, replace(state, active_run=None, in_flight=None))
        async with self._session(run_id, agent, 1, "run", TreePolicy(),
                                 remote=True) as (ctx, resolved):
            emit = EventSink(self.store, run_id, self.observer, tags=tags)
            result = await self._iterate(ctx, run_id, resolved, emit)
            ctx.state.active_run = None
            ctx.save()
            return result, ctx.state

    def remote_progress(self, state: LoopState | None = None) -> tuple[Progress, int]:
        """The tracker here as a run's decisions see it, and how many tasks are done."""
        ctx = LoopContext(self.paths, self.config, self.store, self.git,
                          state or LoopState(), source=self._status_source, plan=self.plan)
        tasks = ctx.tracker().snapshot()
        return Progress(len(tasks), tasks.all_done(), tasks.next_task() is not None), tasks.done

    def remote_over_budget(self, run_id: str, state: LoopState) -> str | None:
        ctx = LoopContext(self.paths, self.config, self.store, self.git, state,
                          source=self._status_source, plan=self.plan)
        return self._over_budget(ctx, run_id)

    async def remote_final_check(self, run_id: str, state: LoopState,
                                 last_verified: bool) -> tuple[bool, str]:
        """The check a run makes when every task is marked done (see `_final_check`)."""
        ctx = LoopContext(self.paths, self.config, self.store, self.git, state,
                          source=self._status_source, plan=self.plan)
        emit = EventSink(self.store, run_id, self.observer)
        return await self._final_check(ctx, emit, run_id, last_verified)

    async def record_remote_start(self, run_id: str, agent: str | None, limit: int,
                                  extra: dict[str, Any]) -> str:
        """Check what a start checks, then record `run.started` (with `extra` fields); the
        agent's name."""
        resolved = await self.check(agent)
        emit = EventSink(self.store, run_id, self.observer)
        emit("run.started", {"agent": resolved.name, "maxIterations": limit,
                             "startIteration": 1, "mode": "run", **extra})
        self._warn_at_start(emit)
        return resolved.name

    def record_remote_stop(self, run_id: str, state: LoopState, reason: StopReason,
                           message: str, count: int, started_at: str | None,
                           extra: dict[str, Any]) -> RunOutcome:
        """Record `run.stopped` for a remote run, with the figures a local run gives."""
        self.paths.state.parent.mkdir(parents=True, exist_ok=True)
        ctx = LoopContext(self.paths, self.config, self.store, self.git, state,
                          source=self._status_source, plan=self.plan)
        emit = EventSink(self.store, run_id, self.observer, tags=extra)
        outcome = self._outcome(ctx, run_id, reason, message, count, None,
                                started_at=started_at)
        self._finish_run(ctx, emit, reason, message, count, outcome)
        return outcome

    # -- status ------------------------------------------------------------------------------

    def status(self) -> StatusReport:
        """Progress and run state (see ralph.loop.status)."""
        return project_status(self.paths, self.config.files, state=self._state,
                              active_run_id=self._active_run_id, paused=self._paused,
                              source=self._status_source)

    # -- the run -----------------------------------------------------------------------------

    async def _run(self, run_id: str, agent: str | None, max_iterations: int | None,
                   policy: TreePolicy, *, reserved: bool = False) -> RunOutcome:
        limit = max_iterations if max_iterations is not None else self.config.loop.max_iterations
        if limit < 1:
            raise LoopError("max iterations must be at least 1")
        clock = time.monotonic()
        try:
            async with self._session(run_id, agent, limit, "run", policy,
                                     reserved=reserved) as (ctx, resolved):
                emit = EventSink(self.store, run_id, self.observer)
                reason, message, count = await self._loop(ctx, run_id, resolved, emit, limit)
                outcome = self._outcome(ctx, run_id, reason, message, count, clock)
                self._finish_run(ctx, emit, reason, message, count, outcome)
                return outcome
        finally:
            if reserved and self._active_run_id == run_id:
                self._active_run_id = None

    async def _loop(self, ctx: LoopContext, run_id: str, agent: ResolvedAgent,
                    emit: EventSink, limit: int) -> tuple[StopReason, str, int]:
        count = 0
        last_verified = False
        while True:
            tasks = ctx.tracker().snapshot() if not self._stop_requested else Snapshot(())
            turn = next_turn(Progress(len(tasks), tasks.all_done(), tasks.next_task() is not None),
                             count=count, limit=limit, stop_requested=self._stop_requested,
                             paused=self._paused)
            if turn.stop is not None:
                return turn.stop.reason, turn.stop.message, count
            if turn.action == "final_check":
                try:
                    ok, why = await self._until_stopped(
                        self._final_check(ctx, emit, run_id, last_verified))
                except asyncio.CancelledError:
                    if self._stopped_on_request():
                        return "stopped", STOPPED_MESSAGE, count
                    raise
                end = after_final_check(ok, why, total=len(tasks),
                                        session=self.plan.name if self.plan else None)
                return end.reason, end.message, count
            if turn.action == "wait":
                await self._wait_resume(emit)
                continue
            try:
                await self._until_stopped(self._keep_server(ctx, emit))
                result = await self._iterate(ctx, run_id, agent, emit)
            except asyncio.CancelledError:
                if self._stopped_on_request():
                    return "stopped", STOPPED_MESSAGE, count + 1
                raise
            except NothingToDo:
                continue
            except (RalphError, OSError) as exc:
                emit("loop.error", {"message": str(exc)})
                return "error", str(exc), count + 1
            count += 1
            last_verified = result.verified
            done, total = self._progress(ctx)
            ended = after_iteration(over_budget=self._over_budget(ctx, run_id), done=done,
                                    total=total,
                                    no_progress_streak=ctx.state.no_progress_streak,
                                    no_progress_limit=self.config.loop.no_progress_limit)
            if ended is not None:
                return ended.reason, ended.message, count

    async def _iterate(self, ctx: LoopContext, run_id: str, agent: ResolvedAgent,
                       emit: EventSink) -> StepResult:
        """One iteration, which stop() can cancel (a step stopped during its set-up raises
        CancelledError here, as one stopped during its iteration does)."""
        iteration = Iteration(ctx, run_id=run_id, agent=agent, emit=emit)
        return await self._until_stopped(iteration.run())

    async def _until_stopped(self, work: Coroutine[Any, Any, T]) -> T:
        """Run `work` in its own task, so that stop() can cancel just it (and its children:
        the agent's or a gate's process group ends with it). Stopped already: not started."""
        if self._stop_requested:
            work.close()
            raise asyncio.CancelledError
        task: asyncio.Task[T] = asyncio.get_running_loop().create_task(work)
        self._stoppable = task
        try:
            return await task
        finally:
            self._stoppable = None

    def _stopped_on_request(self) -> bool:
        """A CancelledError came from stop(), not from cancelling the run itself."""
        current = asyncio.current_task()
        return self._stop_requested and not (current is not None and current.cancelling())

    async def _final_check(self, ctx: LoopContext, emit: EventSink, run_id: str,
                           last_verified: bool) -> tuple[bool, str]:
        """Every task is marked done: unless this run just verified the last one, run the
        gates once more, so that "complete" always rests on evidence gathered now."""
        if last_verified or not ctx.config.gates.commands:
            return True, ""
        receipts = await run_gates(ctx.config.gates.commands, cwd=ctx.paths.root,
                                   timeout_s=ctx.config.gates.timeout_seconds,
                                   receipts_dir=ctx.paths.ralph_dir / "receipts" / "_final" /
                                   run_id, emit=emit)
        failed = [r for r in receipts if not r.ok]
        if failed and self.plan is not None:
            return False, (f"session {self.plan.name} was verified complete, but gate "
                           f"'{failed[0].command}' fails now (exit {failed[0].exit_code}): "
                           "add a remaining note to give it work")
        if failed:
            return False, (f"every task is marked done, but gate '{failed[0].command}' fails "
                           f"(exit {failed[0].exit_code})")
        return True, ""

    async def _wait_resume(self, emit: EventSink) -> None:
        emit("run.paused", {})
        assert self._resumed is not None
        await self._resumed.wait()
        if not self._stop_requested:
            emit("run.resumed", {})

    # -- session: lock, recovery, checks, run.started / run.stopped ---------------------------

    @contextlib.asynccontextmanager
    async def _session(self, run_id: str, agent: str | None, limit: int, mode: str,
                       policy: TreePolicy, *, reserved: bool = False, remote: bool = False
                       ) -> AsyncIterator[tuple[LoopContext, ResolvedAgent]]:
        """The lock, recovery, checks and the run's record around its work. `remote`: one
        iteration of a run whose loop is elsewhere (ralph.scale): its start, end and control
        are the caller's, and so is the branch."""
        if not reserved:
            self._check_idle()
        server: AgentServer | None = None
        helpers: list[asyncio.Task[None]] = []  # while the run lives
        if not self._lock.try_acquire():
            raise self._busy_elsewhere()
        if not reserved:
            self._reserve(run_id, background=False)
        try:
            state = load_state(self.paths.state)
            self._state = state
            ctx = LoopContext(self.paths, self.config, self.store, self.git, state,
                              source=self._status_source, plan=self.plan)
            await self._recover(ctx)
            if self._config_put_back:  # the one loaded was the agent's: read the one put back
                self.config = ctx.config = load_config(self.paths.root)
                self._status_source = ctx.source = StatusSource(self.paths, self.config.files)
            resolved = await self._preflight(ctx, agent, policy, run_id=run_id, remote=remote)
            # A stop (Ctrl-C) while the server starts ends its start, not after it; a run
            # stopped before it got here starts none. Either way the run goes on to record
            # itself as started and stopped (its loop sees the stop first thing).
            try:
                server = self._server = await self._until_stopped(
                    self._start_server(ctx, resolved))
            except asyncio.CancelledError:
                if not self._stopped_on_request():
                    raise
            state.active_run = ActiveRun(run_id=run_id, pid=os.getpid(), agent=resolved.name,
                                         max_iterations=limit, started_at=now_ts(), mode=mode,
                                         server_pgid=server.pgid if server else None,
                                         owner=owner_id(), paused=self._paused)
            _count_spend_from_now(state, run_id)
            ctx.save()
            emit = EventSink(self.store, run_id, self.observer)
            loop = asyncio.get_running_loop()
            helpers.append(loop.create_task(self._heartbeat()))
            if not remote:
                helpers.append(loop.create_task(ControlFollower(
                    self.store, emit, self._apply_control, self.paths.lock).follow()))
                self._pausable = mode == "run"
                emit("run.started", {"agent": resolved.name, "maxIterations": limit,
                                     "startIteration": state.iteration_count + 1,
                                     "mode": mode})
                self._warn_at_start(emit)
            try:
                yield ctx, resolved
            except BaseException as exc:
                if state.active_run is not None and not remote:  # not ended by _finish_run
                    self._end_by(exc, ctx, emit)
                raise
        finally:
            for helper in helpers:
                helper.cancel()
            if self._server is not None:
                await self._server.stop()
            self._server = None
            self._active_run_id = None
            self._state = None
            self._paused = False
            self._lock.release()

    def _end_by(self, exc: BaseException, ctx: LoopContext, emit: EventSink) -> None:
        """Record the end of a run that an exception ended (a stop, nothing to do, an
        error)."""
        message = "stopped on request" if isinstance(exc, asyncio.CancelledError) else str(exc)
        reason: StopReason
        if isinstance(exc, NothingToDo):  # not an error: there was nothing to do
            reason = "complete" if exc.complete else "no_progress"
        elif isinstance(exc, asyncio.CancelledError | KeyboardInterrupt):
            reason = "stopped"
        else:
            reason = "error"
            emit("loop.error", {"message": message})
        self._finish_run(ctx, emit, reason, message, None)

    def _warn_at_start(self, emit: EventSink) -> None:
        """What the user should know before the first iteration: no gates (a ticked box is
        then the only evidence), PRD lines that look like tasks but are not read as such."""
        if self.plan is not None:  # a named session has no PRD
            if not self.config.gates.commands:
                emit("loop.warning", {"message": NO_GATES_SESSION_WARNING})
            return
        if not self.config.gates.commands:
            emit("loop.warning", {"message": NO_GATES_WARNING})
        for message in prd_warnings(self.paths, self.config):
            emit("loop.warning", {"message": message})

    async def _start_server(self, ctx: LoopContext, agent: ResolvedAgent) -> AgentServer | None:
        """opencode's server mode: one `opencode serve` for the whole run, which every
        iteration attaches to (`--attach URL --title "<project> - Iteration #N"`)."""
        adapter = adapter_for(agent.adapter)
        if not agent.server or not isinstance(adapter, OpencodeAdapter):
            return None
        argv = list(agent.argv)
        server = AgentServer(agent.name, adapter.server_argv(argv, agent.server_command),
                             cwd=self.paths.root, env=agent.env, port=agent.port,
                             log_path=self.paths.ralph_dir / "logs" / "server.log",
                             wait_s=agent.server_wait_seconds,
                             fallback=(adapter.server_argv(argv) if agent.server_command == "web"
                                       else None))
        ctx.server = (agent.name, await server.start())
        return server

    async def _keep_server(self, ctx: LoopContext, emit: EventSink) -> None:
        """Before an iteration: a run's agent server that ended (an agent told to `pkill` the
        loop's children, say) is recorded and started again, so that the run goes on."""
        server = self._server
        if server is None or server.alive:
            return
        code = server.exit_code
        emit("agent.server_restarted", {"agent": server.name, "exit_code": code,
                                        "reason": f"its server ended (exit {code})"})
        log.warning("agent %s: its server ended (exit %s); starting it again", server.name, code)
        await server.stop()  # what it left in its group or below it
        url = await server.start()
        ctx.server = (server.name, url)
        if ctx.state.active_run is not None:
            ctx.state.active_run.server_pgid = server.pgid
            ctx.save()

    def _finish_run(self, ctx: LoopContext, emit: EventSink, reason: StopReason, message: str,
                    iterations: int | None, outcome: RunOutcome | None = None) -> None:
        """Record the run's end: state.json, then `run.stopped` with the summary's figures."""
        mode = ctx.state.active_run.mode if ctx.state.active_run is not None else "run"
        if outcome is None:
            started = ctx.state.active_run.started_at if ctx.state.active_run else None
            outcome = self._outcome(ctx, emit.run_id, reason, message, iterations or 0, None,
                                    started_at=started)
        ctx.state.active_run = None
        ctx.save()
        figures = outcome.model_dump(mode="json", exclude={"run_id", "reason", "message",
                                                           "iterations"})
        emit("run.stopped", {"reason": reason, "message": message, "iterations": iterations,
                             **figures, "mode": mode})

    def _outcome(self, ctx: LoopContext, run_id: str, reason: StopReason, message: str,
                 count: int, clock: float | None, *, started_at: str | None = None
                 ) -> RunOutcome:
        """The run's summary: tasks done, blocked and open, its duration, and what its
        agents used (from state.json's record of this run)."""
        tasks = self._tasks(ctx)
        spend = ctx.state.spend_last_run
        if spend is None or spend.run_id != run_id:
            spend = RunSpend(run_id=run_id)
        duration = time.monotonic() - clock if clock is not None else seconds_since(started_at)
        return RunOutcome(
            run_id=run_id, reason=reason, message=message, iterations=count,
            done=tasks.done, total=len(tasks), blocked=tasks.count_of("blocked"),
            open=len(tasks) - tasks.done - tasks.count_of("blocked"),
            duration_seconds=round(duration, 3), tokens_in=spend.total.tokens_in,
            tokens_out=spend.total.tokens_out, cost_usd=spend.total.cost_usd,
            agents=spend.agents)

    def _over_budget(self, ctx: LoopContext, run_id: str) -> str | None:
        """Why the run must stop for its budget (loop.max_cost_usd, loop.max_tokens)."""
        spend = ctx.state.spend_last_run
        if spend is None or spend.run_id != run_id:
            return None
        return budget_reached(spend.total, max_cost_usd=self.config.loop.max_cost_usd,
                              max_tokens=self.config.loop.max_tokens)

    def _tasks(self, ctx: LoopContext) -> Snapshot:
        try:
            return ctx.tracker().snapshot()
        except Exception:  # the tracker's own error was already reported where it occurred
            return Snapshot(())

    def _progress(self, ctx: LoopContext) -> tuple[int, int]:
        tasks = self._tasks(ctx)
        return tasks.done, len(tasks)

    async def _preflight(self, ctx: LoopContext, agent: str | None, policy: TreePolicy, *,
                         run_id: str | None, remote: bool = False) -> ResolvedAgent:
        """Everything that can be wrong before an agent starts, each as one clear error;
        then (`run_id` given: a real start) the branch, and the tree made ready: Ralph's
        project files committed, other changes refused or committed on their own."""
        if not await self.git.is_repo():
            raise LoopError(f"{self.paths.root} is not a git repository: run `git init` "
                            "(Ralph commits each iteration's work)")
        resolved = self.config.agent(agent or self.config.loop.default_agent)
        check_program(resolved)
        # The judge's and reviewer's agents too: found missing only after the agent had
        # worked, they would cost an attempt.
        for section in (self.config.judge, self.config.review):
            if section.enabled and section.agent:
                check_program(self.config.agent(section.agent))
        tasks = ctx.tracker().load()
        if not tasks:
            raise LoopError(f"{self.config.files.prd} has no tasks")
        if run_id is None:
            if ctx.state.in_flight is not None:  # the start's recovery will commit its work
                return resolved
            await prepare_tree(self.git, self.config, ctx.state, "", commit=False,
                               allow_dirty=policy.allow_dirty,
                               require_clean=policy.require_clean)
            return resolved
        if self.config.git.branch and not remote:  # a remote run's branch is its own
            current = await self.git.current_branch()
            if current != self.config.git.branch:
                branch = self.config.git.branch
                await self.git.switch_branch(branch,
                                             create=not await self.git.has_branch(branch))
        for sha in await prepare_tree(self.git, self.config, ctx.state, run_id,
                                      allow_dirty=policy.allow_dirty,
                                      require_clean=policy.require_clean):
            log.info("committed changes present before run %s as %s", run_id, sha[:10])
        return resolved

    async def _recover(self, ctx: LoopContext) -> None:
        """Record what a process that died (SIGKILL, power loss) left unfinished: end what
        it left running, reopen what its iteration ticked, put protected paths back, and
        commit what its agent did as that attempt's work."""
        self._config_put_back = False
        state = ctx.state
        flight = state.in_flight
        dead = state.active_run
        if dead is not None and dead.owner and dead.owner != owner_id():
            # Its guard ends all of it when it dies; this is for a guard that died with it.
            await asyncio.to_thread(kill_owned, dead.owner)
        if flight is not None:
            until = self._last_sign_of_life(flight)  # before this start writes anything
            if flight.agent_pgid and group_alive(flight.agent_pgid):
                kill_group(flight.agent_pgid)
            emit = EventSink(self.store, flight.run_id, self.observer)
            reason = owner_died(flight.pid)
            self._reopen_after_death(ctx, flight, emit)
            commit = await self._keep_after_death(ctx, flight, emit, reason, until)
            finished = now_ts()
            result = StepResult(
                iteration=flight.iteration, agent=dead.agent if dead else "unknown",
                task_id=flight.task_id, exit_signal=None, return_code=None,
                log_path=self.paths.relative(self.paths.log(flight.iteration)),
                progress_made=False, no_progress_streak=state.no_progress_streak,
                gates_ok=False, repo_clean=False, judge_ok=None, review_ok=None, blocked=False,
                attempt_id=flight.attempt_id, receipts_dir=None,
                context_dir=self.paths.relative(self.paths.context_dir(flight.task_id,
                                                                       flight.attempt_id)),
                task_title=flight.task_title, iteration_id=flight.iteration_id,
                run_id=flight.run_id, status="interrupted", verified=False,
                reason=reason, agent_status=None, commit=commit, started_at=flight.started_at,
                finished_at=finished, duration_seconds=0.0)
            emit("iteration.finished", result.model_dump(mode="json"))
            if self.plan is not None:
                try:
                    self.plan.interrupted(result)
                except (RalphError, OSError) as exc:
                    log.warning("could not record the end of the session's iteration: %s", exc)
            state.last = last_iteration(result)
            state.in_flight = None
            kept = f"; its work is committed as {commit[:10]}" if commit else ""
            log.warning("recovered iteration %d (task %s), interrupted when the process "
                        "running it (pid %d) died%s", flight.iteration, flight.task_id,
                        flight.pid, kept)
        if dead is not None:
            if dead.server_pgid and group_alive(dead.server_pgid):
                kill_group(dead.server_pgid)
            done, total = self._progress(ctx)
            EventSink(self.store, dead.run_id, self.observer)(
                "run.stopped", {"reason": "error", "message": f"the process running it "
                                f"(pid {dead.pid}) died", "iterations": None,
                                "done": done, "total": total, "mode": dead.mode})
            state.active_run = None
        if flight is not None or dead is not None:
            save_state(self.paths.state, state)

    async def _keep_after_death(self, ctx: LoopContext, flight: InFlight, emit: EventSink,
                                reason: str, until: int) -> str | None:
        """Put back protected paths the dead iteration's agent changed, and commit the rest
        of what it left as that attempt's work (gate outputs and runtime files aside); the
        commit, if any. Only what was written by `until` (the dead process's last sign of
        life) counts as the agent's: a file the user edited since is left as it is, for the
        start's own check. The protected paths are those of ralph.toml as it was when the
        iteration began (the one in the tree may be the agent's)."""
        if not await self.git.is_repo():
            return None
        try:
            head = flight.head or await self.git.head()
            then = await self._config_at(head)
            protected = await protected_for(then, self.git, self.paths.root, head)
            guard = Guard.resume(self.git, self.paths.root, protected, head,
                                 self.paths.context_dir(flight.task_id, flight.attempt_id)
                                 / "protected", outputs=ctx.state.gate_outputs)
            tree = await self.git.snapshot(exclude=RUNTIME)
            if not flight.staged:  # after staging, the gates ran on inputs put back already
                base = WorkTree(head, tree.branch, (), "")  # everything differs from the start
                changes = [c for c in await guard.changes(base, tree)
                           if not changed_after(self.paths.root / c.path.rstrip("/"), until)]
                if changes:
                    counted = await put_back(guard, changes, emit, task_id=flight.task_id,
                                             attempt_id=flight.attempt_id)
                    self._config_put_back |= any(c.path == CONFIG_FILE for c in counted)
                    if counted:
                        note_progress(self.paths.root / self.config.files.progress,
                                      put_back_note(counted, flight.attempt_id,
                                                    flight.task_id, " (its process died)"))
                    tree = await self.git.snapshot(exclude=RUNTIME)
            if not self.config.git.auto_commit:
                return None
            if flight.staged:  # the agent's work is in the index; what came since is the gates'
                post = await self.git.snapshot(exclude=RUNTIME, untracked="normal")
                remember_gate_outputs(ctx.state, *self._left_by_gates(post, until))
                paths: list[str] = []
            else:
                paths = [p for code, p in tree.changes
                         if not by_gates(code, p, tree.stamps.get(p, ""), ctx.state)
                         and not changed_after(self.paths.root / p, until)]
            await self.git.stage([*paths, *ralph_files(self.config, self.paths.root)],
                                 exclude=RUNTIME)
            attempt = flight.attempt_id.rsplit("-", 1)[-1]
            return await self.git.commit_staged(attempt_message(
                self.config, (flight.task_id, flight.task_title), flight.iteration, attempt,
                "interrupted", reason))
        except (RalphError, OSError) as exc:
            log.warning("could not commit what interrupted iteration %d left: %s",
                        flight.iteration, exc)
            return None

    def _left_by_gates(self, tree: WorkTree, until: int) -> tuple[list[str], dict[str, str]]:
        """After the agent's work was staged, what else the dead iteration left in the tree
        (by `until`) is what its gates made: untracked entries and unstaged changes."""
        made: list[str] = []
        changed: dict[str, str] = {}
        for code, path in tree.changes:
            if changed_after(self.paths.root / path.rstrip("/"), until):
                continue
            if code == "??":
                made.append(path)
            elif code[1:] != " " and path in tree.stamps:
                changed[path] = tree.stamps[path].split(":", 1)[1]
        return made, changed

    async def _config_at(self, head: str | None) -> Config:
        """ralph.toml as commit `head` has it (the configuration in force when a dead
        iteration began); the loaded one if it cannot be read there."""
        if head is None:
            return self.config
        text = await self.git.show_file(head, CONFIG_FILE)
        if text is None:
            return self.config
        try:
            return parse_config(text.decode("utf-8"), f"{CONFIG_FILE} at {head[:10]}")
        except (ConfigError, UnicodeDecodeError):
            return self.config

    def _last_sign_of_life(self, flight: InFlight) -> int:
        """When the dead process was last seen working, as a file time in ns: the newest of
        its state.json (touched every second while a run lives, see `_heartbeat`), its log
        and its run's event stream, plus slack for the heartbeat's period and the guard's
        ending of what was left."""
        newest = 0
        for path in (self.paths.state, self.paths.log(flight.iteration),
                     stream_path(self.paths.store / "streams", run_stream(flight.run_id))):
            with contextlib.suppress(OSError):
                newest = max(newest, path.stat().st_mtime_ns)
        return newest + LIFE_SLACK_NS if newest else time.time_ns()

    async def _heartbeat(self) -> None:
        """Touch state.json every HEARTBEAT_S while a run lives: a later start can then tell
        what was written while this process lived (see `_last_sign_of_life`)."""
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            with contextlib.suppress(OSError):
                os.utime(self.paths.state)

    def _reopen_after_death(self, ctx: LoopContext, flight: InFlight, emit: EventSink) -> None:
        """What the dead iteration's agent marked done was never verified: reopen it."""
        reason = "the process running its iteration died before it was verified"
        try:
            tracker = ctx.tracker()
            now = tracker.snapshot()
            if flight.tracker_copy is not None:
                copy = self.paths.root / flight.tracker_copy
                before = open_tracker(copy).snapshot()
                ticked = now.done_since(before)
            elif flight.done_before is not None:  # recorded by an older Ralph
                known = set(flight.done_before)
                ticked = [t for t in now if t.status == "done" and t.id not in known]
            else:  # nothing to compare with
                return
            reopen_tasks(tracker, ticked, reason=reason, emit=emit,
                         progress=self.paths.root / self.config.files.progress)
        except (RalphError, OSError) as exc:
            log.warning("could not reopen what the interrupted iteration marked done: %s", exc)

    # -- helpers -------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed_because is not None:
            raise LoopClosed(f"{self._closed_because}: no new step or run starts")

    def _check_idle(self) -> None:
        self._check_open()
        if self._active_run_id is not None:
            raise LoopBusy(f"run {self._active_run_id} is active: stop it first",
                           self._active_run_id)

    def _busy_elsewhere(self) -> LoopBusy:
        state = load_state(self.paths.state, repair=False)
        other = state.active_run.run_id if state.active_run else None
        holder = other or "another process holds .ralph/loop.lock"
        return LoopBusy(f"a run is already active for this project ({holder})", other)

    def _reserve(self, run_id: str, *, background: bool) -> None:
        """Make `run_id` the active run, with no stop or pause asked for yet."""
        self._check_idle()
        self._active_run_id = run_id
        self._pausable = background  # a foreground run becomes pausable once it starts
        self._stop_requested = False
        self._paused = False
        self._resumed = asyncio.Event()
        self._resumed.set()

    def _set_paused(self, paused: bool) -> None:
        state = self._state
        if state is not None and state.active_run is not None:
            state.active_run.paused = paused
            save_state(self.paths.state, state)


def _count_spend_from_now(state: LoopState, run_id: str) -> None:
    """The run's spend is counted from now, unless the state already counts this run's (a
    remote run's state travels with it from iteration to iteration)."""
    if state.spend_last_run is None or state.spend_last_run.run_id != run_id:
        state.spend_last_run = RunSpend(run_id=run_id)


@dataclass(frozen=True)
class TreePolicy:
    """What a start does with changes in the tree (see ralph.loop.worktree)."""

    require_clean: bool = False  # refuse any change, Ralph's project files too
    allow_dirty: bool = False  # commit changes Ralph did not make, on their own


def check_program(agent: ResolvedAgent) -> None:
    """The agent's program can be found (AgentError naming the package to install if not)."""
    adapter = adapter_for(agent.adapter)
    command: AgentCommand = adapter.build(list(agent.argv), agent.model, "", "")
    resolve_program(command.argv, agent, adapter.install_hint)

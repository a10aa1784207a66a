"""The status report: progress and run state from the tracker and state.json only, so its
cost does not grow with the number of past iterations (history lives in the store)."""

from __future__ import annotations

from pathlib import Path

from ralph import __version__
from ralph.configcache import ProjectFiles
from ralph.fsutil import file_signature
from ralph.loop.lock import ProjectLock
from ralph.loop.models import BlockedTask, Cost, LastIteration, NextTask, StatusReport
from ralph.loop.paths import ProjectPaths
from ralph.loop.state import LoopState, load_state, owner_died
from ralph.tracker import Snapshot, Task, Tracker, TrackerError, open_tracker


def stale_blocks(tasks: Snapshot, state: LoopState) -> list[str]:
    """Tasks state.json holds blocked that the tracker no longer marks blocked.

    The tracker says what is blocked (the next task is `next_task(tasks)`): a block this
    loop sets is marked there too, and marked again if an agent takes it off, so a task the
    user reopens in the tracker is no longer blocked, whatever state.json remembers."""
    stale = []
    for tid, entry in state.tasks.items():
        task = tasks.get(tid) if entry.blocked else None
        if task is not None and task.status != "blocked":
            stale.append(tid)
    return stale


def state_block(state: LoopState, task: Task) -> str | None:
    entry = state.tasks.get(task.id)
    return entry.blocked if entry else None


def prd_problem(prd: Path, exc: TrackerError) -> str:
    """Why the PRD cannot be read, on one line, with the fix (the tracker's messages name one,
    but for a missing file)."""
    if not prd.exists():
        return f"{exc}: run `ralph init` to create it, or set files.prd in ralph.toml"
    return str(exc)


class StatusSource:
    """The tracker's tasks and state.json, parsed again only when their files change: editors
    poll `status`, and most polls find nothing new."""

    def __init__(self, paths: ProjectPaths, files: ProjectFiles) -> None:
        self.prd = paths.root / files.prd
        self.state_path = paths.state
        self._tracker: Tracker | None = None  # keeps its last parse (ralph.tracker.filecache)
        self._state: tuple[tuple[int, int, int] | None, LoopState] | None = None

    def tracker(self) -> Tracker:
        """The project's tracker: one for the source's life, so its last parse is shared by
        the loop and every status (opened again if the file went and came back)."""
        if self._tracker is None or not self._tracker.path.is_file():
            self._tracker = open_tracker(self.prd)
        return self._tracker

    def tasks(self) -> Snapshot:
        """The tasks; raises TrackerError (as often as asked) while the PRD cannot be read."""
        return self.tracker().snapshot()

    def state(self) -> LoopState:
        key = file_signature(self.state_path)
        if self._state is None or self._state[0] != key:
            self._state = (key, load_state(self.state_path, repair=False))
        return self._state[1]


def project_status(paths: ProjectPaths, files: ProjectFiles, *,
                   state: LoopState | None = None, active_run_id: str | None = None,
                   paused: bool = False, source: StatusSource | None = None) -> StatusReport:
    """`files`: ralph.toml's `[files]` (a Config's `files`, or ralph.configcache's).
    `active_run_id`/`paused`: what this process knows of its own run, if it has one;
    otherwise a run recorded in state.json counts if its process still holds the lock.
    `source` caches the parsed files between calls."""
    source = source or StatusSource(paths, files)
    state = state if state is not None else source.state()
    prd_error: str | None = None
    try:
        tasks = source.tasks()
    except TrackerError as exc:  # an editor opens any folder: report it, count no task
        tasks, prd_error = Snapshot(()), prd_problem(source.prd, exc)
    running = active_run_id is not None or (
        state.active_run is not None and ProjectLock(paths.lock).is_held_elsewhere())
    active = state.active_run if state.active_run is not None and running else None
    last = state.last
    flight = state.in_flight
    if flight is not None and not running:
        # An iteration in flight with no process running it: its owner died (SIGKILL, power
        # loss). The next step or run records it; until then it is reported as it is.
        last = LastIteration(
            iteration_id=flight.iteration_id, iteration=flight.iteration,
            run_id=flight.run_id, task_id=flight.task_id, task_title=flight.task_title,
            status="interrupted", exit_code=None, started_at=flight.started_at,
            finished_at=None, verified=False,
            reason=f"{owner_died(flight.pid)}; the next step or run records it")
    nxt = tasks.next_task()
    blocked = [BlockedTask(task_id=t.id, title=t.title,
                           reason=t.blocked_reason or state_block(state, t))
               for t in tasks.blocked()]
    return StatusReport(
        version=__version__, cwd=str(paths.root), prd=files.prd, progress=files.progress,
        agents=files.agents, prompt=files.prompt,
        done=tasks.done, total=len(tasks),
        next=NextTask(task_id=nxt.id, title=nxt.title, kind=nxt.kind) if nxt else None,
        running=running, paused=paused or bool(active and active.paused),
        activeRunId=active_run_id or (active.run_id if active else None),
        last=last, blocked=blocked, iterations=state.iteration_count,
        no_progress_streak=state.no_progress_streak, prd_error=prd_error,
        cost=Cost(last_run=state.spend_last_run, all_runs=state.spend_all))

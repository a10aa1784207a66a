"""The status report: progress and run state from the tracker and state.json only, so its
cost does not grow with the number of past iterations (history lives in the store)."""

from __future__ import annotations

from ralph import __version__
from ralph.config import Config
from ralph.loop.lock import ProjectLock
from ralph.loop.models import BlockedTask, NextTask, StatusReport
from ralph.loop.paths import ProjectPaths
from ralph.loop.state import LoopState, load_state
from ralph.tracker import Task, next_task, open_tracker


def ready_task(tasks: list[Task], state: LoopState) -> Task | None:
    """The next task, leaving out tasks this loop has blocked (also marked in the tracker)."""
    blocked = {tid for tid, ts in state.tasks.items() if ts.blocked}
    return next_task([t for t in tasks if t.id not in blocked])


def state_block(state: LoopState, task: Task) -> str | None:
    entry = state.tasks.get(task.id)
    return entry.blocked if entry else None


def project_status(paths: ProjectPaths, config: Config, *, state: LoopState | None = None,
                   active_run_id: str | None = None, paused: bool = False) -> StatusReport:
    """`active_run_id`/`paused`: what this process knows of its own run, if it has one;
    otherwise a run recorded in state.json counts if its process still holds the lock."""
    state = state if state is not None else load_state(paths.state)
    tasks = open_tracker(paths.root / config.files.prd).load()
    files = config.files
    running = active_run_id is not None or (
        state.active_run is not None and ProjectLock(paths.lock).is_held_elsewhere())
    active = state.active_run if state.active_run is not None and running else None
    nxt = ready_task(tasks, state)
    blocked = [BlockedTask(task_id=t.id, title=t.title,
                           reason=t.blocked_reason or state_block(state, t))
               for t in tasks if t.status == "blocked" or state_block(state, t)]
    return StatusReport(
        version=__version__, cwd=str(paths.root), prd=files.prd, progress=files.progress,
        agents=files.agents, prompt=files.prompt,
        done=sum(t.status == "done" for t in tasks), total=len(tasks),
        next=NextTask(task_id=nxt.id, title=nxt.title, kind=nxt.kind) if nxt else None,
        running=running, paused=paused or bool(active and active.paused),
        activeRunId=active_run_id or (active.run_id if active else None),
        last=state.last, blocked=blocked, iterations=state.iteration_count,
        no_progress_streak=state.no_progress_streak)

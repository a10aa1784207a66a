"""The workflow service: start, resume, answer, stop, and read workflow sessions.

A session runs in the process that starts (or resumes, or answers) it, holding the project's
loop lock (`.ralph/loop.lock`: a workflow changes the tree as a loop run does, so the two
never run at once) and the session's owner lock (`.ralph/workflows/<id>/owner.lock`: how
other processes know it runs). Its roles run as agent sessions (ralph.sessions), each agent
in its own process tree with its timeout. A stop, from this process (Ctrl-C) or any other
(`ralph workflow stop`, a `workflow.stop_requested` event), cancels the current step: the
role's agent is ended, `workflow.stopped` recorded, and `resume` runs that step again.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ralph.config import Config
from ralph.flock import FileLock
from ralph.git import Git
from ralph.loop.events import EventSink, Observer
from ralph.loop.lock import ProjectLock
from ralph.loop.paths import ProjectPaths
from ralph.loop.service import check_program
from ralph.loop.state import load_state
from ralph.loop.worktree import prepare_tree
from ralph.sessions import SessionService
from ralph.store import Store
from ralph.workflow.contracts import ROLES
from ralph.workflow.errors import NoSuchWorkflow, WorkflowError
from ralph.workflow.integrity import SessionFiles, validate_session
from ralph.workflow.orchestrator import Limits, Orchestrator, record_state
from ralph.workflow.position import Position, State
from ralph.workflow.progress import Marker
from ralph.workflow.record import WorkflowRecord, read_record, workflow_stream
from ralph.workflow.role_call import RoleCaller
from ralph.workflow.session_dir import SessionDir, list_sessions, validate_session_id
from ralph.workflow.tasks_file import TaskKind

STOP_WAIT_S = 30.0  # how long `stop` waits for the running process to record its stop
STOP_POLL_S = 0.1

Status = Literal["running", "blocked", "complete", "failed", "stopped", "interrupted", "new"]


@dataclass
class TaskStatus:
    task_id: str
    description: str
    marker: str | None
    attempts: int
    failure: str | None

    def to_json(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "description": self.description,
                "marker": self.marker, "attempts": self.attempts, "failure": self.failure}


@dataclass
class WorkflowStatus:
    """What `ralph workflow status` shows of one session."""

    session_id: str
    session_path: str
    status: Status
    state: str | None
    reason: str
    request: str
    agents: dict[str, str]
    started_at: str | None
    qa_cycles: int
    max_qa_cycles: int
    max_task_attempts: int
    tasks: list[TaskStatus] = field(default_factory=list)
    blockers: list[str] = field(default_factory=list)
    last_call: dict[str, Any] | None = None
    violations: list[dict[str, Any]] = field(default_factory=list)
    problem: str | None = None  # the session's files cannot be read: why

    def to_json(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "session_path": self.session_path,
                "status": self.status, "state": self.state, "reason": self.reason,
                "request": self.request, "agents": self.agents, "started_at": self.started_at,
                "qa_cycles": self.qa_cycles, "max_qa_cycles": self.max_qa_cycles,
                "max_task_attempts": self.max_task_attempts,
                "tasks": [task.to_json() for task in self.tasks], "blockers": self.blockers,
                "last_call": self.last_call, "violations": self.violations,
                "problem": self.problem}


@dataclass(frozen=True)
class WorkflowOutcome:
    """How a start, resume or answer ended: the session's state, and whether a stop ended
    it (`stopped_by`)."""

    session_id: str
    state: State
    reason: str
    blockers: Sequence[str] = ()
    stopped_by: str | None = None


class WorkflowService:
    """Workflow sessions of the project at `root`."""

    def __init__(self, root: Path, config: Config | None, store: Store, *,
                 observer: Observer | None = None) -> None:
        """`config` is needed to run a session; reading and stopping work without it."""
        self.root = root
        self.config = config
        self.store = store
        self.observer = observer
        self._stop_by: str | None = None
        self._running: asyncio.Task[Position] | None = None

    # -- running -----------------------------------------------------------------------------

    async def start(self, request: str, agent: str | None = None, *,
                    allow_dirty: bool = False) -> WorkflowOutcome:
        """Create a session for `request` and run it until it is COMPLETE, BLOCKED, FAILED
        or stopped. `agent` plays every role ralph.toml gives no agent of its own."""
        config = self._config()
        if not request.strip():
            raise WorkflowError("the request is empty: say what the workflow should do")
        if agent is not None:
            config.agent(agent)  # an unknown --agent is an error even if no role takes it
        agents = {role: (getattr(config.workflow.roles, role).agent or agent
                         or config.loop.default_agent) for role in ROLES}
        _check_agents(config, agents.values())
        since = self.store.last_seq  # stop requests after this one are for this run
        with self._locks(None) as held:
            git = Git(self.root)
            if await git.is_repo():
                paths = ProjectPaths(self.root)
                await prepare_tree(git, config, load_state(paths.state, repair=False),
                                   "workflow", allow_dirty=allow_dirty, require_clean=False)
            session = SessionDir.create(self.root)
            held.append(self._owner_lock(session.session_id))
            emit = self._sink(session.session_id)
            emit("workflow.started", {
                "request": request, "agents": agents,
                "max_qa_cycles": config.workflow.max_qa_cycles,
                "max_task_attempts": config.workflow.max_task_attempts,
                "owner_pid": os.getpid(), "session_path": session.session_path})
            record_state(emit, Position(State.INITIALIZING, request), None, "a new session")
            return await self._drive(session, emit, since)

    async def resume(self, session_id: str | None = None) -> WorkflowOutcome:
        """Go on with a stopped or interrupted session (the newest one that is neither
        complete nor blocked if `session_id` is None); a FAILED one runs its failed step
        again. WorkflowError when there is nothing to resume."""
        session = self._resumable() if session_id is None else self._open(session_id)
        since = self.store.last_seq  # stop requests after this one are for this run
        with self._locks(session.session_id):
            record = self._checked(session)
            position = record.position
            assert position is not None
            emit = self._sink(session.session_id)
            if position.state is State.COMPLETE:
                raise WorkflowError(f"workflow session {session.session_id} is complete: "
                                    "nothing to resume")
            if position.state is State.BLOCKED:
                raise WorkflowError(f"workflow session {session.session_id} is blocked: "
                                    f"answer it with `ralph workflow answer "
                                    f"{session.session_id} \"...\"`")
            if position.state is State.FAILED and position.resume_to is None:
                raise WorkflowError(f"workflow session {session.session_id} failed: "
                                    f"{position.reason}")
            _check_agents(self._config(), record.agents.values())
            emit("workflow.resumed", {"owner_pid": os.getpid(), "state": position.state.value})
            if position.state is State.FAILED and position.resume_to is not None:
                again = Position.from_json(position.resume_to)
                failed = record.last_call
                if failed is not None and failed.result is not None and \
                        failed.result.get("outcome") != "ok":
                    again.retry_of = failed.call_id
                record_state(emit, again, "FAILED", "resumed: the failed step runs again")
            return await self._drive(session, emit, since)

    async def answer(self, session_id: str, text: str) -> WorkflowOutcome:
        """Answer a BLOCKED session's blockers and go on: the planner gets the answer as
        CONTEXT in UPDATE mode (INITIALIZE again if the session has no plan yet)."""
        if not text.strip():
            raise WorkflowError("the answer is empty: say what the planner asked for")
        session = self._open(session_id)
        since = self.store.last_seq  # stop requests after this one are for this run
        with self._locks(session.session_id):
            record = self._checked(session)
            position = record.position
            assert position is not None
            if position.state is not State.BLOCKED:
                raise WorkflowError(f"workflow session {session_id} is not blocked (it is "
                                    f"{position.state.value}): it waits for no answer")
            _check_agents(self._config(), record.agents.values())
            emit = self._sink(session.session_id)
            emit("workflow.answered", {"text": text, "by": "user"})
            emit("workflow.resumed", {"owner_pid": os.getpid(), "state": position.state.value})
            # The blocked call's own context (discovered tasks, a completion check's reports)
            # goes on, with the answer.
            context = {**(position.planner_context or {}), "user_answer": text,
                       "blockers": position.blockers}
            planned = all(path.exists() for path in (session.plan, session.tasks,
                                                     session.progress, session.instructions))
            mode = position.planner_mode if position.planner_mode != "INITIALIZE" else "UPDATE"
            state = State.PLANNING if planned else State.INITIALIZING
            new = position.moved(state, reason="the user answered",
                                 planner_mode=mode if planned else "INITIALIZE",
                                 planner_context=context,
                                 completion_check=position.completion_check and planned)
            record_state(emit, new, position.state.value, "the user answered")
            return await self._drive(session, emit, since)

    def request_stop(self, by: str = "ctrl-c") -> bool:
        """Stop the session this process runs (a signal handler's call); False if none."""
        if self._running is None or self._running.done():
            return False
        self._stop_by = self._stop_by or by
        self._running.cancel()
        return True

    async def stop(self, session_id: str | None = None, *, by: str = "user") -> WorkflowStatus:
        """Ask the running session (`session_id`, or the one running now) to stop, from any
        process; its status once the stop is recorded (or after STOP_WAIT_S)."""
        if session_id is None:
            running = [s for s in self.list() if s.status == "running"]
            if not running:
                raise NoSuchWorkflow("no workflow session is running")
            session_id = running[-1].session_id
        session = self._open(session_id)
        if not self._owner_lock_path(session.session_id).exists() or \
                FileLock(self._owner_lock_path(session.session_id)).held_elsewhere() is not True:
            raise NoSuchWorkflow(f"workflow session {session_id} is not running")
        self.store.append("workflow.stop_requested", {"session_id": session_id, "by": by},
                          stream=workflow_stream(session_id))
        deadline = time.monotonic() + STOP_WAIT_S
        # Until the running process lets the session go: it records the stop, commits what
        # the step left, and only then releases the session's lock.
        while time.monotonic() < deadline and self._runs(session_id):
            await asyncio.sleep(STOP_POLL_S)
        return self.status(session_id)

    async def _drive(self, session: SessionDir, emit: EventSink,
                     since: int) -> WorkflowOutcome:
        """Run the orchestrator until a final state or a stop (asked for after `since`,
        the store's last seq before this process took the session: a stop asked for as it
        starts is not lost)."""
        config = self._config()
        record = read_record(self.store, session.session_id)
        sessions = SessionService(self.root, config, self.store)
        caller = RoleCaller(self.root, config, session, sessions, emit, record.agents)
        orchestrator = Orchestrator(self.root, config, self.store, session, caller, emit,
                                    Limits(record.max_qa_cycles, record.max_task_attempts))
        self._stop_by = None
        run = asyncio.get_running_loop().create_task(orchestrator.run())
        self._running = run
        follower = asyncio.get_running_loop().create_task(
            self._follow_stop(session.session_id, since, run))
        try:
            try:
                position = await run
            except asyncio.CancelledError:
                if not run.cancelled() or self._stop_by is None:
                    raise
                by = self._stop_by
                state = read_record(self.store, session.session_id).position
                if state is not None and state.state.final:  # it ended first
                    return WorkflowOutcome(session.session_id, state.state, state.reason,
                                           tuple(state.blockers))
                emit("workflow.stopped", {"by": by,
                                          "state": state.state.value if state else None})
                await orchestrator.commit_stopped(by)
                return WorkflowOutcome(session.session_id,
                                       state.state if state else State.INITIALIZING,
                                       f"stopped by {by}", stopped_by=by)
        finally:
            follower.cancel()
            with contextlib.suppress(BaseException):
                await follower
            await sessions.aclose()
            self._running = None
        return WorkflowOutcome(session.session_id, position.state, position.reason,
                               tuple(position.blockers))

    async def _follow_stop(self, session_id: str, after_seq: int,
                           run: asyncio.Task[Position]) -> None:
        async with self.store.subscribe(topic="workflow.stop_requested",
                                        stream=workflow_stream(session_id),
                                        after_seq=after_seq) as requests:
            async for frame in requests:
                self._stop_by = self._stop_by or str(frame.meta.get("by", "user"))
                run.cancel()
                return

    # -- reading -----------------------------------------------------------------------------

    def status(self, session_id: str | None = None) -> WorkflowStatus:
        """The session's status (the newest session's if `session_id` is None)."""
        if session_id is None:
            sessions = list_sessions(self.root)
            if not sessions:
                raise NoSuchWorkflow("no workflow session yet: start one with "
                                    "`ralph workflow start \"...\"`")
            return self._status(sessions[-1])
        return self._status(self._open(session_id))

    def list(self) -> list[WorkflowStatus]:
        """Every session, oldest first."""
        return [self._status(session) for session in list_sessions(self.root)]

    def _status(self, session: SessionDir) -> WorkflowStatus:
        record = read_record(self.store, session.session_id)
        position = record.position
        problem = None
        files = SessionFiles(None, None)
        try:
            files = validate_session(session)
        except WorkflowError as exc:
            problem = str(exc)
        markers = files.progress.markers if files.progress is not None else {}
        tasks = [TaskStatus(t.task_id, t.description,
                            markers[t.task_id].value if t.task_id in markers else None,
                            position.attempts.get(t.task_id, 0) if position else 0,
                            position.failures.get(t.task_id) if position else None)
                 for t in (files.tasks.tasks if files.tasks is not None else ())
                 if t.kind is TaskKind.IMPLEMENTATION or markers.get(t.task_id)
                 is not Marker.COMPLETED]
        last = record.last_call
        word = self._status_word(record)
        shown = last.summary() if last is not None else None
        if shown is not None and shown["outcome"] == "running" and word != "running":
            shown["outcome"] = "interrupted"
        return WorkflowStatus(
            session.session_id, session.session_path, word,
            position.state.value if position else None, position.reason if position else "",
            record.request, record.agents, record.started_at,
            position.qa_cycle if position else 0, record.max_qa_cycles,
            record.max_task_attempts, tasks, list(position.blockers) if position else [],
            shown, record.violations, problem)

    def _status_word(self, record: WorkflowRecord) -> Status:
        position = record.position
        if position is None:
            return "new"
        if self._runs(record.session_id):
            return "running"
        if position.state is State.BLOCKED:
            return "blocked"
        if position.state is State.COMPLETE:
            return "complete"
        if position.state is State.FAILED:
            return "failed"
        return "stopped" if record.stopped > record.taken_up else "interrupted"

    # -- internals ---------------------------------------------------------------------------

    def _config(self) -> Config:
        if self.config is None:
            raise WorkflowError("running a workflow needs the project's ralph.toml")
        return self.config

    def _sink(self, session_id: str) -> EventSink:
        return EventSink(self.store, session_id, self.observer,
                         stream=workflow_stream(session_id), id_key="session_id")

    def _open(self, session_id: str) -> SessionDir:
        validate_session_id(session_id)
        session = SessionDir(self.root.resolve(), session_id)
        if not session.path.is_dir() or read_record(self.store, session_id).position is None:
            raise NoSuchWorkflow(f"no workflow session '{session_id}': `ralph workflow list` "
                                "shows them")
        return session

    def _resumable(self) -> SessionDir:
        for session in reversed(list_sessions(self.root)):
            record = read_record(self.store, session.session_id)
            status = self._status_word(record)
            if status in ("stopped", "interrupted") or (
                    status == "failed" and record.position is not None
                    and record.position.resume_to is not None):
                return session
        raise NoSuchWorkflow("no workflow session to resume (`ralph workflow list` shows "
                            "them)")

    def _checked(self, session: SessionDir) -> WorkflowRecord:
        """The session's record, its files checked first (a session edited by hand into an
        invalid state is refused, and nothing is written): readable and consistent, and
        there if the recorded state needs them (every state after planning)."""
        validate_session(session)
        record = read_record(self.store, session.session_id)
        position = record.position
        if position is not None and position.state is State.FAILED and position.resume_to:
            position = Position.from_json(position.resume_to)
        if position is not None and position.state in (State.QA, State.EXECUTING,
                                                       State.REVIEWING):
            for path in (session.plan, session.tasks, session.progress):
                if not path.exists():
                    raise WorkflowError(f"{session.relative(path)} is missing: session "
                                        f"{session.session_id} is past planning and cannot "
                                        "go on without it (put it back, from git)")
        return record

    def _owner_lock_path(self, session_id: str) -> Path:
        return self.root / ".ralph" / "workflows" / session_id / "owner.lock"

    def _owner_lock(self, session_id: str) -> FileLock:
        lock = FileLock(self._owner_lock_path(session_id))
        if not lock.try_acquire():
            raise WorkflowError(f"workflow session {session_id} is already running "
                                f"(pid {lock.holder() or '?'})")
        return lock

    def _runs(self, session_id: str) -> bool:
        if self._running is not None and not self._running.done():
            return True
        return FileLock(self._owner_lock_path(session_id)).held_elsewhere() is True

    @contextlib.contextmanager
    def _locks(self, session_id: str | None) -> Any:
        """The project's loop lock and (for an existing session) its owner lock, held for
        the block; the list of held locks can take more."""
        project = ProjectLock(ProjectPaths(self.root).lock)
        if not project.try_acquire():
            raise WorkflowError("a loop run or another workflow session is active for this "
                                "project (.ralph/loop.lock is held): wait for it or stop it")
        held: builtins.list[FileLock] = [project]
        try:
            if session_id is not None:
                held.append(self._owner_lock(session_id))
            yield held
        finally:
            for lock in reversed(held):
                lock.release()


def _check_agents(config: Config, agents: Iterable[str]) -> None:
    """Each role's agent is defined and its program can start: ConfigError or AgentError
    (naming the package to install) before anything is written."""
    for name in dict.fromkeys(agents):
        check_program(config.agent(name))

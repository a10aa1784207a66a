"""Agent sessions: one agent CLI run on a prompt outside the loop, recorded in the store.

`SessionService.launch` starts the agent through its adapter (`ralph.agents.runner`, as the
loop runs its agents) in a task of the caller's event loop and returns the session's id at
once. Everything about a session is in its store stream (ralph.sessions.records), so any
process can list, read, wait for and stop it. The process that runs a session holds the
flock `.ralph/sessions/<id>/owner.lock` for as long as the session runs: a session without a
`session.finished` frame whose lock nobody holds lost its owner, and the next reader records
it `lost` (once: the reader takes the lock to do so) and ends what that owner left running.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ralph.agents import adapter_for
from ralph.agents.base import AgentError
from ralph.agents.runner import AgentOutcome, resolve_program, run_agent
from ralph.config import Config, ResolvedAgent
from ralph.containment import kill_owned, owner_id
from ralph.errors import RalphError
from ralph.flock import FileLock
from ralph.sessions.records import SessionInfo, SessionStatus, project, session_stream
from ralph.store import Frame, Store
from ralph.store.ids import IdGenerator

log = logging.getLogger("ralph.sessions")

WAIT_POLL_S = 0.05  # how often a session another process runs is looked at while waiting
OWNER_CHECK_S = 1.0  # how often a watch looks whether the session's owner still lives
STOP_GRACE_S = 5.0  # after SIGTERM, how long a stopped agent gets before SIGKILL
_ids = IdGenerator()

# How an agent run's status reads as a session's.
_STATUS: dict[str, SessionStatus] = {"ok": "completed", "timeout": "timed_out",
                                     "cancelled": "stopped"}


class SessionError(RalphError):
    """A session cannot be launched, found or stopped as asked (the message says why)."""


class UnknownSession(SessionError):
    """No session has this id."""


class AgentBusy(SessionError):
    """The agent already runs a session in this directory."""


def new_session_id() -> str:
    return "ses_" + _ids.next()[0]


@dataclass
class _Running:
    """A session this process runs."""

    task: asyncio.Task[None]
    lock: FileLock


class SessionService:
    """Agent sessions of the project at `root`, recorded in `store`."""

    def __init__(self, root: Path, config: Config, store: Store) -> None:
        self.root = root
        self.config = config
        self.store = store
        self._running: dict[str, _Running] = {}

    def session_dir(self, session_id: str) -> Path:
        return self.root / ".ralph" / "sessions" / session_id

    # -- launching ---------------------------------------------------------------------------

    async def launch(self, prompt: str, agent: str | None = None, *, title: str | None = None,
                     cwd: Path | None = None, env: Mapping[str, str] | None = None,
                     timeout_s: float | None = None, allow_concurrent: bool = False) -> str:
        """Start `agent` (default: loop.default_agent) on `prompt` in the background; the
        session's id. Raises SessionError (empty prompt, a directory that is not there, the
        agent already running here), ConfigError (unknown agent) or AgentError (its program
        cannot start) before anything is recorded."""
        if not prompt.strip():
            raise SessionError("the prompt is empty: say what the agent should do")
        resolved = self.config.agent(agent or self.config.loop.default_agent)
        where = (cwd or self.root).resolve()
        if not where.is_dir():
            raise SessionError(f"{where} is not a directory")
        if not allow_concurrent:
            for other in self.list(status="running", agent=resolved.name):
                if other.cwd == str(where):
                    raise AgentBusy(f"agent '{resolved.name}' is already running in {where} "
                                    f"(session {other.session_id}): wait for it or stop it")
        session_id = new_session_id()
        folder = self.session_dir(session_id)
        prompt_file = folder / "prompt.md"
        adapter = adapter_for(resolved.adapter)
        command = adapter.build(list(resolved.argv), resolved.model, prompt, str(prompt_file))
        resolve_program(command.argv, resolved, adapter.install_hint)
        folder.mkdir(parents=True)
        prompt_file.write_text(prompt, encoding="utf-8")
        lock = FileLock(folder / "owner.lock")
        lock.try_acquire()  # new and ours: nobody else can hold it yet
        log_path = folder / "agent.log"
        self.store.append("session.started", {
            "session_id": session_id, "agent": resolved.name, "title": title,
            "cwd": str(where), "argv": command.shown, "continue_from": None,
            "approvals": "auto", "owner_pid": os.getpid(), "owner": owner_id(),
            "log_path": str(log_path)}, content=prompt, stream=session_stream(session_id))
        task = asyncio.get_running_loop().create_task(
            self._run(session_id, resolved, prompt, where, prompt_file, log_path, env,
                      timeout_s))
        self._running[session_id] = _Running(task, lock)
        return session_id

    async def _run(self, session_id: str, agent: ResolvedAgent, prompt: str, cwd: Path,
                   prompt_file: Path, log_path: Path, env: Mapping[str, str] | None,
                   timeout_s: float | None) -> None:
        stream = session_stream(session_id)

        def emit(topic: str, meta: dict[str, Any]) -> Frame:
            return self.store.append(topic, {"session_id": session_id, **meta}, stream=stream)

        def started(pgid: int) -> None:  # lets another process stop it (`stop`)
            emit("session.process", {"pgid": pgid})

        began = time.monotonic()
        outcome: AgentOutcome | None = None
        status: SessionStatus = "failed"
        message = ""
        try:
            outcome = await run_agent(agent, prompt, cwd=cwd, prompt_file=prompt_file,
                                      log_path=log_path, emit=emit, timeout_s=timeout_s,
                                      on_start=started, context_env=env)
            status = _STATUS.get(outcome.status, "failed")
            message = outcome.message
            if status != "completed" and self._stop_requested(session_id):
                status, message = "stopped", "stopped on request"
        except asyncio.CancelledError:
            status, message = "stopped", "stopped on request"
        except AgentError as exc:
            message = str(exc)
        except Exception as exc:  # recorded, so that the session never stays "running"
            log.exception("session %s failed", session_id)
            message = f"unexpected error: {exc}"
        finally:
            running = self._running.pop(session_id, None)
            try:
                self._finish(session_id, status, message, outcome, time.monotonic() - began)
            finally:
                if running is not None:
                    running.lock.release()

    def _finish(self, session_id: str, status: SessionStatus, message: str,
                outcome: AgentOutcome | None, duration_s: float) -> None:
        usage = outcome.usage if outcome is not None else None
        self.store.append("session.finished", {
            "session_id": session_id, "status": status,
            "exit_code": outcome.exit_code if outcome is not None else None,
            "agent_session_id": outcome.session_id if outcome is not None else None,
            "message": message,
            "usage": None if usage is None else {
                "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
                "cached_tokens": usage.cached_tokens},
            "cost_usd": usage.cost_usd if usage is not None else None,
            "duration_s": round(duration_s, 4)},
            content=outcome.tail if outcome is not None and outcome.tail else None,
            stream=session_stream(session_id))

    # -- reading -----------------------------------------------------------------------------

    def get(self, session_id: str) -> SessionInfo:
        """The session; raises UnknownSession. A session whose owner died is recorded
        `lost` here (and what its owner left running is ended)."""
        info = self._project(session_id)
        if not info.ended and session_id not in self._running and not self._owner_alive(info):
            return self._record_lost(info)
        return info

    def list(self, limit: int | None = None, status: SessionStatus | None = None,
             agent: str | None = None) -> list[SessionInfo]:
        """Sessions newest first, of one status and agent if given, at most `limit`."""
        finished = {frame.meta["session_id"]: frame
                    for frame in self.store.read(topic="session.finished")
                    if frame.stream.startswith("sessions/")}
        found: list[SessionInfo] = []
        for frame in reversed(list(self.store.read(topic="session.started"))):
            if not frame.stream.startswith("sessions/"):
                continue
            end = finished.get(frame.meta.get("session_id"))
            info = project(frame.meta, frame.ts, frame.hash,
                           end.meta if end else None, end.ts if end else None,
                           end.hash if end else None)
            if not info.ended and info.session_id not in self._running and \
                    not self._owner_alive(info):
                info = self._record_lost(info)
            if (status is None or info.status == status) and \
                    (agent is None or info.agent == agent):
                found.append(info)
                if limit is not None and len(found) >= limit:
                    break
        return found

    def text(self, hash_: str | None) -> str:
        """A prompt's or a final text's content ("" for none)."""
        return self.store.cas_get(hash_).decode("utf-8", "replace") if hash_ else ""

    async def wait(self, session_id: str, timeout_s: float | None = None) -> SessionInfo:
        """The session once it has ended, or as it is after `timeout_s`."""
        running = self._running.get(session_id)
        if running is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(running.task), timeout_s)
            return self.get(session_id)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            info = self.get(session_id)
            if info.ended or (deadline is not None and time.monotonic() >= deadline):
                return info
            await asyncio.sleep(WAIT_POLL_S)

    async def watch(self, session_id: str, after_seq: int | None = None
                    ) -> AsyncIterator[Frame]:
        """The session's frames after `after_seq` (all when None), then live ones as they are
        recorded, from any process, each once and in order; ends after `session.finished`.
        A session whose owner dies meanwhile ends as `lost` (looked for every OWNER_CHECK_S)."""
        self._project(session_id)  # raises UnknownSession
        checker = asyncio.get_running_loop().create_task(self._until_ended(session_id))
        try:
            async with self.store.subscribe(stream=session_stream(session_id),
                                            after_seq=after_seq) as frames:
                async for frame in frames:
                    yield frame
                    if frame.topic == "session.finished":
                        return
        finally:
            checker.cancel()

    async def _until_ended(self, session_id: str) -> None:
        # get() records a session whose owner died `lost`: that frame ends the watch.
        while not self.get(session_id).ended:
            await asyncio.sleep(OWNER_CHECK_S)

    # -- stopping ----------------------------------------------------------------------------

    async def stop(self, session_id: str, *, by: str = "ralph") -> SessionInfo:
        """End the session's agent (its whole process tree) wherever it runs; the session
        as recorded then (`stopped`, or how it ended if it ended first)."""
        info = self.get(session_id)
        if info.ended:
            return info
        self.store.append("session.stop_requested", {"session_id": session_id, "by": by},
                          stream=session_stream(session_id))
        running = self._running.get(session_id)
        if running is not None:
            running.task.cancel()
            await asyncio.wait([running.task])
            if self._running.pop(session_id, None) is not None:
                # cancelled before it began: its body (and its finally) never ran
                try:
                    self._finish(session_id, "stopped", "stopped on request", None, 0.0)
                finally:
                    running.lock.release()
            return self.get(session_id)
        pgid = self._agent_pgid(session_id)
        if pgid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGTERM)
        info = await self.wait(session_id, STOP_GRACE_S)
        if not info.ended and pgid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
            info = await self.wait(session_id, STOP_GRACE_S)
        return info

    async def aclose(self) -> None:
        """Stop the sessions this process runs (a server shutting down)."""
        for session_id in list(self._running):
            await self.stop(session_id, by="shutdown")

    # -- internals ---------------------------------------------------------------------------

    def _project(self, session_id: str) -> SessionInfo:
        stream = session_stream(session_id)
        try:
            started = next(iter(self.store.read(topic="session.started", stream=stream,
                                                limit=1)), None)
        except ValueError:  # not a valid stream name: no such session
            started = None
        if started is None:
            raise UnknownSession(f"no agent session '{session_id}': `ralph agent list` "
                                 "shows them")
        end = next(iter(self.store.read(topic="session.finished", stream=stream, limit=1)),
                   None)
        return project(started.meta, started.ts, started.hash, end.meta if end else None,
                       end.ts if end else None, end.hash if end else None)

    def _owner_alive(self, info: SessionInfo) -> bool:
        return FileLock(self.session_dir(info.session_id) / "owner.lock").is_held_elsewhere()

    def _record_lost(self, info: SessionInfo) -> SessionInfo:
        lock = FileLock(self.session_dir(info.session_id) / "owner.lock")
        try:
            taken = lock.try_acquire()
        except RalphError:  # its folder is gone: record it all the same
            taken = True
        if not taken:  # its owner (or another reader) holds it after all
            return self._project(info.session_id)
        try:
            current = self._project(info.session_id)
            if current.ended:  # it finished between the two reads
                return current
            started = next(iter(self.store.read(topic="session.started",
                                                stream=session_stream(info.session_id),
                                                limit=1)))
            owner = started.meta.get("owner")
            if isinstance(owner, str) and owner:
                kill_owned(owner)
            self.store.append("session.finished", {
                "session_id": info.session_id, "status": "lost", "exit_code": None,
                "agent_session_id": None, "usage": None, "cost_usd": None,
                "duration_s": None,
                "message": f"the process running it (pid {info.owner_pid}) died"},
                stream=session_stream(info.session_id))
            return self._project(info.session_id)
        finally:
            lock.release()

    def _stop_requested(self, session_id: str) -> bool:
        return next(iter(self.store.read(topic="session.stop_requested",
                                         stream=session_stream(session_id), limit=1)),
                    None) is not None

    def _agent_pgid(self, session_id: str) -> int | None:
        frames = list(self.store.read(topic="session.process",
                                      stream=session_stream(session_id)))
        return int(frames[-1].meta["pgid"]) if frames else None

"""Sessions: a command (or a Ralph agent) run for a run, in the background
(`session.launch`), read (`session.poll`, `session.list`), waited for (`session.collect`)
and stopped (`session.stop`).

A `SessionManager` is one server's: it runs the sessions it launched
(ralph.company.session_exec) and reads every other session from the files beside its run
(ralph.company.session_state): the sessions of an earlier server, of another server
running now, of a server that died (recorded `failed` by the first reader, its processes
ended). A session is looked for among this server's own, then in the workspaces it knows
of: every workspace a request named (`known`), plus the `workspace_dir` of the request
itself; in each, every run's `session.json` (the newest of a `session_ref` wins).

Waiting (`collect`) never holds anything another request needs: a session of this server
is awaited as its task, another server's is read again every WAIT_POLL_S.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import orjson

from ralph.company.layout import CompanyError
from ralph.company.session_exec import STOP_GRACE_S, Prepared, SessionRun
from ralph.company.session_state import (
    STOP_FILE,
    SessionState,
    now_ms,
    owner_alive,
    read_state,
    settle,
    stored_session,
    stored_sessions,
)
from ralph.fsutil import atomic_write_bytes
from ralph.proc import kill_group

WAIT_POLL_S = 0.1  # how often another server's session is read while waiting for it
SERVER_STOPPED = "server stopped"


class SessionManager:
    """One server's sessions; `known()` names the workspaces its requests named."""

    def __init__(self, known: Callable[[], Iterable[str]]) -> None:
        self._known = known
        self._lock = threading.Lock()  # `_own` is read from worker threads too
        self._own: dict[str, SessionRun] = {}  # by session_ref: this server's latest
        self._tasks: dict[str, asyncio.Task[SessionState]] = {}
        self._claimed: set[str] = set()  # refs being launched (checked, not yet started)
        self._closing = False

    # -- launching ---------------------------------------------------------------------------

    def claim(self, ref: str) -> None:
        """Reserve `ref` for a launch; CompanyError if this server runs or launches it."""
        with self._lock:
            own = self._own.get(ref)
            if ref in self._claimed or (own is not None and own.state.running):
                raise CompanyError(f"Session already running: {ref}", session_ref=ref)
            self._claimed.add(ref)

    def unclaim(self, ref: str) -> None:
        with self._lock:
            self._claimed.discard(ref)

    def start(self, prepared: Prepared) -> str:
        """Run a prepared launch in the background (in the running event loop); its ref."""
        ref = prepared.state.session_ref
        run = SessionRun(prepared)
        if self._closing:  # recorded as the server began to stop: record it stopped too
            run.stop(SERVER_STOPPED)
        task = asyncio.get_running_loop().create_task(run.run())
        with self._lock:
            self._own[ref] = run
            self._tasks[ref] = task
            self._claimed.discard(ref)
        return ref

    # -- reading -----------------------------------------------------------------------------

    def find(self, ref: str, workspace_dir: str | None = None
             ) -> tuple[Path, SessionState, SessionRun | None]:
        """(run directory, state, this server's run of it or None); CompanyError if no
        session is called `ref`. Blocking (file reads): call it in a worker thread."""
        with self._lock:
            own = self._own.get(ref)
        if own is not None:
            return own.prepared.run, own.state, own
        found = [hit for workspace in self._search(workspace_dir)
                 if (hit := stored_session(workspace, ref)) is not None]
        if not found:
            raise CompanyError(f"Unknown session_ref: {ref}", session_ref=ref)
        run, state = max(found, key=lambda pair: pair[1].started_at_ms)
        return run, state, None

    def poll(self, ref: str, workspace_dir: str | None = None) -> dict[str, Any]:
        return self.find(ref, workspace_dir)[1].poll_fields()

    async def collect(self, ref: str, workspace_dir: str | None = None) -> dict[str, Any]:
        """Once the session has ended: its poll fields, `events_relpath` and the sorted
        `output_relpaths`."""
        run, state, own = await asyncio.to_thread(self.find, ref, workspace_dir)
        if own is not None:
            with self._lock:
                task = self._tasks[ref]
            await asyncio.wait({task})
            state = own.state
        while state.running:
            await asyncio.sleep(WAIT_POLL_S)
            state = await asyncio.to_thread(_reread, run, state)
        outputs = await asyncio.to_thread(_outputs, run)
        return {**state.poll_fields(), "events_relpath": f"runs/{state.run_id}/events.jsonl",
                "output_relpaths": [f"runs/{state.run_id}/outputs/{name}" for name in outputs]}

    def rows(self, workspace_dir: str | None = None, project_id: str | None = None,
             run_id: str | None = None, status: str | None = None) -> list[dict[str, Any]]:
        """Sessions newest first (then by ref), filtered; blocking (file reads)."""
        states: dict[Path, SessionState] = {}
        for workspace in self._search(workspace_dir, only=workspace_dir is not None):
            for run, state in stored_sessions(workspace):
                states[run] = state
        with self._lock:
            own = list(self._own.values())
        for session in own:  # fresher than its file
            if workspace_dir is None or _same(session.state.workspace_dir, workspace_dir):
                states[session.prepared.run] = session.state
        rows = [state.list_row() for state in states.values()
                if (project_id is None or state.project_id == project_id)
                and (run_id is None or state.run_id == run_id)
                and (status is None or state.status == status)]
        rows.sort(key=lambda row: row["session_ref"])
        rows.sort(key=lambda row: row["started_at_ms"], reverse=True)
        return rows

    def _search(self, workspace_dir: str | None, *, only: bool = False) -> list[str]:
        """The workspaces to look in (normalised, each once)."""
        named = [] if workspace_dir is None else [workspace_dir]
        if only:
            return [os.path.normpath(w) for w in named]
        with self._lock:
            own = [s.state.workspace_dir for s in self._own.values()]
        return sorted({os.path.normpath(w) for w in (*self._known(), *own, *named)})

    # -- stopping ----------------------------------------------------------------------------

    async def stop(self, ref: str, workspace_dir: str | None = None) -> dict[str, Any]:
        """Ask the session to stop (SIGTERM, SIGKILL STOP_GRACE_S later); its poll fields
        at once (still `running` until its command has gone). Another server's session is
        stopped by signalling its process group, and the request left for its owner, which
        records it `stopped`."""
        run, state, own = await asyncio.to_thread(self.find, ref, workspace_dir)
        if own is not None:
            own.stop()
            return own.state.poll_fields()
        if state.running:
            await asyncio.to_thread(_ask_to_stop, run, state)
            asyncio.get_running_loop().call_later(STOP_GRACE_S, _kill_if_running, run, state)
        return state.poll_fields()

    async def close(self) -> None:
        """Stop every session this server runs (recorded `stopped`, error "server
        stopped") and wait until their commands have gone; a launch that starts after this
        is stopped as it starts."""
        self._closing = True
        with self._lock:
            running = [(self._own[ref], task) for ref, task in self._tasks.items()
                       if not task.done()]
        for session, _ in running:
            session.stop(SERVER_STOPPED)
        if running:
            await asyncio.wait({task for _, task in running})
        with self._lock:  # launches that started while it waited (stopped as they started)
            late = [task for task in self._tasks.values() if not task.done()]
        if late:
            await asyncio.wait(late)


def _same(a: str, b: str) -> bool:
    return os.path.normpath(a) == os.path.normpath(b)


def _reread(run: Path, state: SessionState) -> SessionState:
    current = read_state(run)
    return state if current is None else settle(run, current)


def _outputs(run: Path) -> list[str]:
    try:
        with os.scandir(run / "outputs") as entries:
            return sorted(e.name for e in entries if e.is_file(follow_symlinks=False))
    except OSError:
        return []


def _ask_to_stop(run: Path, state: SessionState) -> None:
    """Leave the stop request for the session's owner, and SIGTERM its command's group."""
    atomic_write_bytes(run / STOP_FILE, orjson.dumps(
        {"requested_at_ms": now_ms(), "by_pid": os.getpid()}), durable=False)
    if state.pid and owner_alive(run, state):
        kill_group(state.pid, signal.SIGTERM)


def _kill_if_running(run: Path, state: SessionState) -> None:
    current = read_state(run)
    if (current is not None and current.running and current.pid == state.pid and current.pid
            and owner_alive(run, current)):
        kill_group(current.pid, signal.SIGKILL)

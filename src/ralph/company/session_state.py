"""A session's state on disk, beside its run: `runs/<run>/session.json` (what `session.poll`
answers), `runs/<run>/session.lock` (an flock its owner, the server running the session,
holds from before the state says `running` until after it records the end) and
`runs/<run>/session.stop` (a stop asked for by another server).

So a session outlives the server that launched it: any later server reads it from these
files, and one that finds a session still `running` whose lock nobody holds knows its owner
died. That reader takes the lock, ends what the session left running (the processes that
carry its containment marker: ralph.containment.kill_owned), and records the session, its
run.yaml and its events as `failed`, once.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import msgspec
import orjson

from ralph.company.events import append_event, envelope
from ralph.company.files import FileFormatError, read_yaml, write_yaml
from ralph.company.layout import EVENTS_FILE, PROJECTS
from ralph.company.runs import project_ids, run_ids
from ralph.flock import FileLock
from ralph.fsutil import atomic_write_bytes
from ralph.proc import kill_group, kill_owned, process_runs
from ralph.procguard import have_proc, owner_items, read_environ

SESSION_FILE = "session.json"
LOCK_FILE = "session.lock"
STOP_FILE = "session.stop"
SessionStatus = Literal["running", "ended", "failed", "stopped"]
STATUSES: tuple[SessionStatus, ...] = ("running", "ended", "failed", "stopped")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class SessionState:
    """Everything known about one session; `session.json` holds it as JSON."""

    session_ref: str
    workspace_dir: str  # as the launch named it
    project_id: str
    run_id: str
    started_at_ms: int
    argv: list[str]
    agent: str | None = None  # the Ralph agent it runs (extension), None for a command
    status: SessionStatus = "running"
    exit_code: int | None = None
    signal: str | None = None
    error: str | None = None
    ended_at_ms: int | None = None
    pid: int | None = None  # also the process group: the command leads its own
    marker: str | None = None  # its containment marker (RALPH_OWNER item): its whole tree
    owner: str | None = None  # the owner id (ralph.containment.owner_id) of its server
    owner_pid: int = field(default_factory=os.getpid)

    @property
    def running(self) -> bool:
        return self.status == "running"

    def poll_fields(self) -> dict[str, Any]:
        """`session.poll`'s answer: `error` only when there is one."""
        found: dict[str, Any] = {
            "session_ref": self.session_ref, "project_id": self.project_id,
            "run_id": self.run_id, "status": self.status, "exit_code": self.exit_code,
            "signal": self.signal}
        if self.error is not None:
            found["error"] = self.error
        return found

    def list_row(self) -> dict[str, Any]:
        """`session.list`'s row: `ended_at_ms` only once it has ended."""
        row = {**self.poll_fields(), "workspace_dir": self.workspace_dir,
               "started_at_ms": self.started_at_ms}
        if self.ended_at_ms is not None:
            row["ended_at_ms"] = self.ended_at_ms
        return row


def run_path(workspace_dir: str, project_id: str, run_id: str) -> Path:
    return Path(workspace_dir) / PROJECTS / project_id / "runs" / run_id


def read_state(run: Path) -> SessionState | None:
    """The session of run directory `run`, or None (none, or a file that is not one)."""
    try:
        # (msgspec checks every field's type: a hand-edited file cannot smuggle a string
        # into a pid or a time)
        return msgspec.json.decode((run / SESSION_FILE).read_bytes(), type=SessionState)
    except (OSError, msgspec.DecodeError):
        return None


def write_state(run: Path, state: SessionState) -> None:
    atomic_write_bytes(run / SESSION_FILE, orjson.dumps(asdict(state)), durable=False,
                       follow_symlinks=False)


def owner_alive(run: Path, state: SessionState) -> bool:
    """Its lock is held (by its owner), or, the lock file gone, its owner process runs."""
    held = FileLock(run / LOCK_FILE).held_elsewhere()
    return process_runs(state.owner_pid) if held is None else held


def marker_of(pid: int) -> str | None:
    """The innermost containment marker process `pid` was started with (ours: the last)."""
    environ = read_environ(pid)
    items = owner_items(environ) if environ is not None else []
    return items[-1].decode() if items else None


def signal_name(exit_code: int | None) -> str | None:
    """asyncio's negative exit code as the signal's name (`-15` -> `SIGTERM`)."""
    if exit_code is None or exit_code >= 0:
        return None
    try:
        return signal.Signals(-exit_code).name
    except ValueError:
        return f"SIG{-exit_code}"


def terminal_event(run_id: str, status: SessionStatus, exit_code: int | None,
                   signal_: str | None, error: str | None = None,
                   session_ref: str | None = None) -> dict[str, Any]:
    """`run.ended` / `run.failed` / `run.stopped` with {exit_code, signal, stopped} (and,
    for a session that failed without its command's verdict, why: `error`)."""
    payload: dict[str, Any] = {"exit_code": exit_code, "signal": signal_,
                               "stopped": status == "stopped"}
    if error is not None:
        payload["error"] = error
    kind = {"ended": "run.ended", "stopped": "run.stopped"}.get(status, "run.failed")
    return envelope(run_id, kind, payload, session_ref=session_ref)


def set_run_status(run: Path, status: SessionStatus, spec: dict[str, Any] | None = None
                   ) -> bool:
    """run.yaml's status (and `spec`, if given) rewritten atomically, its other keys kept;
    False (untouched) when it no longer says `running`."""
    data = read_yaml(run / "run.yaml")
    if not isinstance(data, dict) or data.get("status") != "running":
        return False
    data["status"] = status
    if spec is not None:
        data["spec"] = spec
    write_yaml(run / "run.yaml", data)
    return True


def record_end(run: Path, state: SessionState) -> None:
    """The end of `state` (already ended) in its run: the terminal event and run.yaml's
    status (once: only while run.yaml still says `running`), then session.json."""
    try:
        data = read_yaml(run / "run.yaml")
    except (OSError, FileFormatError):  # gone or broken: the session's own end still counts
        data = None
    if isinstance(data, dict) and data.get("status") == "running":
        append_event(run / EVENTS_FILE, terminal_event(
            state.run_id, state.status, state.exit_code, state.signal,
            state.error if state.status == "failed" and state.exit_code is None else None,
            state.session_ref))
        set_run_status(run, state.status)
    write_state(run, state)


def settle(run: Path, state: SessionState) -> SessionState:
    """`state` as it really is: a `running` session whose owner died is recorded failed
    (what it left running is ended first), by whichever reader gets its lock."""
    if not state.running or owner_alive(run, state):
        return state
    lock = FileLock(run / LOCK_FILE)
    if not lock.try_acquire():  # its owner, or another reader recording it, holds it
        return read_state(run) or state
    try:
        current = read_state(run)
        if current is None or not current.running:
            return current or state
        end_tree(current)
        lost = replace(current, status="failed", ended_at_ms=now_ms(),
                       error=f"the server that ran it ended (pid {current.owner_pid})")
        record_end(run, lost)
        return lost
    finally:
        lock.release()


def end_tree(state: SessionState) -> None:
    """End every process the session's command left: those carrying its containment marker
    (or, if it was not recorded, any of its owner's); without /proc, its process group."""
    target = state.marker or state.owner
    if target:
        kill_owned(target)
    if not have_proc() and state.pid:
        kill_group(state.pid)


def stored_sessions(workspace_dir: str) -> list[tuple[Path, SessionState]]:
    """Every session recorded in a workspace's runs, settled (see `settle`)."""
    root = Path(workspace_dir)
    found: list[tuple[Path, SessionState]] = []
    for project in project_ids(root):
        for run_id in run_ids(root, project):
            run = root / PROJECTS / project / "runs" / run_id
            state = read_state(run)
            if state is not None:
                found.append((run, settle(run, state)))
    return found


def stored_session(workspace_dir: str, session_ref: str) -> tuple[Path, SessionState] | None:
    """The newest session called `session_ref` in a workspace, settled; None if none."""
    matches = [(run, state) for run, state in stored_sessions(workspace_dir)
               if state.session_ref == session_ref]
    return max(matches, key=lambda pair: pair[1].started_at_ms, default=None)

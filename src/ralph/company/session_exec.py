"""One session: its launch checked before it is answered (`prepare_launch`), then run to its
end in the background (`SessionRun`).

`prepare_launch` refuses, before anything is written: an unknown project or run, a run that
is not `running`, a run or a `session_ref` that already has a running session, an unknown
`repo_id`, a `workdir_rel` that leaves the repository, an unreadable task or unknown
milestone, a working directory that is not there, an agent that cannot run. It then takes
the run's owner lock and records the session `running` (ralph.company.session_state).

`SessionRun.run`, as the original ran a command: outputs truncated, `stdin.txt` written,
the worktree added, run.yaml's `spec` written, the repository's snapshot, `run.executing`,
the command (its own process group, contained: see ralph.proc) with its output teed
(ralph.company.session_output), then the terminal event, run.yaml's status and the
session's end. Whatever fails after the answer (git refusing the worktree, a program that
is not there) ends the session, run.yaml and the events as `failed`, with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ralph.company.events import append_event, envelope, local_session_ref
from ralph.company.files import FileFormatError, read_yaml, write_yaml
from ralph.company.layout import EVENTS_FILE, CompanyError, existing_run, require_workspace
from ralph.company.schemas import RunYaml
from ralph.company.session_agent import PROMPT_FILE, AgentEvents, AgentPlan, plan_agent
from ralph.company.session_output import Tee
from ralph.company.session_state import (
    LOCK_FILE,
    STOP_FILE,
    SessionState,
    SessionStatus,
    marker_of,
    now_ms,
    read_state,
    record_end,
    settle,
    signal_name,
    stored_sessions,
    write_state,
)
from ralph.company.worktrees import CwdPlan, add_worktree, checked, plan_cwd, snapshot_repo
from ralph.errors import RalphError
from ralph.flock import FileLock
from ralph.fsutil import atomic_write_bytes
from ralph.proc import ProcessResult, kill_group, owner_id, run_process

log = logging.getLogger("ralph.company.sessions")

STOP_GRACE_S = 1.5  # SIGTERM, then SIGKILL this long after (as the original)
REDACTED = "[redacted]"  # what run.yaml's spec.env holds instead of each value


@dataclass(frozen=True)
class LaunchRequest:
    """`session.launch`'s params."""

    workspace_dir: str
    project_id: str
    run_id: str
    argv: list[str] | None = None
    repo_id: str | None = None
    workdir_rel: str | None = None
    task_id: str | None = None
    milestone_id: str | None = None
    stdin_text: str | None = None
    env: dict[str, str] | None = None
    session_ref: str | None = None
    agent: str | None = None  # (extension) a Ralph agent run on `prompt_text`
    prompt_text: str | None = None

    @property
    def ref(self) -> str:
        return self.session_ref or local_session_ref(self.run_id)


@dataclass
class Prepared:
    """A launch accepted: what it runs, where, and its run's owner lock (held)."""

    request: LaunchRequest
    root: Path
    run: Path
    agent_id: str
    context_pack_id: str
    cwd: CwdPlan
    argv: list[str]
    stdin: bytes | None
    agent: AgentPlan | None
    lock: FileLock
    state: SessionState


def prepare_launch(root: Path, request: LaunchRequest,
                   workspaces: list[str]) -> Prepared:
    """Check a launch and record its session `running` (see the module docstring)."""
    require_workspace(root)
    run = existing_run(root, request.project_id, request.run_id)
    run_doc = _run_doc(run)
    current = read_state(run)
    if current is not None and settle(run, current).running:
        raise CompanyError(f"Session already running: {current.session_ref}",
                           session_ref=current.session_ref, run_id=request.run_id)
    if run_doc.status != "running":
        raise CompanyError(f"Run is not in running status (status={run_doc.status})",
                           run_id=request.run_id, status=run_doc.status)
    ref = request.ref
    for workspace in {*workspaces, request.workspace_dir}:
        if any(s.session_ref == ref and s.running for _, s in stored_sessions(workspace)):
            raise CompanyError(f"Session already running: {ref}", session_ref=ref)
    cwd = plan_cwd(root, request.project_id, request.run_id, request.repo_id,
                   request.workdir_rel, request.task_id, request.milestone_id)
    agent = None
    if request.agent is not None:
        agent = plan_agent(root, run, request.agent, request.prompt_text or "", request.argv)
        argv, stdin = agent.command.argv, agent.command.stdin
    else:
        assert request.argv
        argv = list(request.argv)
        stdin = request.stdin_text.encode() if request.stdin_text is not None else None
    lock = FileLock(run / LOCK_FILE)
    if not lock.try_acquire():  # another server launches on this run right now
        raise CompanyError(f"Session already running on run {request.run_id}",
                           run_id=request.run_id)
    state = SessionState(
        session_ref=ref, workspace_dir=request.workspace_dir, project_id=request.project_id,
        run_id=request.run_id, started_at_ms=now_ms(),
        argv=agent.command.shown if agent else argv, agent=request.agent, owner=owner_id())
    try:
        with contextlib.suppress(FileNotFoundError):
            (run / STOP_FILE).unlink()
        write_state(run, state)
    except BaseException:
        lock.release()
        raise
    return Prepared(request, root, run, run_doc.agent_id, run_doc.context_pack_id, cwd, argv,
                    stdin, agent, lock, state)


def _run_doc(run: Path) -> RunYaml:
    try:
        data = read_yaml(run / "run.yaml")
    except (OSError, FileFormatError) as exc:
        raise CompanyError(f"Cannot read run.yaml: {exc}") from None
    return checked(RunYaml, data, "run.yaml")


class SessionRun:
    """A session this server runs: `run` it once, `stop` it any time."""

    def __init__(self, prepared: Prepared) -> None:
        self.prepared = prepared
        self.state = prepared.state  # replaced (never changed in place) as it goes
        self._stop_reason: str | None = None
        self._stopping = False
        self._process_running = False

    @property
    def stopping(self) -> bool:
        return self._stopping or (self.prepared.run / STOP_FILE).exists()

    def stop(self, reason: str | None = None) -> None:
        """SIGTERM to the command's group, SIGKILL STOP_GRACE_S later if it still runs; a
        session not started yet never starts. `reason` is recorded as its `error`."""
        if not self.state.running:
            return
        if not self._stopping:
            self._stopping, self._stop_reason = True, reason
        self._signal(signal.SIGTERM)
        asyncio.get_running_loop().call_later(STOP_GRACE_S, self._signal, signal.SIGKILL)

    def _signal(self, sig: int) -> None:
        if self._process_running and self.state.pid:
            kill_group(self.state.pid, sig)

    def _started(self, pid: int) -> None:
        self._process_running = True
        self.state = replace(self.state, pid=pid, marker=marker_of(pid))
        try:
            write_state(self.prepared.run, self.state)
        except OSError as exc:  # only a later server's clean-up of a lost owner needs it
            log.warning("session %s: cannot record its process: %s", self.state.session_ref,
                        exc)
        if self._stopping:
            self._signal(signal.SIGTERM)

    async def run(self) -> SessionState:
        """Run the session to its end; its final state (recorded)."""
        try:
            status, code, sig, error = await self._execute()
        except asyncio.CancelledError:
            # The server goes without closing its sessions: record what it can, then go.
            self._finish("stopped", None, None, self._stop_reason or "server stopped")
            raise
        except (RalphError, OSError, FileFormatError) as exc:
            status, code, sig, error = "failed", None, None, str(exc)
        except Exception as exc:  # recorded, so that the session never stays "running"
            log.exception("session %s failed", self.state.session_ref)
            status, code, sig, error = "failed", None, None, f"unexpected error: {exc}"
        await asyncio.to_thread(self._finish, status, code, sig, error)
        return self.state

    async def _execute(self) -> tuple[SessionStatus, int | None, str | None, str | None]:
        p, request = self.prepared, self.prepared.request
        events = p.run / EVENTS_FILE
        agent_events = None
        if p.agent is not None:
            agent_events = AgentEvents(p.agent, self._emitter(events))
        ref = p.state.session_ref
        tee = await asyncio.to_thread(Tee, p.run, request.run_id, p.agent_id, ref,
                                      agent_events.line if agent_events else None)
        result: ProcessResult | None = None
        error: str | None = None
        try:
            spec = await asyncio.to_thread(self._write_inputs)
            if p.cwd.worktree_rel is not None:
                assert request.repo_id is not None and request.task_id is not None
                await add_worktree(p.root, p.cwd, p.run, request.run_id, p.agent_id,
                                   request.repo_id, request.task_id, request.milestone_id,
                                   session_ref=ref)
            if not p.cwd.cwd.is_dir():
                raise CompanyError("Resolved cwd does not exist or is not a directory: "
                                   f"{p.cwd.cwd}")
            await asyncio.to_thread(_write_spec, p.run, spec)
            if request.repo_id is not None and p.cwd.repo_root is not None:
                await snapshot_repo(p.root, request.project_id, p.run, request.run_id,
                                    p.context_pack_id, request.repo_id, p.cwd.repo_root,
                                    session_ref=ref)
            await asyncio.to_thread(append_event, events, envelope(
                request.run_id, "run.executing", _executing(spec), session_ref=ref))
            if self.stopping:
                return "stopped", None, None, self._stop_reason
            if agent_events is not None:
                await asyncio.to_thread(agent_events.started)
            timeout = p.agent.agent.timeout_seconds if p.agent is not None else None
            env = {**(request.env or {}), **(
                {**p.agent.agent.env, **p.agent.command.env} if p.agent is not None else {})}
            try:
                result = await run_process(
                    p.argv, cwd=p.cwd.cwd, env=env, stdin_data=p.stdin, timeout_s=timeout,
                    on_output=tee.feed, on_start=self._started, grace_s=STOP_GRACE_S,
                    contain=True)
            except RalphError as exc:
                error = str(exc)
                raise
            finally:
                self._process_running = False
            if result.timed_out:
                error = f"timed out after {timeout:g} s"
        finally:
            await asyncio.to_thread(tee.close)
            if agent_events is not None and (result is not None or error is not None):
                await asyncio.to_thread(agent_events.finished, result, self.stopping, error)
        code = result.exit_code
        sig = signal_name(code)
        code = None if code is not None and code < 0 else code
        status: SessionStatus = ("stopped" if self.stopping else "ended" if code == 0
                                 else "failed")
        return status, code, sig, error if status == "failed" else self._stop_reason

    def _emitter(self, events: Path) -> Any:
        run_id, actor = self.prepared.request.run_id, self.prepared.agent_id
        ref = self.prepared.state.session_ref

        def emit(topic: str, meta: dict[str, Any]) -> None:
            visibility = "team" if topic in ("agent.output", "agent.usage") else "org"
            append_event(events, envelope(run_id, topic, meta, actor=actor,
                                          visibility=visibility, session_ref=ref))
        return emit

    def _write_inputs(self) -> dict[str, Any]:
        """stdin.txt and the prompt file; run.yaml's spec (env values redacted)."""
        p, request = self.prepared, self.prepared.request
        stdin_rel = None
        if p.stdin is not None:
            stdin_rel = f"runs/{request.run_id}/outputs/stdin.txt"
            atomic_write_bytes(p.run / "outputs" / "stdin.txt", p.stdin, durable=False)
        if p.agent is not None:
            atomic_write_bytes(p.run / PROMPT_FILE, (request.prompt_text or "").encode(),
                               durable=False)
        spec: dict[str, Any] = {
            "kind": "command", "argv": self.state.argv, "repo_id": request.repo_id,
            "workdir_rel": request.workdir_rel, "task_id": request.task_id,
            "milestone_id": request.milestone_id, "worktree_relpath": p.cwd.worktree_rel,
            "worktree_branch": p.cwd.branch,
            "env": dict.fromkeys(request.env, REDACTED) if request.env is not None else None,
            "stdin_relpath": stdin_rel}
        return spec

    def _finish(self, status: SessionStatus, exit_code: int | None, sig: str | None,
                error: str | None) -> None:
        """Record the end (run.yaml, terminal event, session.json), then let go of the
        owner lock. If the end cannot be recorded, the lock stays held for this process's
        life: the session then reads as running, never as lost (whose clean-up would end
        this server's processes)."""
        self.state = replace(self.state, status=status, exit_code=exit_code, signal=sig,
                             error=error, ended_at_ms=now_ms())
        try:
            record_end(self.prepared.run, self.state)
        except (OSError, FileFormatError) as exc:
            log.error("session %s: its end (%s) cannot be recorded: %s",
                      self.state.session_ref, status, exc)
            return
        self.prepared.lock.release()


def _write_spec(run: Path, spec: dict[str, Any]) -> None:
    data = read_yaml(run / "run.yaml")
    if isinstance(data, dict):
        data["spec"] = {k: v for k, v in spec.items() if v is not None}
        write_yaml(run / "run.yaml", data)


def _executing(spec: dict[str, Any]) -> dict[str, Any]:
    """`run.executing`'s payload: repo_id and workdir_rel only when given (as the
    original, whose JSON dropped them when undefined), the others null when not."""
    payload: dict[str, Any] = {"argv": spec["argv"]}
    for key in ("repo_id", "workdir_rel"):
        if spec[key] is not None:
            payload[key] = spec[key]
    for key in ("task_id", "milestone_id", "worktree_relpath", "worktree_branch",
                "stdin_relpath"):
        payload[key] = spec[key]
    return payload

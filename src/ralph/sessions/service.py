"""Agent sessions: one agent CLI run on a prompt outside the loop, recorded in the store.

`SessionService.launch` starts the agent through its adapter (`ralph.agents.runner`, as the
loop runs its agents) in a task of the caller's event loop and returns the session's id at
once. Everything about a session is in its store stream (ralph.sessions.records), so any
process can list, read, wait for and stop it. The process that runs a session holds the
flock `.ralph/sessions/<id>/owner.lock` for as long as the session runs: a session without a
`session.finished` frame whose lock nobody holds and whose owner process is gone lost its
owner, and the next reader records it `lost` (once: the reader takes the lock to do so) and
ends what that owner left running. The owner follows its session's stream for
`session.stop_requested`, so a stop from any process reaches it, however early.

Limits: `list` with a status or agent filter reads every session's first frame (newest
first, without a filter it reads only as many as asked).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ralph.agents import adapter_for
from ralph.agents.base import AgentError
from ralph.agents.runner import AgentOutcome, resolve_program, run_agent
from ralph.approvals.desk import ApprovalAnswer, ApprovalDesk, ApprovalRequest, NotPending
from ralph.approvals.policy import ApprovalPolicy, PolicyFile
from ralph.approvals.rules import APPROVAL_MODES, ApprovalMode, Decision
from ralph.config import Config, ResolvedAgent
from ralph.containment import kill_owned, owner_id
from ralph.errors import RalphError
from ralph.flock import FileLock
from ralph.fsutil import atomic_write_bytes
from ralph.proc import process_runs
from ralph.sessions.native import (
    NativeConversation,
    native_conversations,
    split_native_id,
    valid_conversation_id,
)
from ralph.sessions.records import (
    STREAM_PREFIX,
    SessionInfo,
    SessionStatus,
    project,
    session_stream,
)
from ralph.store import Frame, Store
from ralph.store.ids import IdGenerator

try:  # as ralph.configcache: BLAKE2 without hashlib's OpenSSL import
    from _blake2 import blake2b
except ImportError:  # pragma: no cover
    from hashlib import blake2b

log = logging.getLogger("ralph.sessions")

WAIT_POLL_S = 0.05  # how often a session another process runs is looked at while waiting
OWNER_CHECK_S = 1.0  # how often a watch looks whether the session's owner still lives
STOP_WAIT_S = 10.0  # how long `stop` waits for another process to record its session stopped
_ids = IdGenerator()

# How an agent run's status reads as a session's (any other: failed; stopped is decided by
# whether a stop was asked for, whatever the agent's status).
_STATUS: dict[str, SessionStatus] = {"ok": "completed", "timeout": "timed_out"}


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
    busy: FileLock | None  # (agent, directory): held unless concurrent sessions were allowed


class SessionService:
    """Agent sessions of the project at `root`, recorded in `store`."""

    def __init__(self, root: Path, config: Config | None, store: Store) -> None:
        """`config` (ralph.toml) is needed to launch only: reading and stopping sessions
        works with a broken or missing one."""
        self.root = root
        self.config = config
        self.store = store
        self._running: dict[str, _Running] = {}

    def session_dir(self, session_id: str) -> Path:
        return self.root / ".ralph" / "sessions" / session_id

    # -- launching ---------------------------------------------------------------------------

    async def launch(self, prompt: str, agent: str | None = None, *, title: str | None = None,
                     cwd: Path | None = None, continue_from: str | None = None,
                     approvals: ApprovalMode = "auto", env: Mapping[str, str] | None = None,
                     timeout_s: float | None = None, allow_concurrent: bool = False) -> str:
        """Start `agent` (default: loop.default_agent, or the agent of `continue_from`) on
        `prompt` in the background; the session's id. `continue_from`: an ended session
        whose CLI conversation this one continues (the CLI's own resume, so the agent keeps
        its context), or a CLI's own conversation (`claude:<id>`, `codex:<id>`: see
        ralph.sessions.native). `approvals`: auto (the agent's unattended settings), ask (its
        tool calls wait for a person's answer, see `answer`) or deny (only what the rules
        allow runs), with ralph.toml's [approvals] rules (ralph.approvals). Raises
        SessionError (empty prompt, a directory that is not there, the agent already running
        here, a session that cannot be continued, an unknown approvals mode), ConfigError
        (unknown agent) or AgentError (its program cannot start, cannot continue, or cannot
        run under these approvals) before anything is recorded."""
        _check_request(prompt, title, approvals)
        if self.config is None:
            raise SessionError("launching needs the project's ralph.toml")
        native = split_native_id(continue_from) if continue_from is not None else None
        earlier = (self._continuable(continue_from)
                   if continue_from is not None and native is None else None)
        resolved = self.config.agent(agent or (earlier.agent if earlier else None)
                                     or (native[0] if native else None)
                                     or self.config.loop.default_agent)
        where = (cwd or (Path(earlier.cwd) if earlier else self.root)).resolve()
        if not where.is_dir():
            raise SessionError(f"{where} is not a directory")
        adapter = adapter_for(resolved.adapter)
        session_id = new_session_id()
        folder = self.session_dir(session_id)
        prompt_file = folder / "prompt.md"
        argv = list(resolved.argv) or adapter.default_argv(resolved.model)
        conversation = _conversation(resolved, earlier, native)
        if conversation is not None:
            argv = adapter.continue_argv(argv, conversation)
        if earlier is not None and resolved.adapter == "opencode" and \
                earlier.approvals != "auto" and approvals == "auto":
            raise SessionError(f"session {earlier.session_id} ran opencode with approvals "
                               f"'{earlier.approvals}': its conversation keeps asking before "
                               "each tool call, which `opencode run` would refuse every "
                               "time; continue it with approvals ask or deny")
        own_argv = adapter.build(argv, resolved.model, prompt, str(prompt_file)).argv
        policy = self._policy(session_id, approvals, where)
        argv = adapter.approvals_argv(argv, approvals, policy.encode(), folder.resolve())
        files = adapter.approvals_files(approvals)
        # The agent's own program, whatever runs it (a bridge may: opencode under ask).
        resolve_program(own_argv, resolved, adapter.install_hint)
        resolved = replace(resolved, argv=tuple(argv))  # what run_agent will run
        command = adapter.build(argv, resolved.model, prompt, str(prompt_file))
        busy = None if allow_concurrent else self._claim(resolved.name, where, session_id)
        lock = FileLock(folder / "owner.lock")
        try:
            folder.mkdir(parents=True)
            prompt_file.write_text(prompt, encoding="utf-8")
            if approvals != "auto":
                policy.write()  # for reading back: its processes get it inline
            for name, text in files.items():
                atomic_write_bytes(folder / name, text.encode(), durable=False)
            lock.try_acquire()  # new and ours: nobody else can hold it yet
            log_path = folder / "agent.log"
            started = self.store.append("session.started", {
                "session_id": session_id, "agent": resolved.name, "title": title,
                "cwd": str(where), "argv": command.shown, "continue_from": continue_from,
                "approvals": approvals, "owner_pid": os.getpid(), "owner": owner_id(),
                "log_path": str(log_path)}, content=prompt, stream=session_stream(session_id))
        except BaseException:
            lock.release()
            if busy is not None:
                busy.release()
            shutil.rmtree(folder, ignore_errors=True)
            raise
        task = asyncio.get_running_loop().create_task(
            self._run(session_id, started.seq, resolved, prompt, where, prompt_file, log_path,
                      env, timeout_s))
        self._running[session_id] = _Running(task, lock, busy)
        return session_id

    def _continuable(self, session_id: str) -> SessionInfo:
        """The ended session `session_id`, with the CLI's conversation id to resume."""
        earlier = self.get(session_id)  # UnknownSession (a SessionError) if there is none
        if not earlier.ended:
            raise SessionError(f"session {session_id} is still running: continue it once it "
                               "has ended")
        if earlier.agent_session_id is None:
            raise SessionError(f"session {session_id} cannot be continued: its agent "
                               f"'{earlier.agent}' reported no conversation id")
        if not valid_conversation_id(earlier.agent_session_id):
            raise SessionError(f"session {session_id} cannot be continued: its agent "
                               f"reported an odd conversation id "
                               f"({earlier.agent_session_id[:40]!r})")
        return earlier

    def _policy(self, session_id: str, mode: ApprovalMode, cwd: Path) -> PolicyFile:
        """The session's approval policy: its mode with ralph.toml's [approvals]."""
        assert self.config is not None
        rules = self.config.approvals
        return PolicyFile(ApprovalPolicy(mode, tuple(rules.allow), tuple(rules.deny),
                                         float(rules.timeout_seconds)),
                          Path(self.store.location), session_id,
                          self.session_dir(session_id).resolve(), cwd)

    def _claim(self, agent: str, cwd: Path, session_id: str) -> FileLock:
        """The (agent, directory) lock for the session's life; AgentBusy if another session
        holds it, in any process."""
        key = blake2b(f"{agent}\0{cwd}".encode(), digest_size=12).hexdigest()
        busy = FileLock(self.root / ".ralph" / "sessions" / "busy" / f"{key}.lock")
        if not busy.try_acquire():
            holder = busy.path.with_suffix(".session")
            other = holder.read_text().strip() if holder.exists() else "?"
            raise AgentBusy(f"agent '{agent}' is already running in {cwd} (session {other}): "
                            "wait for it or stop it")
        try:
            atomic_write_bytes(busy.path.with_suffix(".session"), f"{session_id}\n".encode(),
                               durable=False)
        except OSError as exc:  # only the busy message's session id is lost
            log.warning("cannot note the session holding %s: %s", busy.path, exc)
        return busy

    async def _run(self, session_id: str, after_seq: int, agent: ResolvedAgent, prompt: str,
                   cwd: Path, prompt_file: Path, log_path: Path,
                   env: Mapping[str, str] | None, timeout_s: float | None) -> None:
        stream = session_stream(session_id)

        def emit(topic: str, meta: dict[str, Any]) -> Frame:
            # The agent's events as the loop records them (their `session_id` is the CLI's
            # own): the stream says which session they belong to.
            return self.store.append(topic, meta, stream=stream)

        def started(pgid: int) -> None:
            try:
                emit("session.process", {"pgid": pgid})
            except Exception as exc:  # a record the session can do without
                log.warning("session %s: could not record its process: %s", session_id, exc)

        began = time.monotonic()
        outcome: AgentOutcome | None = None
        status: SessionStatus = "failed"
        message = ""
        loop = asyncio.get_running_loop()
        agent_run = loop.create_task(run_agent(
            agent, prompt, cwd=cwd, prompt_file=prompt_file, log_path=log_path, emit=emit,
            timeout_s=timeout_s, on_start=started, context_env=env))
        follower = loop.create_task(self._follow_stop(session_id, after_seq, agent_run))
        follower.add_done_callback(_log_failure(session_id))
        try:
            outcome = await agent_run
            status = _STATUS.get(outcome.status, "failed")
            message = outcome.message
        except asyncio.CancelledError:
            agent_run.cancel()
            with contextlib.suppress(BaseException):
                await agent_run
            message = "the process running it is shutting down"
        except AgentError as exc:
            message = str(exc)
        except Exception as exc:  # recorded, so that the session never stays "running"
            log.exception("session %s failed", session_id)
            message = f"unexpected error: {exc}"
        finally:
            follower.cancel()
            if self._stop_requested(session_id):
                status, message = "stopped", "stopped on request"
            elif agent_run.cancelled():
                status = "stopped"
            self._end(session_id, status, message, outcome, time.monotonic() - began)

    async def _follow_stop(self, session_id: str, after_seq: int,
                           agent_run: asyncio.Task[AgentOutcome]) -> None:
        """Cancel the agent's run when any process asks for the session to stop."""
        async with self.store.subscribe(topic="session.stop_requested",
                                        stream=session_stream(session_id),
                                        after_seq=after_seq) as requests:
            async for _ in requests:
                agent_run.cancel()
                return

    def _end(self, session_id: str, status: SessionStatus, message: str,
             outcome: AgentOutcome | None, duration_s: float) -> None:
        """Record the end and let go of the session's locks. If the record cannot be written
        (a full disk), the owner lock stays held for this process's life: the session reads
        as running, never as lost (which would end this process's other agents)."""
        running = self._running.pop(session_id, None)
        try:
            self._finish(session_id, status, message, outcome, duration_s)
        except Exception as exc:
            log.error("session %s: its end (%s) cannot be recorded: %s", session_id, status,
                      exc)
            if running is not None and running.busy is not None:
                running.busy.release()
            return
        if running is not None:
            running.lock.release()
            if running.busy is not None:
                running.busy.release()

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
        """Sessions newest first, of one status and agent if given, at most `limit`.
        Without a filter only `limit` sessions are read; with one, every session's first
        frame may be (newest first, until `limit` match)."""
        found: list[SessionInfo] = []
        for frame in self._started_newest_first(None if status or agent else limit):
            if not frame.stream.startswith(STREAM_PREFIX):
                continue
            try:
                info = self.get(frame.stream.removeprefix(STREAM_PREFIX))
            except UnknownSession:
                continue
            if (status is None or info.status == status) and \
                    (agent is None or info.agent == agent):
                found.append(info)
                if limit is not None and len(found) >= limit:
                    break
        return found

    def _started_newest_first(self, limit: int | None) -> Sequence[Frame]:
        if limit is not None:
            return list(reversed(self.store.last("session.started", limit)))
        return list(reversed(list(self.store.read(topic="session.started"))))

    def native(self) -> Sequence[NativeConversation]:
        """The agent CLIs' own conversations for the project (ralph.sessions.native), found
        where each CLI keeps them for this user and for the environment ralph.toml gives
        its claude and codex agents; newest first."""
        envs: list[Mapping[str, str]] = [os.environ]
        if self.config is not None:
            for name in self.config.agents:
                resolved = self.config.agent(name)
                if resolved.adapter in ("claude", "codex") and resolved.env:
                    envs.append({**os.environ, **resolved.env})
        found: dict[str, NativeConversation] = {}
        for env in envs:
            for conversation in native_conversations(self.root, env):
                found.setdefault(conversation.id, conversation)
        return sorted(found.values(), key=lambda c: c.last_at or "", reverse=True)

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
            # In a thread: recording a session lost ends what its owner left running, which
            # may take seconds; a server's event loop must not stall meanwhile.
            info = await asyncio.to_thread(self.get, session_id)
            if info.ended or (deadline is not None and time.monotonic() >= deadline):
                return info
            await asyncio.sleep(WAIT_POLL_S)

    async def watch(self, session_id: str, after_seq: int | None = None
                    ) -> AsyncIterator[Frame]:
        """The session's frames after `after_seq` (all when None), then live ones as they are
        recorded, from any process, each once and in order; ends after `session.finished`.
        A session whose owner dies meanwhile ends as `lost` (looked for every OWNER_CHECK_S)."""
        self._project(session_id)  # raises UnknownSession
        end = next(iter(self.store.read(topic="session.finished",
                                        stream=session_stream(session_id), limit=1)), None)
        if end is not None and after_seq is not None and end.seq <= after_seq:
            return  # it ended before the frames asked for
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
        # get() records a session whose owner died `lost`: that frame ends the watch (in a
        # thread, as in `wait`).
        while not (await asyncio.to_thread(self.get, session_id)).ended:
            await asyncio.sleep(OWNER_CHECK_S)

    # -- tool-permission requests -------------------------------------------------------------

    def desk(self, session_id: str) -> ApprovalDesk:
        return ApprovalDesk(self.store, session_id, self.session_dir(session_id))

    def pending(self, session_id: str) -> Sequence[ApprovalRequest]:
        """The session's tool-permission requests waiting for an answer (none once it has
        ended); raises UnknownSession."""
        if self.get(session_id).ended:
            return []
        return self.desk(session_id).pending()

    def open_requests(self) -> Sequence[tuple[SessionInfo, ApprovalRequest]]:
        """Every running session's requests waiting for an answer, oldest first: what a
        face that opens while an agent waits must show."""
        found = [(info, request) for info in self.list(status="running")
                 for request in self.pending(info.session_id)]
        return sorted(found, key=lambda pair: pair[1].seq)

    def asking(self, tool_use_id: str, prefer: str | None = None) -> str | None:
        """The running session with the pending request `tool_use_id` (`prefer` looked at
        first), for a face that answers by the request's id alone; None if none has it."""
        running = [info.session_id for info in self.list(status="running")]
        if prefer is not None and prefer in running:
            running.remove(prefer)
            running.insert(0, prefer)
        for session_id in running:
            if any(r.tool_use_id == tool_use_id for r in self.pending(session_id)):
                return session_id
        return None

    def answer(self, session_id: str, tool_use_id: str, decision: Decision,
               message: str = "", *, by: str) -> ApprovalAnswer:
        """Answer a pending request of a running session, from any process; raises
        UnknownSession, or NotPending (nothing recorded) if it is not waiting for one."""
        if self.get(session_id).ended:
            raise NotPending(f"session {session_id} has ended: it waits for no answer")
        return self.desk(session_id).answer(tool_use_id, decision, message, by=by)

    # -- stopping ----------------------------------------------------------------------------

    async def stop(self, session_id: str, *, by: str = "ralph") -> SessionInfo:
        """Ask the session to stop, wherever it runs (its owner ends the agent's whole
        process tree); the session as recorded then: `stopped`, how it ended if it ended
        first, or still `running` if its owner did not answer within STOP_WAIT_S."""
        info = self.get(session_id)
        if info.ended:
            return info
        self.store.append("session.stop_requested", {"session_id": session_id, "by": by},
                          stream=session_stream(session_id))
        running = self._running.get(session_id)
        if running is not None:
            running.task.cancel()
            await asyncio.wait([running.task])
            if session_id in self._running:  # cancelled before it began: nothing ran
                self._end(session_id, "stopped", "stopped on request", None, 0.0)
            return self.get(session_id)
        return await self.wait(session_id, STOP_WAIT_S)

    async def aclose(self) -> None:
        """Stop the sessions this process runs (a server shutting down)."""
        await asyncio.gather(*(self.stop(session_id, by="shutdown")
                               for session_id in list(self._running)))

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
        """Its lock is held, or (the lock file deleted, say) its owner process still runs.
        A lock file nobody holds says the owner died whatever runs under its pid now (pids
        are reused): the owner holds it from before `session.started` until after
        `session.finished`. A session of this very process is never lost: it runs, or its
        end could not be recorded (see `_end`)."""
        if info.owner == owner_id():
            return True
        held = FileLock(self.session_dir(info.session_id) / "owner.lock").held_elsewhere()
        return process_runs(info.owner_pid) if held is None else held

    def _record_lost(self, info: SessionInfo) -> SessionInfo:
        lock = FileLock(self.session_dir(info.session_id) / "owner.lock")
        if not lock.try_acquire():  # its owner (or another reader) holds it after all
            return self._project(info.session_id)
        try:
            current = self._project(info.session_id)
            if current.ended:  # it finished between the two reads
                return current
            if info.owner:
                kill_owned(info.owner)
            if self._project(info.session_id).ended:  # recorded meanwhile, after all
                return self._project(info.session_id)
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



def _check_request(prompt: str, title: str | None, approvals: str) -> None:
    if not prompt.strip():
        raise SessionError("the prompt is empty: say what the agent should do")
    if approvals not in APPROVAL_MODES:
        raise SessionError(f"unknown approvals mode {approvals!r}: use one of "
                           f"{', '.join(APPROVAL_MODES)}")
    for name, text in (("prompt", prompt), ("title", title or "")):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise SessionError(f"the {name} is not valid text (UTF-8)") from None


def _conversation(resolved: ResolvedAgent, earlier: SessionInfo | None,
                  native: tuple[str, str] | None) -> str | None:
    """The CLI's conversation id the launch continues (None: a new conversation)."""
    if earlier is not None:
        if earlier.agent != resolved.name:
            raise SessionError(f"session {earlier.session_id} ran agent '{earlier.agent}': "
                               f"only that agent can continue it, not '{resolved.name}'")
        return earlier.agent_session_id  # not None: checked by _continuable
    if native is not None:
        if resolved.adapter != native[0]:
            raise SessionError(f"{native[0]}:{native[1]} is a {native[0]} conversation: "
                               f"continue it with an agent whose adapter is {native[0]}, not "
                               f"'{resolved.name}' ({resolved.adapter})")
        return native[1]
    return None


def _log_failure(session_id: str) -> Callable[[asyncio.Task[None]], None]:
    """A done callback saying (in the log) why a session's helper task failed: a stop
    request would then not reach the owner, which must not go unnoticed."""

    def said(task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("session %s no longer follows stop requests: %s", session_id,
                      task.exception())

    return said

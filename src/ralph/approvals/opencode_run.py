"""opencode under approvals `ask` or `deny`: its server driven over HTTP, each tool call
decided by Ralph.

    python -I -m ralph.approvals.opencode_run POLICY -- \\
        opencode run --format json [-m provider/model] [--agent A] [-s SESSION] [message..]

POLICY: the session's policy, inline (ralph.approvals.policy.PolicyFile.encode), or the path
of a file holding it.

`opencode run` cannot do it: it rejects every permission request of its own session itself,
within milliseconds ("! permission requested: bash (...); auto-rejecting"), and no option
turns that off. So this program does what `opencode run` does, itself: it starts
`opencode serve` on a free loopback port with a random password (its output goes to
opencode-server.log in the session's folder; its stderr, opencode's log with --print-logs,
also to this program's stderr, as `opencode run` prints it), makes the session ask for every
tool call (a rule of the session's own, which wins over opencode's configuration), subscribes
to the server's events, sends the prompt (stdin, or the message words) and answers each
`permission.asked` of the session, and of the sessions its subagents start, by the session's
policy (ralph.approvals.policy: a rule, the mode, a person through the store, the timeout):
`once`, or `reject` with the reason, which the model gets as the tool's result ("The user
rejected permission to use this specific tool call with the following feedback: ..."). A
rejection without a message would end the agent's turn instead. The asking rule stays with
the session (opencode's API adds rules to a session, it removes none): the conversation,
continued later by a plain `opencode run` (approvals auto), has its tool calls rejected.

stdout carries what `opencode run --format json` prints, as far as Ralph's OpencodeParser
reads it: step_start, text, reasoning (with --thinking), tool_use, step_finish and error
events, each part once, when it is complete. The turn ends when the session is idle again:
exit 0, or 1 if the session reported an error. Whatever else goes wrong: one line on stderr,
an error event on stdout, exit 1; a command line this program cannot run: one line on stderr
in an argument parser's words ("error: unknown option ..."), exit 2.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import sys
import time
from collections.abc import AsyncIterator, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

import orjson

from ralph.agents.server import free_port
from ralph.approvals.desk import ApprovalAnswer, ApprovalDesk, NotPending
from ralph.approvals.opencode_args import RunArgs, UsageError, parse_command_line, prompt_text
from ralph.approvals.opencode_events import ASK_ALL, RUN_RULES, Ask, Reaction, Turn, asking
from ralph.approvals.opencode_http import (
    REQUEST_TIMEOUT_S,
    USERNAME,
    BridgeError,
    Client,
    HttpError,
    NoAnswer,
)
from ralph.approvals.policy import PolicyFile, reason
from ralph.store import Store

EXIT_USAGE = 2
SERVER_LOG = "opencode-server.log"
HEALTH_TIMEOUT_S = 60.0
# A request the server accepted before it was ready is never answered: ask again soon.
HEALTH_ATTEMPT_S = 2.0
STOP_GRACE_S = 3.0
# opencode's permission to start a subagent (its `task` tool). A subagent's conversation does
# not apply the asking rule the bridge adds to it (checked with 1.18.33): its tool calls
# would run unasked. So under ask and deny there are no subagents.
SUBAGENT_PERMISSION = "task"
NO_SUBAGENTS = ("subagents are not started under approvals ask or deny: their tool calls "
                "could not be asked; do the work in this conversation")
class ServerGone(BridgeError):
    """The server ended its event stream before the turn ended."""


# -- the server --------------------------------------------------------------------------------


class Server:
    """`<program> serve` on a free loopback port, a child of this process in its process
    group (whoever ends the group ends it too); its stdout goes to `log_path`, its stderr
    there and to this program's stderr."""

    def __init__(self, run: RunArgs, log_path: Path) -> None:
        self.program = run.program
        self.options = run.server_options
        self.log_path = log_path
        self.port = free_port()
        self._password = secrets.token_urlsafe(32)
        self.client = Client(self.port, self._password, str(Path.cwd()))
        self.process: asyncio.subprocess.Process | None = None
        self._log: IO[bytes] | None = None
        self._relay: asyncio.Task[None] | None = None

    async def start(self) -> None:
        env = {**os.environ, "OPENCODE_SERVER_PASSWORD": self._password,
               "OPENCODE_SERVER_USERNAME": USERNAME}
        self._log = self.log_path.open("ab")
        try:
            self.process = await asyncio.create_subprocess_exec(
                self.program, "serve", "--port", str(self.port), "--hostname", "127.0.0.1",
                *self.options, stdin=asyncio.subprocess.DEVNULL, stdout=self._log,
                stderr=asyncio.subprocess.PIPE, env=env)
        except OSError as exc:
            raise BridgeError(f"cannot start {self.program}: {exc.strerror or exc}") from None
        self._relay = asyncio.get_running_loop().create_task(self._relay_stderr())

    async def _relay_stderr(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        assert self._log is not None
        while chunk := await self.process.stderr.read(65536):
            # drained whatever happens to the copies: a full pipe would stop the server
            with contextlib.suppress(OSError, ValueError):
                self._log.write(chunk)
                self._log.flush()
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.buffer.write(chunk)
                sys.stderr.flush()

    async def wait_ready(self) -> None:
        """Until the server answers (HEALTH_TIMEOUT_S at most)."""
        assert self.process is not None
        deadline = time.monotonic() + HEALTH_TIMEOUT_S
        while True:
            if self.process.returncode is not None:
                raise BridgeError(f"`{self.program} serve` exited with "
                                  f"{self.process.returncode} before it answered (its output: "
                                  f"{self.log_path})")
            with contextlib.suppress(OSError, NoAnswer, asyncio.IncompleteReadError):
                await self.client.call("GET", "/global/health", timeout_s=HEALTH_ATTEMPT_S)
                return
            if time.monotonic() >= deadline:
                raise BridgeError(f"`{self.program} serve` did not answer on 127.0.0.1:"
                                  f"{self.port} within {HEALTH_TIMEOUT_S:g} s (its output: "
                                  f"{self.log_path})")
            await asyncio.sleep(0.1)

    async def exit_note(self) -> str:
        """" (it exited with N)" if the server has exited (or does within a second: its
        connections close just before its exit is seen)."""
        if self.process is None:
            return ""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.process.wait()), 1.0)
        code = self.process.returncode
        return f" (it exited with {code})" if code is not None else ""

    async def stop(self) -> None:
        """SIGTERM, STOP_GRACE_S, then SIGKILL; by its pid."""
        process = self.process
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), STOP_GRACE_S)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        if self._relay is not None:
            # a process the server started may still hold its stderr: stop reading it soon
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._relay, 1.0)
        if self._log is not None:
            self._log.close()


# -- the run -----------------------------------------------------------------------------------


class Output:
    """stdout: one JSON event a line, nothing else."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.session_id: str | None = None  # for this program's own error events

    def line(self, event: Mapping[str, Any]) -> None:
        self.stream.write(orjson.dumps(event) + b"\n")
        self.stream.flush()

    def error(self, message: str) -> None:
        event: dict[str, Any] = {"type": "error", "timestamp": int(time.time() * 1000)}
        if self.session_id:
            event["sessionID"] = self.session_id
        event["error"] = {"name": "RalphBridgeError", "data": {"message": message}}
        self.line(event)


@dataclass(frozen=True)
class _Failed:
    """A helper task's failure, which ends the run."""

    error: BaseException


class Bridge:
    """One turn: the session made to ask, the prompt sent, its requests answered."""

    def __init__(self, run: RunArgs, prompt: str, spec: PolicyFile, desk: ApprovalDesk,
                 client: Client, out: Output) -> None:
        self.run = run
        self.prompt = prompt
        self.spec = spec
        self.desk = desk
        self.client = client
        self.out = out
        self._queue: asyncio.Queue[dict[str, Any] | _Failed | None] = asyncio.Queue()
        self._tasks: set[asyncio.Task[None]] = set()

    async def turn(self) -> Turn:
        events = self.client.events()
        try:  # the subscription is in place once its first event came: then prompt
            first = await asyncio.wait_for(anext(events, None), REQUEST_TIMEOUT_S)
        except TimeoutError:
            raise NoAnswer("opencode's server sent no event within "
                           f"{REQUEST_TIMEOUT_S:g} s of the subscription") from None
        if first is None:
            raise ServerGone("opencode's server ended its event stream at once")
        self._spawn(self._pump(events))
        try:
            session_id = await self._open_session()
            self.out.session_id = session_id
            turn = Turn(session_id, thinking=self.run.thinking)
            await self.client.call("POST", f"/session/{session_id}/prompt_async",
                                   self._prompt_body())
            while not turn.ended:
                item = await self._queue.get()
                if item is None:
                    raise ServerGone("opencode's server ended its event stream before the "
                                     "turn ended")
                if isinstance(item, _Failed):
                    raise item.error
                self._react(turn, turn.feed(item))
        finally:
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
        return turn

    def _prompt_body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"parts": [{"type": "text", "text": self.prompt}]}
        if self.run.model is not None:
            body["model"] = {"providerID": self.run.model[0], "modelID": self.run.model[1]}
        if self.run.agent is not None:
            body["agent"] = self.run.agent
        if self.run.variant is not None:
            body["variant"] = self.run.variant
        return body

    async def _open_session(self) -> str:
        """The session to prompt, asking for every tool call: a new one, or --session's."""
        if self.run.session is None:
            body: dict[str, Any] = {"permission": [ASK_ALL, *RUN_RULES]}
            if self.run.title:
                body["title"] = self.run.title
            info = await self.client.call("POST", "/session", body)
        else:
            path = f"/session/{quote(self.run.session, safe='')}"
            try:
                info = await self.client.call("GET", path)
            except HttpError as exc:
                if exc.status != 404:
                    raise
                raise BridgeError(f"opencode has no session {self.run.session} (Session not "
                                  "found)") from None
            if isinstance(info, dict) and (added := asking(info.get("permission"))):
                await self.client.call("PATCH", path, {"permission": added})
        session_id = info.get("id") if isinstance(info, dict) else None
        if not isinstance(session_id, str):
            raise BridgeError(f"opencode's server gave no session id: {str(info)[:200]}")
        return session_id

    def _react(self, turn: Turn, reaction: Reaction) -> None:
        for line in reaction.lines:
            self.out.line(line)
        if reaction.child is not None:
            self._spawn(self._make_ask(reaction.child))
        if reaction.ask is not None:
            self._spawn(self._answer(reaction.ask))
        if reaction.foreign is not None:  # the server is this run's: nobody else would answer
            self._spawn(self._reply(reaction.foreign, {
                "reply": "reject", "message": "not a session Ralph runs"}))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self._queue.put_nowait(_Failed(task.exception()))  # type: ignore[arg-type]

    async def _pump(self, events: AsyncIterator[dict[str, Any]]) -> None:
        async for event in events:
            self._queue.put_nowait(event)
        self._queue.put_nowait(None)

    async def _make_ask(self, info: Mapping[str, Any]) -> None:
        """A subagent's session inherits only its parent's denials: make it ask as well."""
        added = asking(info.get("permission"))
        if added:
            await self.client.call("PATCH", f"/session/{quote(str(info['id']), safe='')}",
                                   {"permission": added})

    async def _answer(self, ask: Ask) -> None:
        """Decide by the policy (denied if deciding fails) and reply: a rejection always
        carries the reason, which keeps the agent going and tells the model why."""
        try:
            if ask.tool_name == SUBAGENT_PERMISSION:
                answer = self._no_subagents(ask)
            else:
                answer = await self.spec.policy.decide(self.desk, ask.tool_use_id,
                                                       ask.tool_name, ask.tool_input,
                                                       self.spec.cwd)
            reply = ({"reply": "once"} if answer.decision == "allow"
                     else {"reply": "reject", "message": reason(answer)})
        except Exception as exc:
            # denied; and the request must not stay pending for someone to answer in vain
            self.desk.close_with_error(ask.tool_use_id, exc)
            reply = {"reply": "reject", "message": "Ralph could not decide on this tool call, "
                     f"so it is denied: {type(exc).__name__}: {exc}"}
        await self._reply(ask.request_id, reply)

    def _no_subagents(self, ask: Ask) -> ApprovalAnswer:
        """A subagent's tool calls would not be asked (opencode does not apply the rules
        added to its conversation): it is not started, and the request says so."""
        self.desk.request(ask.tool_use_id, ask.tool_name, ask.tool_input)
        try:
            return self.desk.answer(ask.tool_use_id, "deny", NO_SUBAGENTS, by="ralph")
        except NotPending:
            answer = self.desk.answers().get(ask.tool_use_id)
            if answer is None:
                raise
            return answer

    async def _reply(self, request_id: str, reply: dict[str, str]) -> None:
        try:
            await self.client.call("POST", f"/permission/{quote(request_id, safe='')}/reply",
                                   reply)
        except HttpError as exc:
            if exc.status != 404:  # 404: the request is gone (its session was aborted)
                raise


async def bridge(policy: str, run: RunArgs, prompt: str, out: Output) -> int:
    """Run the turn; the exit code."""
    spec = PolicyFile.load(policy)
    server = Server(run, spec.folder / SERVER_LOG)
    with Store(spec.store) as store:
        desk = ApprovalDesk(store, spec.session_id, spec.folder)
        try:
            await server.start()
            await server.wait_ready()
            try:
                turn = await Bridge(run, prompt, spec, desk, server.client, out).turn()
            except ServerGone as exc:
                raise BridgeError(f"{exc}{await server.exit_note()} (its output: "
                                  f"{server.log_path})") from None
            except (OSError, asyncio.IncompleteReadError) as exc:
                raise BridgeError(f"lost opencode's server{await server.exit_note()}: "
                                  f"{type(exc).__name__}: {exc} (its output: "
                                  f"{server.log_path})") from None
        finally:
            await server.stop()
    return 1 if turn.failed else 0


async def _until_signalled(policy: str, run: RunArgs, prompt: str, out: Output) -> int:
    """`bridge`, ended cleanly (the server stopped) by SIGTERM or SIGINT: 128 + the signal."""
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None
    received: list[int] = []

    def stop(signum: int) -> None:
        received.append(signum)
        main.cancel()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop, signum)
    try:
        return await bridge(policy, run, prompt, out)
    except asyncio.CancelledError:
        if received:
            return 128 + received[0]
        raise


def _stdin() -> str | None:
    """What came on stdin (None: a terminal, or no stdin)."""
    try:
        if sys.stdin is None or sys.stdin.isatty():
            return None
        return sys.stdin.buffer.read().decode("utf-8", "replace")
    except (OSError, ValueError):
        return None


def _say(message: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(message.replace("\n", " ") + "\n")
        sys.stderr.flush()


def main(argv: Sequence[str]) -> int:
    try:
        policy, run = parse_command_line(argv)
        prompt = prompt_text(run.message, _stdin())
        if not prompt.strip():
            raise UsageError("error: missing required argument: a message (on stdin, or "
                             "after `run`)")
    except UsageError as exc:
        _say(str(exc))
        return EXIT_USAGE
    out = Output(sys.stdout.buffer)
    try:
        return asyncio.run(_until_signalled(policy, run, prompt, out))
    except Exception as exc:  # one line on stderr, an error event on stdout: no traceback
        message = str(exc) if isinstance(exc, BridgeError) else f"{type(exc).__name__}: {exc}"
        _say(f"ralph (opencode under approvals): {message}")
        with contextlib.suppress(OSError, ValueError):  # stdout may be closed by now
            out.error(message)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

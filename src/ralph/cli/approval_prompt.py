"""Tool-permission requests asked on the terminal: `ralph agent run --approvals ask`.

Each request of the session that is still pending when it is seen is asked on stderr
(`Allow Bash: rm -rf build? [y/N]`) and answered from the terminal's next line: y or yes
allows, anything else denies. A request answered meanwhile by another face (`ralph agent
approve`, a browser) or by its timeout is dropped from the terminal with what was decided.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys

from ralph.approvals.desk import REQUESTED, ApprovalRequest, NotPending
from ralph.approvals.rules import Decision
from ralph.cli.output import terminal_safe
from ralph.cli.render import approval_subject
from ralph.sessions import SessionService, session_stream

YES = ("y", "yes")


class TerminalLines:
    """Lines typed on the terminal (stdin), read without blocking the event loop."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.lines: asyncio.Queue[str | None] = asyncio.Queue()
        self._partial = b""
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(fd, self._readable)

    def _readable(self) -> None:
        try:
            data = os.read(self.fd, 4096)
        except OSError:
            data = b""
        if not data:  # end of input: no more answers from here
            self._loop.remove_reader(self.fd)
            self.lines.put_nowait(None)
            return
        self._partial += data
        *complete, self._partial = self._partial.split(b"\n")
        for line in complete:
            self.lines.put_nowait(line.decode("utf-8", "replace").strip())

    def drop_typed_ahead(self) -> None:
        """Forget lines typed before the question was asked (they answered nothing)."""
        while not self.lines.empty():
            if self.lines.get_nowait() is None:
                self.lines.put_nowait(None)
                return

    def close(self) -> None:
        with contextlib.suppress(ValueError, OSError):
            self._loop.remove_reader(self.fd)


async def ask_on_terminal(sessions: SessionService, session_id: str) -> None:
    """Ask every pending request of the session on the terminal until cancelled."""
    terminal = TerminalLines(sys.stdin.fileno())
    desk = sessions.desk(session_id)
    try:
        async with sessions.store.subscribe(topic=REQUESTED,
                                            stream=session_stream(session_id)) as requests:
            async for frame in requests:
                request = next((r for r in desk.pending() if r.seq == frame.seq), None)
                if request is not None and not await _ask(sessions, session_id, request,
                                                          terminal):
                    return  # the terminal closed: `ralph agent approve` still answers
    finally:
        terminal.close()


async def _ask(sessions: SessionService, session_id: str, request: ApprovalRequest,
               terminal: TerminalLines) -> bool:
    """Ask one request; False once the terminal has no more lines to give."""
    terminal.drop_typed_ahead()
    question = approval_subject({"tool_name": request.tool_name, "input": request.input})
    # On a line of its own: the session's live view goes on writing while it waits.
    _say(f"Allow {question}? [y/N]")
    typed = asyncio.ensure_future(terminal.lines.get())
    elsewhere = asyncio.ensure_future(sessions.desk(session_id).answer_of(request))
    try:
        await asyncio.wait([typed, elsewhere], return_when=asyncio.FIRST_COMPLETED)
        if elsewhere.done():
            answer = elsewhere.result()
            _say(f"  (answered elsewhere: {answer.decision} by {terminal_safe(answer.by)})")
            return True
        line = typed.result()
        if line is None:
            _say("  (no more terminal input: answer with `ralph agent approve`)")
            return False
        decision: Decision = "allow" if line.lower() in YES else "deny"
        try:
            sessions.answer(session_id, request.tool_use_id, decision,
                            "" if decision == "allow" else "denied on the terminal",
                            by="terminal")
        except NotPending as exc:
            _say(f"  ({exc})")
        return True
    finally:
        for task in (typed, elsewhere):
            task.cancel()


def _say(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()

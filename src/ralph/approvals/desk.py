"""Tool-permission requests of one agent session, asked and answered through the store.

Whatever asks (Claude Code's hook, opencode's server follower) records
`session.approval_requested` {session_id, tool_use_id, tool_name, input} in the session's
stream and waits for the `session.approval_answered` {session_id, tool_use_id, decision,
message, by, rule} of that call, which any process may record: a person through any face, a
rule, or the timeout. One answer per request: answering takes the session's
`approvals.lock`, and a request already answered is not pending any more (NotPending).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ralph.approvals.rules import SHELL_KEYS, Decision
from ralph.errors import RalphError
from ralph.flock import FileLock
from ralph.store import Frame, Store

REQUESTED = "session.approval_requested"
ANSWERED = "session.approval_answered"
INPUT_STRING_CHARS = 4000  # a recorded input keeps this much of each string (a file's text)
INPUT_ITEMS = 200  # and this many entries of each list and object
COMMAND_CHARS = 64 * 1024  # and of a shell command this much: a person reads it whole
CUT_MARK = "… (cut: the whole is "
LOCK_WAIT_S = 10.0


class NotPending(RalphError):
    """The request is not waiting for an answer (answered already, unknown, or its session
    has ended)."""


@dataclass(frozen=True)
class ApprovalRequest:
    tool_use_id: str
    tool_name: str
    input: Any
    seq: int
    ts: str


@dataclass(frozen=True)
class ApprovalAnswer:
    tool_use_id: str
    decision: Decision
    message: str
    by: str
    rule: str | None
    seq: int


def bounded(value: Any, depth: int = 0, limit: int = INPUT_STRING_CHARS) -> Any:
    """`value` with every string cut to `limit` characters (a command: COMMAND_CHARS),
    every list and object to INPUT_ITEMS entries (the rest counted), nested at most 20
    deep. A cut string ends with CUT_MARK and its length, so that nobody decides on a
    command thinking they saw all of it."""
    if isinstance(value, str):
        return value if len(value) <= limit else (
            value[:limit] + f"{CUT_MARK}{len(value)} characters)")
    if depth >= 20:
        return "…"
    if isinstance(value, Mapping):
        items = list(value.items())
        kept = {str(k): bounded(v, depth + 1, COMMAND_CHARS if k in SHELL_KEYS else
                                INPUT_STRING_CHARS) for k, v in items[:INPUT_ITEMS]}
        if len(items) > INPUT_ITEMS:
            kept["…"] = f"{len(items) - INPUT_ITEMS} more keys"
        return kept
    if isinstance(value, list | tuple):
        cut = [bounded(v, depth + 1, limit) for v in value[:INPUT_ITEMS]]
        return cut + ([f"… {len(value) - INPUT_ITEMS} more"] if len(value) > INPUT_ITEMS
                      else [])
    return value


class ApprovalDesk:
    """The requests of the session `session_id`, whose folder (.ralph/sessions/<id>) holds
    the answering lock."""

    def __init__(self, store: Store, session_id: str, folder: Path) -> None:
        self.store = store
        self.session_id = session_id
        self.stream = f"sessions/{session_id}"
        self.lock_path = folder / "approvals.lock"

    def request(self, tool_use_id: str, tool_name: str, tool_input: Any) -> ApprovalRequest:
        """Record the request (once: a pending request of the same id is returned as is)."""
        for waiting in self.pending():
            if waiting.tool_use_id == tool_use_id:
                return waiting
        frame = self.store.append(REQUESTED, {
            "session_id": self.session_id, "tool_use_id": tool_use_id,
            "tool_name": tool_name, "input": bounded(tool_input)}, stream=self.stream)
        return _request(frame)

    def requests(self) -> list[ApprovalRequest]:
        return [_request(f) for f in self.store.read(topic=REQUESTED, stream=self.stream)]

    def answers(self) -> dict[str, ApprovalAnswer]:
        """The answer of each answered request, by tool_use_id (the first one counts)."""
        found: dict[str, ApprovalAnswer] = {}
        for frame in self.store.read(topic=ANSWERED, stream=self.stream):
            found.setdefault(str(frame.meta.get("tool_use_id")), _answer(frame))
        return found

    def pending(self) -> list[ApprovalRequest]:
        """Requests without an answer, oldest first (whether the session still runs is the
        caller's to know)."""
        answered = self.answers()
        return [r for r in self.requests() if r.tool_use_id not in answered]

    def answer(self, tool_use_id: str, decision: Decision, message: str = "", *, by: str,
               rule: str | None = None) -> ApprovalAnswer:
        """Record the answer; NotPending if there is no such request or it was answered."""
        if decision not in ("allow", "deny"):
            raise ValueError(f"a decision is allow or deny, not {decision!r}")
        lock = FileLock(self.lock_path)
        deadline = time.monotonic() + LOCK_WAIT_S
        while not lock.try_acquire():
            if time.monotonic() >= deadline:
                raise NotPending(f"session {self.session_id}: another answer is being "
                                 f"recorded ({self.lock_path} stays locked)")
            time.sleep(0.005)
        try:
            requests = {r.tool_use_id for r in self.requests()}
            if tool_use_id not in requests:
                raise NotPending(f"session {self.session_id} has no permission request "
                                 f"{tool_use_id!r}")
            earlier = self.answers().get(tool_use_id)
            if earlier is not None:
                raise NotPending(f"request {tool_use_id} of session {self.session_id} was "
                                 f"answered already ({earlier.decision}, by {earlier.by})")
            frame = self.store.append(ANSWERED, {
                "session_id": self.session_id, "tool_use_id": tool_use_id,
                "decision": decision, "message": message, "by": by, "rule": rule},
                stream=self.stream)
            return _answer(frame)
        finally:
            lock.release()

    def close_with_error(self, tool_use_id: str, error: BaseException) -> None:
        """Deny a pending request whose asker failed (best effort: recorded if the store
        and the lock allow), so that it does not wait for an answer nobody would act on."""
        with contextlib.suppress(Exception):  # answered already, or the store failed
            self.answer(tool_use_id, "deny", f"{type(error).__name__}: {error}"[:500],
                        by="error")

    async def wait(self, request: ApprovalRequest, timeout_s: float) -> ApprovalAnswer:
        """The answer to `request`; after `timeout_s` without one, it is denied ("timeout")."""
        import asyncio  # noqa: PLC0415 - the hook imports it only when it waits for a person

        try:
            return await asyncio.wait_for(self.answer_of(request), timeout_s)
        except TimeoutError:
            pass
        try:
            return self.answer(request.tool_use_id, "deny",
                               f"nobody answered within {timeout_s:g} s", by="timeout")
        except NotPending:  # answered just now
            answer = self.answers().get(request.tool_use_id)
            if answer is None:
                raise
            return answer

    async def answer_of(self, request: ApprovalRequest) -> ApprovalAnswer:
        """The answer to `request` once anyone records it (waits for as long as it takes)."""
        async with self.store.subscribe(topic=ANSWERED, stream=self.stream,
                                        after_seq=request.seq) as frames:
            async for frame in frames:
                if frame.meta.get("tool_use_id") == request.tool_use_id:
                    return _answer(frame)
        raise NotPending(f"the store closed before request {request.tool_use_id} was "
                         "answered")


def _request(frame: Frame) -> ApprovalRequest:
    meta = frame.meta
    return ApprovalRequest(str(meta.get("tool_use_id")), str(meta.get("tool_name")),
                           meta.get("input"), frame.seq, frame.ts)


def _answer(frame: Frame) -> ApprovalAnswer:
    meta = frame.meta
    decision: Decision = "allow" if meta.get("decision") == "allow" else "deny"
    return ApprovalAnswer(str(meta.get("tool_use_id")), decision, str(meta.get("message") or ""),
                          str(meta.get("by") or ""),
                          meta.get("rule") if isinstance(meta.get("rule"), str) else None,
                          frame.seq)

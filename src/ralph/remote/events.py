"""The remote API's events: every one a projection of a store frame (agent sessions, the
loop, the repository watcher), carrying the frame's `seq`, so that a client that reconnects
catches up from the store; the heartbeat is the only event without one.

An event is encoded once for all the clients that get it, in the shape each one speaks:
a JSON-RPC notification, or the legacy `{"event", "timestamp", "payload"}` message.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from functools import cached_property
from typing import Any, Literal

from ralph.remote.agent_events import agent_events
from ralph.remote.loop_events import loop_events
from ralph.remote.note_events import note_events
from ralph.remote.repo_events import repo_events
from ralph.rpc.envelope import notification
from ralph.rpc.jsoncodec import dumps
from ralph.store import Frame

Event = tuple[str, dict[str, Any]]
Shape = Literal["jsonrpc", "legacy"]
Projector = Callable[[Frame], list[Event]]
EVENT_PREFIX = "event/"


def projector(prompt: Callable[[str | None], str]) -> Projector:
    """The events of one frame, from every projection; `prompt(hash)` reads a text from
    the content store (a prompt, a final answer, a note)."""

    def project(frame: Frame) -> list[Event]:
        return (agent_events(frame, prompt) or loop_events(frame) or repo_events(frame)
                or note_events(frame, prompt))

    return project


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def legacy_message(name: str, payload: dict[str, Any], request_id: Any = None) -> str:
    """`{"event": NAME, "timestamp": ..., "payload": {...}, "request_id": ...}` (request_id
    only when there is one)."""
    message: dict[str, Any] = {"event": name, "timestamp": utc_now(), "payload": payload}
    if request_id is not None:
        message["request_id"] = request_id
    return dumps(message).decode()


def legacy_payload(name: str, params: dict[str, Any]) -> dict[str, Any]:
    """The legacy payload of an event: its params, plus the names the legacy clients read
    (the heartbeat's `claude_status`)."""
    if name == "heartbeat":
        return {**params, "claude_status": params.get("agent_status")}
    return params


class Outgoing:
    """One event on its way to clients, encoded lazily, once per shape."""

    __slots__ = ("__dict__", "method", "params", "seq")

    def __init__(self, method: str, params: dict[str, Any], seq: int | None = None) -> None:
        self.method = method
        self.params = params
        self.seq = seq

    @cached_property
    def jsonrpc(self) -> str:
        return notification(self.method, self.params).decode()

    @cached_property
    def legacy(self) -> str:
        name = self.method.removeprefix(EVENT_PREFIX)
        return legacy_message(name, legacy_payload(name, self.params))

    def text(self, shape: Shape) -> str:
        return self.legacy if shape == "legacy" else self.jsonrpc

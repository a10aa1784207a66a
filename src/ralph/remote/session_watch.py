"""`session/watch` and `session/unwatch`: one watched session per client.

Every client gets every session's live events anyway; watching one adds its history. For a
Ralph session, its events before this connection's (those it has not had) are replayed,
marked `replay: true`, before the answer. For a conversation an agent CLI keeps itself
(`claude:<id>`, `codex:<id>` of `session/list`), its messages are sent as
`event/agent_message` {session_id, role, content, timestamp} (the earlier ones marked
`replay: true`), then the ones the CLI appends, until `session/unwatch`, another watch, or
the end of the connection. Those come from the CLI's file, not the store: they carry no
`seq`.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ralph.remote.agent_methods import SESSION_NOT_FOUND
from ralph.remote.clients import CURRENT, Client, Hub
from ralph.remote.events import Outgoing
from ralph.rpc import Registry, RpcError
from ralph.sessions import SessionService, UnknownSession, session_stream
from ralph.sessions.native import NativeConversation, NativeMessage, TranscriptTail

TAIL_POLL_S = 0.5  # how often a watched CLI conversation's file is looked at
HISTORY_MESSAGES = 1000  # of a CLI conversation, the last ones sent when it is watched
AGENT_MESSAGE = "event/agent_message"


class SessionWatchParams(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    session_id: str = Field(min_length=1)


class SessionWatchResult(BaseModel):
    status: Literal["watching"]
    session_id: str
    watching: bool
    replayed: int  # extension: the earlier events just sent


class SessionUnwatchResult(BaseModel):
    status: Literal["unwatched"]
    session_id: str | None  # the session no longer watched (null: none was)
    watching: bool


def _client() -> Client:
    client = CURRENT.get()
    if client is None:  # (only a WebSocket connection calls methods)
        raise RpcError(SESSION_NOT_FOUND, "Session not found", {"reason": "no connection"})
    return client


def unwatch(client: Client) -> str | None:
    """Stop watching; the session that was watched."""
    watched, client.watching = client.watching, None
    if client.watch_task is not None:
        client.watch_task.cancel()
        client.watch_task = None
    return watched


def message_event(session_id: str, message: NativeMessage, *, replay: bool) -> Outgoing:
    params: dict[str, object] = {"session_id": session_id, "role": message.role,
                                 "content": message.text, "timestamp": message.at}
    if replay:
        params["replay"] = True
    return Outgoing(AGENT_MESSAGE, params)


def read_all(tail: TranscriptTail) -> list[NativeMessage]:
    """The last HISTORY_MESSAGES messages the file holds now."""
    found: deque[NativeMessage] = deque(maxlen=HISTORY_MESSAGES)
    while True:
        offset = tail.offset
        found.extend(tail.read())
        if tail.offset == offset:
            return list(found)


async def follow(client: Client, session_id: str, tail: TranscriptTail) -> None:
    """The messages a CLI appends to a watched conversation, to `client`."""
    while True:
        await asyncio.sleep(TAIL_POLL_S)
        for message in await asyncio.to_thread(tail.read):
            client.deliver(message_event(session_id, message, replay=False))


def register(registry: Registry, hub: Hub, sessions: SessionService) -> None:
    not_found = [(SESSION_NOT_FOUND, "Session not found")]

    def find_native(session_id: str) -> NativeConversation | None:
        return next((c for c in sessions.native() if c.id == session_id), None)

    @registry.method("session/watch", params=SessionWatchParams, result=SessionWatchResult,
                     errors=not_found,
                     summary="Watch a session: its history, then its live events.")
    async def session_watch(params: SessionWatchParams) -> SessionWatchResult:
        client = _client()
        session_id = params.session_id
        conversation = None
        try:
            sessions.get(session_id)
        except UnknownSession:
            conversation = await asyncio.to_thread(find_native, session_id)
            if conversation is None:
                raise RpcError(SESSION_NOT_FOUND, "Session not found",
                               {"session_id": session_id}) from None
        async with client.replaying:  # one watch (or catch-up) at a time
            unwatch(client)
            client.watching = session_id
            client.hold()  # the live events come after the history
            try:
                if conversation is None:
                    replayed = await client.replay(hub.events_between(
                        0, client.history_from, stream=session_stream(session_id),
                        mark={"replay": True}))
                else:
                    tail = TranscriptTail(conversation)
                    history = await asyncio.to_thread(read_all, tail)
                    replayed = await client.replay(
                        message_event(session_id, m, replay=True) for m in history)
                    client.watch_task = asyncio.get_running_loop().create_task(
                        follow(client, session_id, tail))
            finally:
                client.release()
        return SessionWatchResult(status="watching", session_id=session_id, watching=True,
                                  replayed=replayed)

    @registry.method("session/unwatch", result=SessionUnwatchResult,
                     summary="Stop watching the watched session.")
    async def session_unwatch() -> SessionUnwatchResult:
        return SessionUnwatchResult(status="unwatched", session_id=unwatch(_client()),
                                    watching=False)

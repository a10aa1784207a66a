"""Agent sessions: run any agent on a prompt outside the loop, read, wait for and stop it from
any process (ralph.sessions.service); each session is the store stream `sessions/<id>`."""

from ralph.sessions.records import SessionInfo, SessionStatus, session_stream
from ralph.sessions.service import (
    AgentBusy,
    SessionError,
    SessionService,
    UnknownSession,
    new_session_id,
)

__all__ = [
    "AgentBusy",
    "SessionError",
    "SessionInfo",
    "SessionService",
    "SessionStatus",
    "UnknownSession",
    "new_session_id",
    "session_stream",
]

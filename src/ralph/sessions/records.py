"""An agent session as the store tells it: a projection of its stream `sessions/<id>`.

Frames of a session (topics): `session.started` {session_id, agent, title, cwd, argv,
continue_from, approvals, owner_pid, owner, log_path}, with the prompt as content;
`session.process` {pgid}; the agent's normalized events (`agent.started`, `agent.output`,
`agent.usage`, `agent.finished`, ..., as the loop records them); `session.stop_requested`
{session_id, by}; and `session.finished` {session_id, status, exit_code, agent_session_id,
message, usage, cost_usd, duration_s}, with the final text as content. The first
`session.finished` of a stream is the one that counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

SessionStatus = Literal["running", "completed", "failed", "stopped", "timed_out", "lost"]
ENDED: tuple[SessionStatus, ...] = ("completed", "failed", "stopped", "timed_out", "lost")
STREAM_PREFIX = "sessions/"


def session_stream(session_id: str) -> str:
    return STREAM_PREFIX + session_id


@dataclass
class SessionInfo:
    """One agent session: what it was asked and, once it ended, how."""

    session_id: str
    agent: str
    title: str | None
    status: SessionStatus
    cwd: str
    argv: list[str]
    continue_from: str | None
    approvals: str
    started_at: str
    owner_pid: int
    owner: str | None  # the owning process's containment id (ralph.containment.owner_id)
    prompt_hash: str | None
    log_path: str
    finished_at: str | None = None
    exit_code: int | None = None
    agent_session_id: str | None = None
    message: str | None = None
    final_text_hash: str | None = None
    usage: dict[str, Any] | None = None
    cost_usd: float | None = None
    duration_s: float | None = None

    @property
    def ended(self) -> bool:
        return self.status != "running"


def project(started: dict[str, Any], started_ts: str, prompt_hash: str | None,
            finished: dict[str, Any] | None, finished_ts: str | None,
            final_hash: str | None) -> SessionInfo:
    """The session from its `session.started` frame's meta and its `session.finished`
    frame's meta (None while it runs)."""
    info = SessionInfo(
        session_id=started["session_id"], agent=started["agent"], title=started.get("title"),
        status="running", cwd=started["cwd"], argv=list(started.get("argv") or []),
        continue_from=started.get("continue_from"), approvals=started.get("approvals", "auto"),
        started_at=started_ts, owner_pid=int(started.get("owner_pid", 0)),
        owner=started.get("owner") if isinstance(started.get("owner"), str) else None,
        prompt_hash=prompt_hash, log_path=started.get("log_path", ""))
    if finished is not None:
        info.status = finished["status"]
        info.finished_at = finished_ts
        info.exit_code = finished.get("exit_code")
        info.agent_session_id = finished.get("agent_session_id")
        info.message = finished.get("message")
        info.final_text_hash = final_hash
        info.usage = finished.get("usage")
        info.cost_usd = finished.get("cost_usd")
        info.duration_s = finished.get("duration_s")
    return info

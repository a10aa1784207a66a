"""The params of the remote API's events (docs/protocols/remote.md), for the OpenRPC
document; the loop's are in ralph.remote.loop_events. Extra fields are allowed: each event
may carry extensions (`seq`, `delta`, `pieces`, `replay`, ...)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


class _Event(BaseModel):
    model_config = ConfigDict(extra="allow")


class _Stored(_Event):
    seq: int
    """The store frame it projects (where a reconnecting client resumes)."""


class Heartbeat(_Event):
    server_time: str
    sequence: int
    agent_status: str
    uptime_seconds: int


class AgentStarted(_Stored):
    session_id: str
    agent_type: str | None
    prompt: str


class AgentOutput(_Stored):
    session_id: str
    type: Literal["text", "thinking", "tool_use", "tool_result", "error",
                  "permission_request"]
    content: str
    chars: int | None = None
    tool_name: str | None = None
    tool_use_id: str | None = None
    input: Any = None


class AgentStopped(_Stored):
    session_id: str
    reason: Literal["completed", "stopped", "error", "timeout"]
    message: str | None = None


class AgentStatus(_Stored):
    session_id: str
    state: Literal["idle", "running", "waiting", "stopped", "error"]


class AgentMessage(_Event):
    session_id: str
    role: Literal["user", "assistant"]
    content: str
    timestamp: str | None


class AgentLog(_Stored):
    session_id: str
    stream: Literal["stderr"]
    line: str
    chars: int


class FileChanged(_Stored):
    path: str
    change: Literal["created", "modified", "deleted", "renamed"]
    old_path: str | None = None


class GitStatusChanged(_Stored):
    branch: str
    staged: list[str]
    unstaged: list[str]
    untracked: list[str]


class NoteAdded(_Stored):
    """A note, as `notes/list` gives it (an extension)."""

    id: str
    ts: str
    session: str
    type: str
    iteration: int | None
    text: str


EVENT_MODELS: dict[str, tuple[type[BaseModel], str]] = {
    "event/heartbeat": (Heartbeat, "Every --heartbeat seconds while a client is connected."),
    "event/agent_started": (AgentStarted, "An agent session started."),
    "event/agent_output": (AgentOutput, "An agent's output, or a permission request."),
    "event/agent_stopped": (AgentStopped, "An agent session ended."),
    "event/agent_status": (AgentStatus, "An agent session's state changed."),
    "event/agent_log": (AgentLog, "A line (or lines) the agent CLI wrote on stderr."),
    "event/agent_message": (AgentMessage, "An agent's whole final answer; a message of a "
                                          "watched CLI conversation."),
    "event/file_changed": (FileChanged, "A file of the project changed."),
    "event/git_status_changed": (GitStatusChanged, "The git status changed."),
    "event/note_added": (NoteAdded, "A note was recorded (an extension)."),
}

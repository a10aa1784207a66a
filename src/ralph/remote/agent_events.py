"""Agent sessions' store frames as the remote API's events (docs/protocols/remote.md):
`event/agent_started`, `event/agent_output`, `event/agent_log` (the CLI's stderr),
`event/agent_message` (the agent's final answer, whole), `event/agent_stopped`,
`event/agent_status`.
Each carries the frame's store `seq` (an extension: where a reconnecting client resumes).
A projection: any session, whichever process runs it, is seen the same way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ralph.sessions.records import STREAM_PREFIX
from ralph.store import Frame

Event = tuple[str, dict[str, Any]]

# agent.output kinds as the document's output types
OUTPUT_TYPES = {"text": "text", "reasoning": "thinking", "tool_use": "tool_use",
                "tool_result": "tool_result", "error": "error"}
# session.finished statuses as agent_stopped reasons (the document's four)
STOP_REASONS = {"completed": "completed", "stopped": "stopped", "timed_out": "timeout",
                "failed": "error", "lost": "error"}
# ... and the agent's state after it
END_STATES = {"completed": "idle", "stopped": "stopped", "timed_out": "error",
              "failed": "error", "lost": "error"}


def agent_events(frame: Frame, prompt: Callable[[str | None], str]) -> list[Event]:
    """The events of one frame of a session's stream (none for other frames). `prompt(hash)`
    reads a text (the prompt, the agent's final answer) from the content store."""
    if not frame.stream.startswith(STREAM_PREFIX):
        return []
    session_id = frame.stream.removeprefix(STREAM_PREFIX)
    meta = frame.meta
    base = {"session_id": session_id, "seq": frame.seq}
    topic = frame.topic
    if topic == "session.started":
        return [("event/agent_started", {**base, "agent_type": meta.get("agent"),
                                         "prompt": prompt(frame.hash)}),
                ("event/agent_status", {**base, "state": "running"})]
    if topic == "agent.output" and meta.get("stream") == "stderr":
        # the CLI's diagnostics: a log line (and an agent error too, when it is one)
        line = {**base, "stream": "stderr", "line": meta.get("content", ""),
                "chars": meta.get("chars", len(str(meta.get("content", ""))))}
        events: list[Event] = [("event/agent_log", line)]
        if meta.get("kind") == "error":
            events.append(("event/agent_output", {**base, "type": "error",
                                                  "content": line["line"],
                                                  "chars": line["chars"]}))
        return events
    if topic == "agent.output":
        kind = OUTPUT_TYPES.get(str(meta.get("kind")), "text")
        params = {**base, "type": kind, "content": meta.get("content", "")}
        if meta.get("tool"):
            params["tool_name"] = meta["tool"]
        # extensions: the whole piece's length (`content` holds its first 1,000 characters),
        # and whether it continues the piece before (streamed text)
        params["chars"] = meta.get("chars", len(params["content"]))
        if meta.get("delta"):
            params["delta"] = True
        return [("event/agent_output", params)]
    if topic == "session.approval_requested":
        return [("event/agent_output", {
                    **base, "type": "permission_request", "tool_use_id": meta.get("tool_use_id"),
                    "tool_name": meta.get("tool_name"), "input": meta.get("input"),
                    "content": f"{meta.get('tool_name')} asks for permission"}),
                ("event/agent_status", {**base, "state": "waiting",
                                        "tool_use_id": meta.get("tool_use_id")})]
    if topic == "session.approval_answered":
        return [("event/agent_status", {**base, "state": "running",
                                        "tool_use_id": meta.get("tool_use_id"),
                                        "decision": meta.get("decision")})]
    if topic == "session.finished":
        status = str(meta.get("status"))
        final: list[Event] = []
        if frame.hash:  # the agent's last words, whole
            final.append(("event/agent_message", {**base, "role": "assistant",
                                                  "content": prompt(frame.hash),
                                                  "timestamp": frame.ts}))
        stopped = {**base, "reason": STOP_REASONS.get(status, "error"),
                   "message": meta.get("message")}
        return [*final, ("event/agent_stopped", stopped),
                ("event/agent_status", {**base, "state": END_STATES.get(status, "error")})]
    return []

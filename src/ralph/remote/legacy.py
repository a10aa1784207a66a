"""The legacy command format (docs/protocols/remote.md, "Legacy commands"): a message
`{"command": NAME, "payload": {...}, "request_id": ...}` is the JSON-RPC request of the
method NAME stands for, answered by the same dispatcher; its answer is a legacy message
`{"event": NAME, "timestamp", "payload", "request_id"}` (`status_response`, `file_content`,
`session_watch_started`, `session_watch_stopped`, or `error` with a string `code`), as the
original server answered them. `run_claude`, `stop_claude` and `respond_to_claude` are
answered only when they fail: what they start shows in the events every client gets.
"""

from __future__ import annotations

from typing import Any

from ralph.remote.events import legacy_message
from ralph.rpc import APPLICATION_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND
from ralph.rpc.jsoncodec import DecodeError, dumps, loads

COMMANDS = {
    "run_claude": "agent/run",
    "stop_claude": "agent/stop",
    "respond_to_claude": "agent/respond",
    "get_status": "status/get",
    "get_file": "file/get",
    "watch_session": "session/watch",
    "unwatch_session": "session/unwatch",
}
REPLIES = {
    "get_status": "status_response",
    "get_file": "file_content",
    "watch_session": "session_watch_started",
    "unwatch_session": "session_watch_stopped",
}
# JSON-RPC error codes as the legacy format's string codes
ERROR_CODES = {
    -32001: "CLAUDE_ALREADY_RUNNING",
    -32002: "CLAUDE_NOT_RUNNING",
    -32003: "CLAUDE_ERROR",
    -32004: "AGENT_NOT_CONFIGURED",
    -32010: "FILE_NOT_FOUND",
    -32011: "GIT_ERROR",
    -32012: "SESSION_NOT_FOUND",
    INVALID_PARAMS: "INVALID_PAYLOAD",
    METHOD_NOT_FOUND: "UNKNOWN_COMMAND",
    APPLICATION_ERROR: "RATE_LIMITED",  # the only -32000 a legacy command can meet
}
DEPRECATION = {
    "message": "The legacy command format is deprecated: send JSON-RPC 2.0 requests.",
    "documentation": "docs/protocols/remote.md",
    "migration": COMMANDS,
}


class LegacyCommand:
    """One legacy command, read from a decoded message."""

    def __init__(self, message: dict[str, Any]) -> None:
        self.command = str(message["command"])
        self.request_id = message.get("request_id")
        self.payload = message.get("payload")

    def request(self) -> bytes | None:
        """The JSON-RPC request it stands for (None: an unknown command)."""
        method = COMMANDS.get(self.command)
        if method is None:
            return None
        request: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": method}
        if self.payload is not None:
            request["params"] = self.payload  # not an object: -32602, as INVALID_PAYLOAD
        return dumps(request)

    def unknown(self) -> str:
        return error_message(ERROR_CODES[METHOD_NOT_FOUND],
                             f"Unknown command: {self.command}", self.request_id)

    def reply(self, response: bytes | None) -> str | None:
        """The legacy answer to the dispatcher's `response` (None: nothing to say)."""
        try:
            answer = loads(response) if response is not None else None
        except DecodeError:
            answer = None
        if type(answer) is not dict:
            return error_message("INTERNAL_ERROR", "no answer", self.request_id)
        error = answer.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            return error_message(
                ERROR_CODES.get(code, "INTERNAL_ERROR") if isinstance(code, int)
                else "INTERNAL_ERROR", str(error.get("message", "")), self.request_id,
                details=error.get("data"), rpc_code=code)
        name = REPLIES.get(self.command)
        if name is None:
            return None
        result = answer.get("result")
        payload = dict(result) if isinstance(result, dict) else {"result": result}
        if name == "status_response":  # the names the legacy clients read, beside ours
            payload.setdefault("claude_state", payload.get("agent_state"))
            payload.setdefault("agent_version", payload.get("version"))
        if name == "session_watch_stopped":
            payload.setdefault("reason", "client_request")
        return _message(name, payload, self.request_id)


def is_legacy(message: Any) -> bool:
    """An object with a non-empty string `command` and no `jsonrpc`."""
    return (type(message) is dict and "jsonrpc" not in message
            and isinstance(message.get("command"), str) and bool(message["command"]))


def error_message(code: str, message: str, request_id: Any = None, *, details: Any = None,
                  rpc_code: Any = None) -> str:
    payload: dict[str, Any] = {"code": code, "message": message}
    if request_id is not None:
        payload["request_id"] = request_id
    if details is not None:
        payload["details"] = details
    if rpc_code is not None:
        payload["rpc_code"] = rpc_code  # extension: the JSON-RPC code it stands for
    return _message("error", payload, request_id)


def deprecation_warning(command: str) -> str:
    return _message("deprecation_warning", {**DEPRECATION, "command": command})


def _message(name: str, payload: dict[str, Any], request_id: Any = None) -> str:
    return legacy_message(name, payload, request_id)

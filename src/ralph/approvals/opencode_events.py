"""The events of opencode's server for one prompt's turn, as `opencode run --format json`
prints them (the lines Ralph's OpencodeParser reads), with the permission requests to decide
and the subagents' sessions to make ask; and the session rules that make every tool ask."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# The session's own rules come after opencode's configuration and the last matching rule
# wins: asking for every call first, then the session's denials (which still hold).
ASK_ALL: dict[str, str] = {"permission": "*", "pattern": "*", "action": "ask"}
# What `opencode run` gives a new session: no questions for a person, no plan mode.
RUN_RULES: tuple[dict[str, str], ...] = tuple(
    {"permission": name, "pattern": "*", "action": "deny"}
    for name in ("question", "plan_enter", "plan_exit"))


@dataclass(frozen=True)
class Ask:
    """A permission request, as Ralph's policy sees it."""

    request_id: str
    tool_use_id: str  # the model's tool call id (+ "/<request id>" for its next requests)
    tool_name: str  # opencode's permission: bash, edit, read, webfetch, task, ...
    tool_input: dict[str, Any]


@dataclass
class Reaction:
    """What one server event calls for."""

    lines: list[dict[str, Any]] = field(default_factory=list)  # to print, in order
    ask: Ask | None = None  # to decide and answer
    child: dict[str, Any] | None = None  # a subagent's new session (its info): make it ask
    foreign: str | None = None  # a request of no session of this turn's: to reject


_PART_LINES = {"step-start": "step_start", "step-finish": "step_finish"}


class Turn:
    """One prompt's turn of the session `session_id`, event by event."""

    def __init__(self, session_id: str, *, thinking: bool = False) -> None:
        self.session_id = session_id
        self.thinking = thinking
        self.sessions = {session_id}  # and its subagents' sessions, whose requests count too
        self.busy = False
        self.ended = False  # idle again after it was busy
        self.failed = False  # the session reported an error
        self._printed: set[str] = set()
        self._calls: set[str] = set()  # tool calls asked about

    def feed(self, event: Mapping[str, Any]) -> Reaction:
        kind = event.get("type")
        props = event.get("properties")
        if not isinstance(props, dict):
            return Reaction()
        if kind == "message.part.updated":
            return Reaction(self._part(props.get("part")))
        if kind == "permission.asked":
            ask = self._ask(props)
            foreign = props.get("id") if ask is None and isinstance(props.get("id"), str) \
                else None
            return Reaction(ask=ask, foreign=foreign)
        if kind == "session.created":
            return Reaction(child=self._child(props.get("info")))
        if kind == "session.error":
            return Reaction(self._error(props))
        if kind == "session.status" and props.get("sessionID") == self.session_id:
            status = props.get("status")
            state = status.get("type") if isinstance(status, dict) else None
            if state == "busy":
                self.busy = True
            elif state == "idle" and self.busy:
                self.ended = True
        return Reaction()

    def _line(self, kind: str, **fields: Any) -> dict[str, Any]:
        return {"type": kind, "timestamp": int(time.time() * 1000),
                "sessionID": self.session_id, **fields}

    def _part(self, part: object) -> list[dict[str, Any]]:
        """The line of a part of this session's messages once it is complete (a subagent's
        parts are its own session's, which `opencode run` does not print either)."""
        if not isinstance(part, dict) or part.get("sessionID") != self.session_id:
            return []
        kind = part.get("type")
        line: str | None
        if kind == "tool":
            state = part.get("state")
            done = isinstance(state, dict) and state.get("status") in ("completed", "error")
            line = "tool_use" if done else None
        elif kind in ("text", "reasoning"):
            timing = part.get("time")
            complete = isinstance(timing, dict) and bool(timing.get("end"))
            line = kind if complete and (kind == "text" or self.thinking) else None
        else:
            line = _PART_LINES.get(str(kind))
        if line is None:
            return []
        key = part.get("id")
        if isinstance(key, str):
            if key in self._printed:
                return []
            self._printed.add(key)
        return [self._line(line, part=part)]

    def _error(self, props: Mapping[str, Any]) -> list[dict[str, Any]]:
        if props.get("sessionID") != self.session_id or not props.get("error"):
            return []
        self.failed = True
        return [self._line("error", error=props["error"])]

    def _child(self, info: object) -> dict[str, Any] | None:
        if not isinstance(info, dict) or info.get("parentID") not in self.sessions:
            return None
        child = info.get("id")
        if not isinstance(child, str) or child in self.sessions:
            return None
        self.sessions.add(child)
        return info

    def _ask(self, props: Mapping[str, Any]) -> Ask | None:
        request_id = props.get("id")
        if props.get("sessionID") not in self.sessions or not isinstance(request_id, str):
            return None
        tool = props.get("tool")
        call_id = tool.get("callID") if isinstance(tool, dict) else None
        if not isinstance(call_id, str) or not call_id:
            call_id = request_id  # not a tool's (opencode's doom-loop check)
        elif call_id in self._calls:
            # a call asks once per permission (bash outside the project: external_directory,
            # then bash): each is a request of its own, decided on its own
            call_id = f"{call_id}/{request_id}"
        self._calls.add(call_id)
        metadata = props.get("metadata")
        tool_input: dict[str, Any] = dict(metadata) if isinstance(metadata, dict) else {}
        patterns = props.get("patterns")
        tool_input["patterns"] = list(patterns) if isinstance(patterns, list) else []
        return Ask(request_id, call_id, str(props.get("permission") or "unknown"), tool_input)


def asking(rules: object) -> list[dict[str, Any]]:
    """The rules to add to a session (whose rules are `rules`) so that it asks for every
    tool call, its own denials still holding; [] if it does already."""
    own = [r for r in rules if isinstance(r, dict)] if isinstance(rules, list) else []
    last_ask = max((i for i, r in enumerate(own) if r == ASK_ALL), default=None)
    if last_ask is not None and all(r.get("action") == "deny" for r in own[last_ask + 1:]):
        return []
    return [ASK_ALL, *(r for r in own if r.get("action") == "deny")]

"""An agent's streamed output, merged for the wire: consecutive `event/agent_output` events of
one session and type (`text` or `thinking`) that come within MERGE_S of the first are sent
as one, whose `content` joins theirs (a `delta` piece with nothing between, others with a
newline), `chars` adds theirs up, `pieces` (an extension) counts them and `seq` is the
last one's. An agent that streams a thousand pieces a second then costs each client tens of
messages a second, not a thousand, for a delay of at most MERGE_S. A replay
(`initialize`'s `since_seq`, `session/watch`) sends the pieces one by one.
"""

from __future__ import annotations

from typing import Any

MERGE_S = 0.02
MAX_CHARS = 16 * 1024  # of one merged event's content
MERGED_TYPES = ("text", "thinking")
OUTPUT = "event/agent_output"

Pending = tuple[int, str, dict[str, Any]]  # seq, method, params


def mergeable(method: str, params: dict[str, Any]) -> bool:
    return method == OUTPUT and params.get("type") in MERGED_TYPES


class OutputMerger:
    """Holds at most one merged event; says what to send now."""

    def __init__(self) -> None:
        self.held: dict[str, Any] | None = None
        self.held_seq = 0
        self.first_seq = 0  # the first frame merged into what is held
        self.since = 0.0  # when the held event began

    def add(self, seq: int, method: str, params: dict[str, Any], now: float) -> list[Pending]:
        """The events to send now for this one (in order): none while it is held."""
        out: list[Pending] = []
        if self.held is not None and not self._joins(params, now):
            out.append(self.take())
        if not mergeable(method, params):
            out.append((seq, method, params))
            return out
        if self.held is None:
            self.held, self.first_seq, self.since = dict(params), seq, now
        else:
            self._merge(params)
        self.held_seq = seq
        return out

    def due(self, now: float) -> bool:
        return self.held is not None and now - self.since >= MERGE_S

    def take(self) -> Pending:
        assert self.held is not None
        held, self.held = self.held, None
        return self.held_seq, OUTPUT, {**held, "seq": self.held_seq}

    def _joins(self, params: dict[str, Any], now: float) -> bool:
        held = self.held
        assert held is not None
        return (params.get("type") == held.get("type")
                and params.get("session_id") == held.get("session_id")
                and now - self.since < MERGE_S
                and len(held["content"]) + len(str(params.get("content", ""))) <= MAX_CHARS)

    def _merge(self, params: dict[str, Any]) -> None:
        held = self.held
        assert held is not None
        content = str(params.get("content", ""))
        held["content"] = held["content"] + ("" if params.get("delta") else "\n") + content
        held["chars"] = int(held.get("chars", 0)) + 1 + int(params.get("chars", len(content)))
        if params.get("delta"):
            held["chars"] -= 1  # (no newline joined it)
        held["pieces"] = int(held.get("pieces", 1)) + 1

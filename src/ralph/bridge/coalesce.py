"""The agent's output for an editor: coalesced and bounded, whatever the agent prints.

Consecutive `agent.output` frames of one run, iteration, kind and role are joined into one
`agent_output` event, sent at most every FLUSH_S (or once MAX_CHARS have gathered, or when
something else comes). A budget of BUDGET_CHARS_PER_S characters per second (a bucket that
holds one second's worth) bounds what reaches the editor: text beyond it is skipped, and
the next event says how much was (the whole output is in the iteration's log).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from ralph.agents.summary import tool_summary
from ralph.bridge.models import AgentOutput
from ralph.store import Frame

FLUSH_S = 0.2
MAX_CHARS = 8 * 1024  # of one event
BUDGET_CHARS_PER_S = 32 * 1024

Send = Callable[[AgentOutput], Awaitable[None]]


def output_piece(meta: dict[str, Any]) -> tuple[str, str, int | None]:
    """(kind, content, iteration) of an iteration's `agent.output` frame as the faces show
    it: a tool call summarised, an iteration only if it is a number."""
    kind = str(meta.get("kind") or "text")
    content = str(meta.get("content") or "")
    if kind == "tool_use":
        content = tool_summary(meta.get("tool"), content)
    iteration = meta.get("iteration")
    return kind, content, iteration if isinstance(iteration, int) else None


class OutputCoalescer:
    def __init__(self, send: Send, *, budget_per_s: int = BUDGET_CHARS_PER_S,
                 max_chars: int = MAX_CHARS, clock: Callable[[], float] = time.monotonic
                 ) -> None:
        self._send = send
        self._budget_per_s = budget_per_s
        self._max_chars = max_chars
        self._clock = clock
        self._allowance = float(budget_per_s)
        self._refilled = clock()
        self._key: tuple[str, int | None, str, str | None] | None = None
        self._ts = ""
        self._parts: list[str] = []
        self._chars = 0
        self._skipped = 0  # characters over the budget since the last event
        self._since = 0.0  # when the held text began

    @property
    def pending(self) -> bool:
        return bool(self._parts) or self._skipped > 0

    def due(self) -> bool:
        """Held text has waited FLUSH_S: time to send it."""
        return self.pending and self._clock() - self._since >= FLUSH_S

    async def add(self, frame: Frame) -> None:
        meta = frame.meta
        kind, content, iteration = output_piece(meta)
        key = (str(meta.get("run_id", "")), iteration, kind, meta.get("role"))
        if self._key is not None and key != self._key:
            await self.flush()
        take = self._take(len(content))
        if take < len(content):
            self._skipped += len(content) - take
            content = content[:take]
        # An event carries an excerpt of a long text (`chars` says how long): the rest is
        # in the log, and said to be skipped like what goes over the budget.
        if kind != "tool_use":
            chars = meta.get("chars")
            if isinstance(chars, int):
                self._skipped += max(0, chars - len(str(meta.get("content") or "")))
        if not self._parts:
            self._since = self._clock()
            self._ts = frame.ts
        self._key = key
        if content:
            joiner = "" if not self._parts or meta.get("delta") else "\n"
            self._parts.append(joiner + content)
            self._chars += len(joiner) + len(content)
        if self._chars >= self._max_chars:
            await self.flush()

    async def flush(self) -> None:
        """Send what is held, if anything."""
        if self._key is None or not self.pending:
            return
        text = "".join(self._parts)
        if self._skipped:
            note = (f"[... {self._skipped:,} characters of output skipped here; the "
                    "iteration's log has all of it]")
            text = f"{text}\n{note}" if text else note
        run_id, iteration, kind, role = self._key
        self._parts, self._chars, self._skipped = [], 0, 0
        await self._send(AgentOutput(ts=self._ts, runId=run_id, iteration=iteration, kind=kind,
                                     content=text, role=role))

    def _take(self, wanted: int) -> int:
        """How many of `wanted` characters the budget allows now."""
        now = self._clock()
        self._allowance = min(float(self._budget_per_s),
                              self._allowance + (now - self._refilled) * self._budget_per_s)
        self._refilled = now
        take = min(wanted, int(self._allowance))
        self._allowance -= take
        return take



"""The loop's events: every step of a run is appended to the store, in the run's stream.

Topics: run.started, run.stopped, run.paused, run.resumed, iteration.started,
iteration.finished, agent.started, agent.output, agent.usage, agent.finished,
agent.rate_limited, gate.started, gate.finished, judge.finished, review.finished, task.done,
task.reopened, task.blocked, task.unblocked, protected.reverted, loop.warning, loop.error.
Faces map them to their wire names.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ralph.store import Frame, Store

log = logging.getLogger("ralph.loop")

Observer = Callable[[Frame], None]


def run_stream(run_id: str) -> str:
    return f"runs/{run_id}"


class EventSink:
    """Appends the events of one run to its stream (`runs/<run_id>`). Other owners of a
    stream of events (a workflow session) give theirs and the key that names them in each
    event's meta (`id_key`)."""

    def __init__(self, store: Store, run_id: str, observer: Observer | None = None,
                 tags: dict[str, Any] | None = None, *, stream: str | None = None,
                 id_key: str = "run_id") -> None:
        self.store = store
        self.run_id = run_id
        self.stream = stream or run_stream(run_id)
        self.id_key = id_key
        # e.g. the terminal display: sees every event as appended. In a box shared with the
        # tagged copies, so that a display that failed is let go by all of them.
        self._observer: list[Observer | None] = [observer]
        self.tags = tags or {}  # added to every event's meta (the iteration, a role)

    @property
    def observer(self) -> Observer | None:
        return self._observer[0]

    def tagged(self, **tags: Any) -> EventSink:
        """The same sink, adding `tags` to each event's meta: an iteration's events carry
        its number, a judge's or reviewer's agent events their role."""
        sink = EventSink(self.store, self.run_id, None, {**self.tags, **tags},
                         stream=self.stream, id_key=self.id_key)
        sink._observer = self._observer
        return sink

    def __call__(self, topic: str, meta: dict[str, Any],
                 content: bytes | str | None = None) -> Frame:
        frame = self.store.append(topic, {self.id_key: self.run_id, **self.tags, **meta},
                                  content=content, stream=self.stream)
        observer = self._observer[0]
        if observer is not None:
            try:
                observer(frame)
            except Exception as exc:  # a display that cannot write (a closed terminal) stops
                log.warning("the run's display stopped: %s", exc)  # nothing else
                self._observer[0] = None
        return frame

"""A named session's record in the event store: its iterations and its control frames.

All of a session's frames go to stream `sessions/<name>` (its notes too, see ralph.notes),
on the topics of the ralph.nu specification:

- `ralph.<name>.iteration`: `{"action": "start", "n": N, "timestamp": ...}` when iteration N
  starts and `{"action": "complete", "n": N, "status": "success" | "failure", ...}` when it
  ends, with the loop's fields beside them (`run_id`, `iteration`, `iteration_id`, and at the
  end `verified`, `loop_status`, `reason`, `commit`). No content.
- `ralph.<name>.control`: `{"action": "session_complete", "iteration": N, "ts": ms}` (content
  `complete`) is the agent's claim that every task is done (`ralph nu done`); Ralph answers
  it with `{"action": "completion_accepted", "iteration": N}` or `{"action":
  "completion_rejected", "iteration": N, "reason": ...}`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ralph.flock import FileLock
from ralph.notes import check_session, session_stream
from ralph.nu.errors import NuError

if TYPE_CHECKING:
    from pathlib import Path

    from ralph.store import Frame, Store

CLAIM = "session_complete"
ACCEPTED = "completion_accepted"
REJECTED = "completion_rejected"


def iteration_topic(name: str) -> str:
    return f"ralph.{check_session(name)}.iteration"


def control_topic(name: str) -> str:
    return f"ralph.{check_session(name)}.control"


def timestamp() -> str:
    """As the original script wrote it: `%Y-%m-%dT%H:%M:%S%z` (local time)."""
    return datetime.now(UTC).astimezone().strftime("%Y-%m-%dT%H:%M:%S%z")


@dataclass
class SessionRecord:
    """What a session's frames say: its iterations and its claims and verdicts."""

    name: str
    started: dict[int, Frame] = field(default_factory=dict)  # n -> its start frame
    completed: dict[int, Frame] = field(default_factory=dict)  # n -> its complete frame
    claims: dict[int, Frame] = field(default_factory=dict)  # n -> its last claim
    accepted: set[int] = field(default_factory=set)
    rejected: dict[int, str] = field(default_factory=dict)  # n -> why

    @property
    def last(self) -> int:
        """The highest iteration number the session has (0: none yet)."""
        return max([*self.started, *self.completed], default=0)

    @property
    def running(self) -> int | None:
        """The iteration started last, if it has not completed (or its process died)."""
        last = self.last
        return last if last in self.started and last not in self.completed else None

    def complete(self) -> bool:
        """Its last iteration's completion claim was accepted."""
        return self.last in self.accepted


def read_record(store: Store, name: str) -> SessionRecord:
    record = SessionRecord(name)
    prefix = f"ralph.{check_session(name)}."
    for frame in store.read(topic=prefix + "*", stream=session_stream(name)):
        kind = frame.topic[len(prefix):]
        meta = frame.meta
        if kind == "iteration":
            n = meta.get("n")
            if isinstance(n, int) and not isinstance(n, bool):
                into = record.started if meta.get("action") == "start" else record.completed
                into[n] = frame
        elif kind == "control":
            n = meta.get("iteration")
            if not isinstance(n, int) or isinstance(n, bool):
                continue
            action = meta.get("action")
            if action == CLAIM:
                record.claims[n] = frame
            elif action == ACCEPTED:
                record.accepted.add(n)
            elif action == REJECTED:
                record.rejected[n] = str(meta.get("reason") or "")
    return record


def log_start(store: Store, name: str, n: int, extra: dict[str, Any]) -> Frame:
    return store.append(iteration_topic(name),
                        {"action": "start", "n": n, "timestamp": timestamp(), **extra},
                        stream=session_stream(name))


def log_complete(store: Store, name: str, n: int, status: str, extra: dict[str, Any]) -> Frame:
    return store.append(iteration_topic(name),
                        {"action": "complete", "n": n, "status": status,
                         "timestamp": timestamp(), **extra},
                        stream=session_stream(name))


def claim_completion(store: Store, name: str, n: int) -> Frame:
    """The agent's claim, made during iteration `n`, that every task of the session is done."""
    return store.append(control_topic(name),
                        {"action": CLAIM, "iteration": n, "ts": time.time_ns() // 1_000_000},
                        content="complete", stream=session_stream(name))


def log_verdict(store: Store, name: str, n: int, accepted: bool, reason: str | None) -> Frame:
    meta: dict[str, Any] = {"action": ACCEPTED if accepted else REJECTED, "iteration": n}
    if not accepted:
        meta["reason"] = reason or "not verified"
    return store.append(control_topic(name), meta, stream=session_stream(name))


def claim(store: Store, name: str, loop_lock: Path) -> Frame:
    """`ralph nu done`: the running iteration's claim that every task of the session is
    done (NuError when no iteration of the session is running: none recorded as started
    and not ended, or none that a live process runs, `loop_lock` being the project's run
    lock)."""
    running = read_record(store, name).running
    if running is None or FileLock(loop_lock).held_elsewhere() is not True:
        raise NuError(f"no iteration of session {name!r} is running: a completion claim "
                      "counts only when made during one (Ralph checks it when it ends)")
    return claim_completion(store, name, running)

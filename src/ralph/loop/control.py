"""Control of a run from any process: stop, pause and resume as frames in the store.

A run may be driven by a terminal (`ralph run`), an editor's bridge or a server; whoever
wants to steer it (`ralph stop` in another terminal, a bridge's `stop`) appends a
`control.requested` frame {action, request_id, by} to the run's stream. The process running
it follows its stream (`ControlFollower`, a poll every CONTROL_POLL_S), applies each request
and answers with `control.applied` {request_id, action, ok, paused}; the requester waits for
that answer (`ask`). The requester also touches the project's lock file (`.ralph/loop.lock`,
held by the running process, whose content it leaves alone): a doorbell, so that a poll is
one stat() and the run reads the store only when someone asked something. A face whose own
process runs the run applies it directly: same effect, no frame needed. The log keeps both
frames, so the history says who stopped a run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from ralph.errors import RalphError
from ralph.loop.events import EventSink, run_stream
from ralph.loop.lock import ProjectLock
from ralph.store import Store
from ralph.store.ids import IdGenerator

log = logging.getLogger("ralph.loop")

ControlAction = Literal["stop", "pause", "resume"]
CONTROL_ACTIONS: tuple[ControlAction, ...] = ("stop", "pause", "resume")
CONTROL_POLL_S = 0.25  # how often a run looks for requests: the latency of a remote stop
ANSWER_WAIT_S = 10.0  # how long a requester waits for the run's answer
FULL_CHECK_POLLS = 240  # without a bell, the store is read once a minute (a failed touch)
_ids = IdGenerator()


class ControlReply(BaseModel):
    """What became of a stop, pause or resume."""

    ok: bool  # the run did it (a stop: it is stopping)
    run_id: str | None  # the run it was for (None: no run is active)
    paused: bool  # the run is paused now
    message: str  # one line for people
    answered: bool = True  # False: the run did not answer within ANSWER_WAIT_S


async def ask(store: Store, run_id: str, action: ControlAction, doorbell: Path, *,
              wait_s: float = ANSWER_WAIT_S) -> ControlReply:
    """Ask the run `run_id` (running in another process) to stop, pause or resume, and wait
    for its answer."""
    request_id = "ctl_" + _ids.next()[0]
    stream = run_stream(run_id)
    frame = store.append("control.requested", {
        "run_id": run_id, "action": action, "request_id": request_id,
        "by": f"pid {os.getpid()}"}, stream=stream)
    with contextlib.suppress(OSError):  # without the bell the run still reads it, later
        os.utime(doorbell)
    deadline = time.monotonic() + wait_s
    while True:
        for answer in store.read(topic="control.applied", stream=stream, after_seq=frame.seq):
            if answer.meta.get("request_id") == request_id:
                ok = bool(answer.meta.get("ok"))
                paused = bool(answer.meta.get("paused"))
                return ControlReply(ok=ok, run_id=run_id, paused=paused,
                                    message=describe(action, run_id, ok=ok))
        if _ended(store, stream, frame.seq) or not ProjectLock(doorbell).is_held_elsewhere():
            # It ended before it read the request (a stop needs nothing more).
            return ControlReply(ok=False, run_id=run_id, paused=False,
                                message=f"run {run_id} has ended")
        if time.monotonic() >= deadline:
            return ControlReply(ok=False, run_id=run_id, paused=False, answered=False,
                                message=f"asked run {run_id} to {action}, but it did not "
                                        f"answer within {wait_s:g} s (is its process "
                                        "stopped or busy?)")
        await asyncio.sleep(0.05)


def _ended(store: Store, stream: str, after_seq: int) -> bool:
    return any(True for _ in store.read(topic="run.stopped", stream=stream,
                                        after_seq=after_seq, limit=1))


def describe(action: ControlAction, run_id: str, *, ok: bool) -> str:
    """One line saying what a stop, pause or resume did."""
    if action == "stop":
        return f"run {run_id} is stopping" if ok else f"run {run_id} is stopping already"
    if action == "pause":
        return (f"run {run_id} pauses before its next iteration" if ok else
                f"run {run_id} cannot pause (a step has no next iteration, or it is "
                "stopping)")
    return f"run {run_id} resumes" if ok else f"run {run_id} is not paused"


class ControlFollower:
    """Inside the process that runs `emit`'s run: applies the requests others append."""

    def __init__(self, store: Store, emit: EventSink,
                 apply: Callable[[ControlAction], tuple[bool, bool]], doorbell: Path) -> None:
        self._store = store
        self._emit = emit
        self._apply = apply  # action -> (ok, paused)
        self._doorbell = doorbell
        self._rung = self._bell()
        self._cursor = store.last_seq  # requests from before the run are not for it
        self._polls = 0

    async def follow(self) -> None:
        """Poll for requests until cancelled (when the run ends)."""
        while True:
            await asyncio.sleep(CONTROL_POLL_S)
            self.check()

    def _bell(self) -> int:
        try:
            return self._doorbell.stat().st_mtime_ns
        except OSError:
            return 0

    def check(self) -> None:
        """Apply the requests appended since the last look: when the doorbell rang, and
        every FULL_CHECK_POLLS polls anyway (a requester whose touch failed)."""
        self._polls += 1
        rung = self._bell()
        if rung == self._rung and self._polls % FULL_CHECK_POLLS:
            return
        self._rung = rung
        try:
            frames = list(self._store.read(topic="control.requested",
                                           stream=self._emit.stream, after_seq=self._cursor))
        except (RalphError, OSError) as exc:  # the run goes on; a later poll tries again
            log.warning("could not read control requests: %s", exc)
            return
        for frame in frames:
            self._cursor = frame.seq
            action = frame.meta.get("action")
            if action in CONTROL_ACTIONS:
                ok, paused = self._apply(action)
            else:  # anyone may append to the stream: echo nothing it says but the id
                action, ok, paused = "unknown", False, False
            by = frame.meta.get("by")
            self._emit("control.applied", {"request_id": frame.meta.get("request_id"),
                                           "action": action, "ok": ok, "paused": paused,
                                           "by": str(by)[:100] if by is not None else None})

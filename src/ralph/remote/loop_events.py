"""The loop's store frames as the remote API's events: each event of the editor bridge
(docs/protocols/bridge.md), projected by the bridge's own projection
(ralph.bridge.projection), is sent as `event/loop_<type>`: `event/loop_run_started`,
`event/loop_run_stopped`, `event/loop_run_paused`, `event/loop_run_resumed`,
`event/loop_iteration_started`, `event/loop_iteration_finished`, `event/loop_task_blocked`
and `event/loop_error` (the bridge's `error`).

Params: the bridge event's fields exactly (its names, camelCase such as `runId` included),
`type` and `ts` kept, so that a client can decode both faces' events with one decoder, plus
the frame's store `seq`. As on the bridge, a step (a run of one iteration) reports its
iterations but no run_started / run_stopped. The loop's agent output (`agent.output` in a
run's stream, `runs/<run_id>`) is not one of these events.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import BaseModel

from ralph.bridge.models import (
    ErrorEvent,
    IterationFinished,
    IterationStarted,
    RunPaused,
    RunResumed,
    RunStarted,
    RunStopped,
    TaskBlocked,
)
from ralph.bridge.projection import TOPICS, project
from ralph.store import Frame

log = logging.getLogger("ralph.remote")

Event = tuple[str, dict[str, Any]]
PREFIX = "event/loop_"
_TOPICS = frozenset(TOPICS)


class LoopRunStarted(RunStarted):
    seq: int


class LoopRunStopped(RunStopped):
    seq: int


class LoopRunPaused(RunPaused):
    seq: int


class LoopRunResumed(RunResumed):
    seq: int


class LoopIterationStarted(IterationStarted):
    seq: int


class LoopIterationFinished(IterationFinished):
    seq: int


class LoopTaskBlocked(TaskBlocked):
    seq: int


class LoopError(ErrorEvent):
    seq: int


EVENT_MODELS: dict[str, type[BaseModel]] = {
    PREFIX + model.model_fields["type"].default: model
    for model in (LoopRunStarted, LoopRunStopped, LoopRunPaused, LoopRunResumed,
                  LoopIterationStarted, LoopIterationFinished, LoopTaskBlocked, LoopError)}
"""Each event's name and the model of its params (for the OpenRPC document)."""


def loop_events(frame: Frame) -> list[Event]:
    """The events of one loop frame (none for other frames); each carries `seq`."""
    if frame.topic not in _TOPICS:
        return []
    try:
        event = project(frame)
    except (TypeError, ValueError, KeyError) as exc:  # pydantic's ValidationError too
        # anyone may append to a run's stream: an odd frame is skipped, not the rest
        log.warning("remote: frame %s (%s) cannot be a loop event: %s", frame.seq,
                    frame.topic, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return []
    if event is None:
        return []
    params = event.model_dump()
    params["seq"] = frame.seq
    return [(PREFIX + str(params["type"]), params)]

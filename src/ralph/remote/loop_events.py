"""The loop's store frames as the remote API's events: each event of the editor bridge
(docs/protocols/bridge.md), projected by the bridge's own projection
(ralph.bridge.projection), is sent as `event/loop_<type>`: `event/loop_run_started`,
`event/loop_run_stopped`, `event/loop_run_paused`, `event/loop_run_resumed`,
`event/loop_iteration_started`, `event/loop_iteration_finished`, `event/loop_task_blocked`
and `event/loop_error` (the bridge's `error`).

Params: the bridge event's fields exactly (its names, camelCase such as `runId` included),
`type` and `ts` kept, so that a client can decode both faces' events with one decoder, plus
the frame's store `seq`. As on the bridge, a step (a run of one iteration) reports its
iterations but no run_started / run_stopped. The iterations' agent output (`agent.output`
in a run's stream, `runs/<run_id>`) is `event/loop_agent_output`, the bridge's
`agent_output` fields, a frame each (the bridge coalesces them further for an editor).
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import BaseModel

from ralph.bridge.models import (
    AgentOutput,
    ErrorEvent,
    IterationFinished,
    IterationStarted,
    RunPaused,
    RunResumed,
    RunStarted,
    RunStopped,
    TaskBlocked,
)
from ralph.bridge.projection import RUN_STREAM_PREFIX, TOPICS, output_event, project
from ralph.store import Frame

log = logging.getLogger("ralph.remote")

Event = tuple[str, dict[str, Any]]
PREFIX = "event/loop_"
OUTPUT = "event/loop_agent_output"
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


class LoopAgentOutput(AgentOutput):
    chars: int
    seq: int


EVENT_MODELS: dict[str, type[BaseModel]] = {
    PREFIX + model.model_fields["type"].default: model
    for model in (LoopRunStarted, LoopRunStopped, LoopRunPaused, LoopRunResumed,
                  LoopIterationStarted, LoopIterationFinished, LoopTaskBlocked, LoopError,
                  LoopAgentOutput)}
"""Each event's name and the model of its params (for the OpenRPC document)."""


def loop_events(frame: Frame) -> list[Event]:
    """The events of one loop frame (none for other frames); each carries `seq`."""
    if frame.topic == "agent.output" and frame.stream.startswith(RUN_STREAM_PREFIX):
        return [(OUTPUT, agent_output(frame))]
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


def agent_output(frame: Frame) -> dict[str, Any]:
    """An iteration's agent output (a frame of its run's stream), as the bridge's
    `agent_output` event, a frame each (the runner frames the output already: a few per
    second at most), with `chars` (the whole piece's length; `content` is its beginning),
    `delta` (it continues the piece before) and `seq` (ralph.bridge.projection's, which the
    bridge's `remoteRun` gives too)."""
    return output_event(frame)

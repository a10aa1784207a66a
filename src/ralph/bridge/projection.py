"""The bridge's events are a projection of the loop's store events: what the bridge shows
is what the store holds, so it agrees with `ralph status`, and a run started elsewhere (a
`ralph run` in a terminal) shows up too."""

from __future__ import annotations

import logging
from typing import Any

from ralph.bridge.coalesce import output_piece
from ralph.bridge.models import (
    ErrorEvent,
    IterationFinished,
    IterationStarted,
    RunPaused,
    RunResumed,
    RunStarted,
    RunStopped,
    TaskBlocked,
    _Event,
)
from ralph.store import Frame

log = logging.getLogger("ralph.bridge")

TOPICS = ("run.started", "run.stopped", "run.paused", "run.resumed", "iteration.started",
          "iteration.finished", "loop.error", "task.blocked")
_STOP_REASONS = {"complete", "no_progress", "max_iterations", "stopped", "error"}
RUN_STREAM_PREFIX = "runs/"  # a run's stream: its agents' output too


def project(frame: Frame) -> _Event | None:
    """The bridge event for a store frame, or None (other topics; a `step`'s own run.*)."""
    meta = frame.meta
    run_id = str(meta.get("run_id", ""))
    ts = frame.ts
    topic = frame.topic
    if topic in ("run.started", "run.stopped") and meta.get("mode") == "step":
        return None  # a step is a run of one iteration: the bridge reports its iteration only
    if topic == "run.started":
        return RunStarted(ts=ts, runId=run_id, agent=str(meta["agent"]),
                          maxIterations=int(meta["maxIterations"]),
                          startIteration=int(meta["startIteration"]))
    if topic == "run.stopped":
        reason = meta.get("reason")
        message = meta.get("message")
        if reason == "budget":  # the protocol has no such reason: a stop, saying which budget
            reason = "stopped"
        return RunStopped(ts=ts, runId=run_id,
                          reason=reason if reason in _STOP_REASONS else "unknown",
                          message=str(message) if message is not None else None)
    if topic == "task.blocked":
        return TaskBlocked(ts=ts, runId=run_id, task_id=str(meta.get("task_id")),
                           reason=str(meta.get("reason")))
    if topic == "run.paused":
        return RunPaused(ts=ts, runId=run_id)
    if topic == "run.resumed":
        return RunResumed(ts=ts, runId=run_id)
    if topic == "iteration.started":
        return IterationStarted(ts=ts, runId=run_id, iteration=int(meta["iteration"]),
                                agent=str(meta["agent"]), task_id=meta.get("task_id"),
                                title=meta.get("title"))
    if topic == "iteration.finished":
        return _finished(ts, run_id, meta)
    if topic == "loop.error":
        return ErrorEvent(ts=ts, runId=run_id or None, message=str(meta.get("message", "")))
    return None


def _finished(ts: str, run_id: str, meta: dict[str, Any]) -> IterationFinished:
    # Gates that did not run (the agent failed, the iteration was stopped) are null, not false.
    gates_ran = bool(meta.get("gates_ran", meta.get("receipts_dir") is not None))
    return IterationFinished(
        ts=ts, runId=run_id, iteration=int(meta["iteration"]), agent=str(meta["agent"]),
        task_id=meta.get("task_id"), exitSignal=meta.get("exit_signal"),
        returnCode=meta.get("return_code"), repoClean=bool(meta.get("repo_clean")),
        gatesOk=meta.get("gates_ok") if gates_ran else None, judgeOk=meta.get("judge_ok"),
        reviewOk=meta.get("review_ok"), blocked=bool(meta.get("blocked")),
        attemptId=meta.get("attempt_id"), receiptsDir=meta.get("receipts_dir"),
        contextDir=meta.get("context_dir"),
        durationSeconds=float(meta.get("duration_seconds", 0.0)), logPath=meta.get("log_path"),
        tokensIn=meta.get("tokens_in"), tokensOut=meta.get("tokens_out"),
        costUsd=meta.get("cost_usd"))


def output_event(frame: Frame) -> dict[str, Any]:
    """An iteration's agent output (an `agent.output` frame of its run's stream) as the
    `agent_output` event's fields, a frame each (the runner frames the output already: a
    few per second at most), with `chars` (the whole piece's length; `content` is its
    beginning), `delta` (it continues the piece before), `stream` ("stderr" for the CLI's
    diagnostics) and `seq`: `ralph serve`'s `event/loop_agent_output` params."""
    meta = frame.meta
    kind, content, iteration = output_piece(meta)
    params: dict[str, Any] = {
        "type": "agent_output", "ts": frame.ts,
        "runId": str(meta.get("run_id") or frame.stream.removeprefix(RUN_STREAM_PREFIX)),
        "iteration": iteration, "kind": kind,
        "content": content, "role": meta.get("role"),
        "chars": meta.get("chars", len(content)), "seq": frame.seq}
    if meta.get("delta"):
        params["delta"] = True
    if meta.get("stream") == "stderr":
        params["stream"] = "stderr"
    return params


def run_event(frame: Frame) -> dict[str, Any] | None:
    """A frame of a run's stream as its event, recorded: the bridge's event fields (`type`
    and `ts` included) plus the frame's `seq`, agent output a frame each (`output_event`,
    not coalesced) — `ralph serve`'s `event/loop_<type>` params. None for a frame that is
    no event (other topics, a step's own run.*), and for an odd one (said on stderr)."""
    if frame.topic == "agent.output":
        return output_event(frame)
    if frame.topic not in TOPICS:
        return None
    try:
        event = project(frame)
    except (TypeError, ValueError, KeyError) as exc:  # pydantic's ValidationError too
        log.warning("bridge: frame %s (%s) cannot be an event: %s", frame.seq, frame.topic,
                    str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return None
    if event is None:
        return None
    return {**event.model_dump(), "seq": frame.seq}

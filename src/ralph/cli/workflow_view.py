"""The live view of a workflow session: one line per step, as its events are recorded.

Used as the workflow service's observer (it sees each `workflow.*` event of the session as
it is appended) and by `ralph workflow status` to describe a session in words."""

from __future__ import annotations

import sys
from typing import IO, Any

from ralph.cli.output import terminal_safe
from ralph.store import Frame

_SHORT = 160


def _short(text: Any, limit: int = _SHORT) -> str:
    flat = " ".join(str(text).split())
    return terminal_safe(flat if len(flat) <= limit else flat[:limit - 1] + "…")


def _what(meta: dict[str, Any]) -> str:
    """`planner INITIALIZE`, `executor task-1 (attempt 2)`, `reviewer task-1`."""
    given = meta.get("input") or {}
    parts = [str(meta.get("role", "?"))]
    if meta.get("mode"):
        parts.append(str(meta["mode"]))
    if given.get("TASK_ID"):
        parts.append(str(given["TASK_ID"]))
    if given.get("ATTEMPT_NUMBER", 1) != 1:
        parts.append(f"(attempt {given['ATTEMPT_NUMBER']})")
    if given.get("CYCLE_NUMBER"):
        parts.append(f"(cycle {given['CYCLE_NUMBER']})")
    return " ".join(parts)


def describe(frame: Frame) -> str | None:
    """The line for one event of a workflow stream (None: not shown)."""
    meta, topic = frame.meta, frame.topic
    if topic == "workflow.started":
        agents = ", ".join(f"{role} {agent}" for role, agent in (meta.get("agents") or {}).items())
        return (f"workflow {meta.get('session_id')}: {_short(meta.get('request', ''), 100)}\n"
                f"  agents: {agents}")
    if topic == "workflow.resumed":
        return f"workflow {meta.get('session_id')} taken up again in {meta.get('state')}"
    if topic == "workflow.state":
        reason = f": {_short(meta['reason'])}" if meta.get("reason") else ""
        return f"-> {meta.get('state')}{reason}"
    if topic == "workflow.role_call":
        retry = " (retry: the first answer was invalid)" if meta.get("try", 1) > 1 else ""
        where = f", session {meta['agent_session']}" if meta.get("agent_session") else ""
        return f"   {_what(meta)}: {meta.get('agent')} working{retry}{where}"
    if topic == "workflow.role_result":
        outcome = meta.get("outcome")
        if outcome == "ok":
            output = meta.get("output") or {}
            said = ", ".join(f"{key} {output[key]}" for key in ("status", "verdict")
                             if output.get(key))
            return f"   {meta.get('role')}: ok ({said})" if said else f"   {meta.get('role')}: ok"
        return f"   {meta.get('role')}: {outcome}: {_short(meta.get('message', ''))}"
    if topic == "workflow.violation":
        return (f"   ! violation ({meta.get('role')}): claimed {_short(meta.get('claim'), 80)}; "
                f"found {_short(meta.get('found'), 120)}")
    if topic == "workflow.role_stopped":
        return f"   {meta.get('role')}: stopped"
    if topic == "workflow.gates":
        gates = meta.get("gates") or []
        if not gates:
            return "   gates: none configured"
        failed = [g["command"] for g in gates if not g.get("ok")]
        return ("   gates: passed" if not failed
                else f"   gates: FAILED ({_short(', '.join(failed), 100)})")
    if topic == "workflow.task":
        reason = f" ({_short(meta['reason'], 100)})" if meta.get("reason") else ""
        return f"   {meta.get('task_id')} {meta.get('from')} -> {meta.get('marker')}{reason}"
    if topic == "workflow.commit":
        return f"   commit {str(meta.get('sha', ''))[:10]} {_short(meta.get('message', ''), 100)}"
    if topic == "workflow.note":
        return f"   note: {_short(meta.get('message', ''))}"
    if topic == "workflow.answered":
        return f"   answered: {_short(meta.get('text', ''), 100)}"
    if topic == "workflow.stop_requested":
        return f"   stop asked for by {meta.get('by')}"
    if topic == "workflow.stopped":
        return f"stopped by {meta.get('by')} in {meta.get('state')}"
    return None


class WorkflowView:
    """Writes `describe`'s line for each event (to stderr by default)."""

    def __init__(self, out: IO[str] | None = None) -> None:
        self.out = out or sys.stderr

    def __call__(self, frame: Frame) -> None:
        line = describe(frame)
        if line is not None:
            self.out.write(line + "\n")
            self.out.flush()

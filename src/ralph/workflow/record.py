"""A workflow session as the store tells it: a projection of its stream `workflows/<id>`.

Topics (meta; every event also carries `session_id`):

- `workflow.started` {request, agents, max_qa_cycles, max_task_attempts, owner_pid,
  session_path}, and
  `workflow.resumed` {owner_pid, state} each time a process takes the session up again;
- `workflow.state` {state, from, reason, position}: a state change; `position` is all the
  orchestrator needs to go on (ralph.workflow.position), and the frame's seq names the step;
- `workflow.role_call` {step, call_id, role, mode, agent, input, try, agent_session}, content:
  the session files' snapshot before the call's first try; `workflow.role_result` {step,
  call_id, role, outcome (ok | invalid | violation | agent_failed), output, problems,
  violations, message}; `workflow.role_stopped` {step, call_id, role}: a call
  a stop interrupted (it is run again on resume);
- `workflow.violation` {call_id, role, claim, found}: one per contract violation;
- `workflow.gates` {step, task_id, attempt, passed, gates, made (untracked paths the gates
  made)}, with the loop's `gate.started`
  and `gate.finished` events before it; `workflow.task` {task_id, marker, from, attempt,
  reason}: a marker the orchestrator set; `workflow.commit` {task_id, sha, message};
- `workflow.note` {message}: something worth knowing that changes nothing (a limit reached);
- `workflow.answered` {text, by}: the user's answer to a BLOCKED session;
- `workflow.stop_requested` {by}, `workflow.stopped` {by, state}.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ralph.store import Frame, Store
from ralph.workflow.position import Position

STREAM_PREFIX = "workflows/"


def workflow_stream(session_id: str) -> str:
    return STREAM_PREFIX + session_id


@dataclass
class RoleCall:
    """One role call: its last try's record, and its result once there is one."""

    step: int
    call_id: str
    role: str
    mode: str | None
    agent: str
    input: dict[str, Any]
    tries: int
    agent_session: str | None
    snapshot_hash: str | None
    at: str
    result: dict[str, Any] | None = None
    stopped: bool = False

    def summary(self) -> dict[str, Any]:
        """What `ralph workflow status` shows of it."""
        return {"call_id": self.call_id, "role": self.role, "mode": self.mode,
                "agent": self.agent, "input": self.input, "tries": self.tries,
                "agent_session": self.agent_session, "at": self.at,
                "outcome": (self.result or {}).get("outcome",
                                                  "stopped" if self.stopped else "running"),
                "message": (self.result or {}).get("message")}


@dataclass
class WorkflowRecord:
    """Everything the stream says about one session."""

    session_id: str
    request: str = ""
    agents: dict[str, str] = field(default_factory=dict)
    max_qa_cycles: int = 3
    max_task_attempts: int = 3
    started_at: str | None = None
    position: Position | None = None
    step: int = 0  # the seq of the last `workflow.state`: the current step's id
    calls: list[RoleCall] = field(default_factory=list)
    violations: list[dict[str, Any]] = field(default_factory=list)
    gates: dict[tuple[int, str, int], dict[str, Any]] = field(default_factory=dict)
    stopped: int = 0  # seq of the last `workflow.stopped`
    taken_up: int = 0  # seq of the last started/resumed
    last_seq: int = 0

    @property
    def last_call(self) -> RoleCall | None:
        return self.calls[-1] if self.calls else None

    def in_flight(self, step: int) -> RoleCall | None:
        """The current step's call that has no result: it was running when its process
        stopped or died, and is run again."""
        for call in reversed(self.calls):
            if call.step != step:
                return None
            if call.result is None:
                return call
        return None

    def result_of(self, step: int, role: str, mode: str | None) -> RoleCall | None:
        """A call of this step and role (and mode) that has its result: done, not run
        again."""
        for call in reversed(self.calls):
            if call.step == step and call.role == role and call.mode == mode and \
                    call.result is not None:
                return call
        return None


def read_record(store: Store, session_id: str) -> WorkflowRecord:
    """The session's record (empty if its stream has no event)."""
    return project(session_id, store.read(stream=workflow_stream(session_id)))


def project(session_id: str, frames: Iterable[Frame]) -> WorkflowRecord:
    record = WorkflowRecord(session_id)
    calls: dict[str, RoleCall] = {}
    for frame in frames:
        meta = frame.meta
        record.last_seq = frame.seq
        topic = frame.topic
        if topic == "workflow.started":
            record.request = str(meta.get("request", ""))
            record.agents = dict(meta.get("agents") or {})
            record.max_qa_cycles = int(meta.get("max_qa_cycles", 3))
            record.max_task_attempts = int(meta.get("max_task_attempts", 3))
            record.started_at = frame.ts
            record.taken_up = frame.seq
        elif topic == "workflow.resumed":
            record.taken_up = frame.seq
        elif topic == "workflow.state":
            record.position = Position.from_json(meta["position"])
            record.step = frame.seq
        elif topic == "workflow.role_call":
            call = RoleCall(int(meta["step"]), str(meta["call_id"]), str(meta["role"]),
                            meta.get("mode"), str(meta.get("agent", "")),
                            dict(meta.get("input") or {}), int(meta.get("try", 1)),
                            meta.get("agent_session"), frame.hash, frame.ts)
            earlier = calls.get(call.call_id)
            if earlier is not None:  # a retry: the first try's snapshot is the one
                call.snapshot_hash = earlier.snapshot_hash
                record.calls.remove(earlier)
            calls[call.call_id] = call
            record.calls.append(call)
        elif topic == "workflow.role_result":
            found = calls.get(str(meta.get("call_id")))
            if found is not None:
                found.result = dict(meta)
        elif topic == "workflow.role_stopped":
            found = calls.get(str(meta.get("call_id")))
            if found is not None:
                found.stopped = True
        elif topic == "workflow.violation":
            record.violations.append({key: meta.get(key) for key in
                                      ("call_id", "role", "claim", "found")} | {"at": frame.ts})
        elif topic == "workflow.gates":
            record.gates[(int(meta["step"]), str(meta["task_id"]), int(meta["attempt"]))] = \
                dict(meta)
        elif topic == "workflow.stopped":
            record.stopped = frame.seq
    return record

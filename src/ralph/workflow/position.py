"""Where a workflow session stands: its state and everything the next step needs.

The orchestrator records the position with each state change (`workflow.state`, meta
`position`), so a session continues from its last recorded position after a stop or a
crash: the position is the whole of the orchestrator's memory between two steps. Counters
live here too (Q&A cycles, each task's attempts, completion checks), so that a resumed
session keeps its limits.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from ralph.workflow.errors import WorkflowError


class State(StrEnum):
    """The orchestrator's states (docs/workflow.md draws the machine)."""

    INITIALIZING = "INITIALIZING"
    PLANNING = "PLANNING"
    QA = "QA"
    EXECUTING = "EXECUTING"
    REVIEWING = "REVIEWING"
    BLOCKED = "BLOCKED"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"

    @property
    def final(self) -> bool:
        """A state the orchestrator stops in (BLOCKED waits for `answer`; FAILED can be
        resumed: its failed step is run again)."""
        return self in (State.BLOCKED, State.COMPLETE, State.FAILED)


@dataclass
class Position:
    """The state and what its step needs (see the module docstring)."""

    state: State
    request: str
    # PLANNING: the planner's mode and CONTEXT for the next call; `completion_check` when
    # that call is the check of the whole goal after every task is done.
    planner_mode: str = "INITIALIZE"
    planner_context: dict[str, Any] | None = None
    completion_check: bool = False
    # QA: the cycle (1, 2, ...) and its phase (BRAINSTORM, then RESEARCH).
    qa_cycle: int = 0
    qa_phase: str = "BRAINSTORM"
    qa_brainstorm: dict[str, Any] | None = None
    # EXECUTING (task None: the next task is chosen) and REVIEWING: the task and attempt.
    task_id: str | None = None
    attempt: int = 0
    # Counters and what waits for the planner after the current task.
    attempts: dict[str, int] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    for_planner: dict[str, Any] = field(default_factory=dict)
    completion_rounds: int = 0
    broke_down: bool = False
    # BLOCKED: what the user must answer; FAILED: why (resume runs `resume_to` again).
    blockers: list[str] = field(default_factory=list)
    reason: str = ""
    resume_to: dict[str, Any] | None = None
    # A failed step run again: the call that failed (its snapshot judges the new run).
    retry_of: str | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["state"] = self.state.value
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Position:
        """A position `to_json` wrote; WorkflowError if it is not one."""
        try:
            values = dict(data)
            values["state"] = State(values["state"])
            known = set(cls.__dataclass_fields__)
            return cls(**{key: value for key, value in values.items() if key in known})
        except (KeyError, TypeError, ValueError) as exc:
            raise WorkflowError(f"a recorded workflow position cannot be read: {exc}") from None

    def moved(self, state: State, **changes: Any) -> Position:
        """A copy in `state`, with `changes`; the step's own fields (task, attempt, QA
        phase, planner call, why) start afresh unless given."""
        data = self.to_json()
        data.update(state=state, task_id=None, attempt=0, planner_context=None,
                    completion_check=False, qa_phase="BRAINSTORM", qa_brainstorm=None,
                    blockers=[], reason="", resume_to=None, retry_of=None)
        data.update(changes)
        return Position.from_json(data)

"""A named session's part in the loop (ralph.loop.plan.SessionPlan): the session as a
one-task tracker, its prompt, its iteration titles and its record in the store."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ralph.notes import list_notes, open_notes
from ralph.nu.record import (
    SessionRecord,
    log_complete,
    log_start,
    log_verdict,
    read_record,
)
from ralph.tracker import Snapshot, Task, TaskStatus, TrackerError
from ralph.tracker.protocol import TrackerFormat

if TYPE_CHECKING:
    from ralph.loop.results import StepResult
    from ralph.notes import Note
    from ralph.store import FileStore

UNSETTLED_SHOWN = 5  # open notes named in a rejection


@dataclass(frozen=True)
class PromptParts:
    """What fills a session prompt's placeholders besides its state."""

    template: str
    spec: str  # the spec's text
    spec_path: str
    ralph: str  # how the agent runs Ralph's commands


class NuPlan:
    """Session `name` on `store`; `parts` make its prompts."""

    def __init__(self, name: str, store: FileStore, parts: PromptParts) -> None:
        self.name = name
        self.store = store
        # Absolute: the agent runs in the project root, wherever `ralph nu` was started.
        self.store_path = Path(store.path).resolve()
        self.parts = parts
        self.current: int | None = None  # the session's iteration now running
        self._start_seq = 0  # its start frame's
        # Ralph's verdicts on the claims of the iterations this process ran: only these
        # count for them (an agent can append any frame to the store, a verdict too).
        self._begun: set[int] = set()
        self._verdicts: dict[int, bool] = {}
        self._tracker = SessionTracker(self)

    # -- SessionPlan ---------------------------------------------------------------------------

    def tracker(self) -> SessionTracker:
        return self._tracker

    def begin(self, iteration: int, run_id: str) -> int:
        number = read_record(self.store, self.name).last + 1
        frame = log_start(self.store, self.name, number,
                          {"run_id": run_id, "iteration": iteration,
                           "iteration_id": f"{iteration:06d}"})
        self.current = number
        self._begun.add(number)
        self._start_seq = frame.seq
        return number

    def env(self, number: int) -> dict[str, str]:
        return {"RALPH_SESSION": self.name, "RALPH_SESSION_ITERATION": str(number),
                "RALPH_STORE": str(self.store_path)}

    def prompt(self, number: int, feedback: list[str]) -> str:
        told = ""
        if feedback:
            told = ("## Ralph's feedback on the last iteration\n\n"
                    + "\n\n".join(f"- {line}" for line in feedback) + "\n")
        template = self.parts.template
        if told and "{feedback}" not in template:  # the next prompt must say why
            template = template.rstrip() + "\n\n{feedback}\n"
        values = {"{name}": self.name, "{iteration}": str(number),
                  "{store}": shlex.quote(str(self.store_path)), "{spec}": self.parts.spec,
                  "{spec_path}": self.parts.spec_path, "{ralph}": self.parts.ralph,
                  "{notes}": notes_state(list_notes(self.store, session=self.name)),
                  "{feedback}": told}
        return fill(template, values)

    def title(self, number: int) -> str:
        return f"{self.name} - Iteration #{number}"

    def check_context(self) -> str:
        notes = notes_state(list_notes(self.store, session=self.name))
        spec = self.parts.spec.strip() or f"(the spec is {self.parts.spec_path})"
        return (f"\nThe task is the whole session `{self.name}`: every task of its spec done, "
                f"as its notes record.\n\n## The spec\n\n{spec}\n\n"
                f"## The session's notes\n\n{notes}\n")

    def unsettled(self) -> str | None:
        still = open_notes(list_notes(self.store, session=self.name))
        if not still:
            return None
        shown = "; ".join(f"{n.type} {n.id} ({_short(n.text)})" for n in still[:UNSETTLED_SHOWN])
        more = f"; and {len(still) - UNSETTLED_SHOWN} more" if len(still) > UNSETTLED_SHOWN else ""
        return (f"completion claimed, but {len(still)} note{'s' if len(still) != 1 else ''} "
                f"{'are' if len(still) != 1 else 'is'} still open: {shown}{more}")

    def noted(self, number: int) -> bool:
        return any(True for _ in self.store.read(topic=f"ralph.{self.name}.note",
                                                 after_seq=self._start_seq, limit=1))

    def claimed(self, number: int) -> bool:
        return number in read_record(self.store, self.name).claims

    def judged(self, number: int, accepted: bool, reason: str | None) -> None:
        self._verdicts[number] = accepted
        log_verdict(self.store, self.name, number, accepted, reason)

    def finished(self, number: int, result: StepResult) -> None:
        self.current = None
        log_complete(self.store, self.name, number,
                     "success" if result.agent_status == "ok" else "failure",
                     _loop_fields(result))

    def interrupted(self, result: StepResult) -> None:
        running = read_record(self.store, self.name).running
        if running is not None:
            log_complete(self.store, self.name, running, "failure", _loop_fields(result))

    # -- what the tracker asks -----------------------------------------------------------------

    def status(self) -> TaskStatus:
        """"done" while the running iteration's claim awaits its verdict (the loop then checks
        it), or once the last iteration's claim was accepted and no note was opened since."""
        record = read_record(self.store, self.name)
        if self.current is not None:
            judged = self._verdicts.get(self.current)
            claimed = self.current in record.claims and judged is not False
            return "done" if claimed else "open"
        last = record.last
        if last in self._begun:
            accepted = self._verdicts.get(last) is True
        else:  # an earlier run's: its verdict, and the loop's own verified end of it
            end = record.completed.get(last)
            accepted = last in record.accepted and end is not None and end.meta.get(
                "verified") is True
        if accepted and not open_notes(list_notes(self.store, session=self.name)):
            return "done"
        return "open"

    def record(self) -> SessionRecord:
        return read_record(self.store, self.name)


class SessionTracker:
    """The session as the loop's tracker: one task, `nu-<name>`, done when the session's
    completion is claimed (and then kept done only if Ralph accepts the claim)."""

    format: TrackerFormat = "md"

    def __init__(self, plan: NuPlan) -> None:
        self.plan = plan
        self.path = Path(plan.store.path) / "streams" / "sessions" / plan.name

    @property
    def task_id(self) -> str:
        return f"nu-{self.plan.name}"

    def snapshot(self) -> Snapshot:
        status = self.plan.status()
        return Snapshot((Task(id=self.task_id, title=f"every task of session {self.plan.name}",
                              status=status, kind="build", acceptance=(), depends_on=(),
                              priority=None, order=0, blocked_reason=None),))

    def load(self) -> list[Task]:
        return list(self.snapshot())

    def text(self) -> str:
        return notes_state(list_notes(self.plan.store, session=self.plan.name))

    def set_status(self, task_id: str, status: TaskStatus, reason: str | None = None) -> Task:
        """Only the agent claims (`ralph nu done`) and only Ralph judges: reopening a
        rejected claim needs nothing more (the rejection is its record), and a session is
        never blocked."""
        if task_id != self.task_id:
            raise TrackerError(f"session {self.plan.name} has no task {task_id}")
        if status in ("blocked", "done"):
            raise TrackerError(f"a session's task cannot be marked {status} by Ralph")
        return self.snapshot()[0]


def fill(template: str, values: dict[str, str]) -> str:
    """`template` with each placeholder replaced by its value, in one pass (a value that
    holds a placeholder's name, a spec that mentions `{name}` say, stays as it is)."""
    out: list[str] = []
    position = 0
    while True:
        start = template.find("{", position)
        if start < 0:
            break
        end = template.find("}", start)
        key = template[start:end + 1] if end >= 0 else ""
        if key in values:
            out += [template[position:start], values[key]]
            position = end + 1
        else:
            out.append(template[position:start + 1])
            position = start + 1
    out.append(template[position:])
    return "".join(out)


def notes_state(notes: list[Note]) -> str:
    """The session's state for a prompt: the open notes with their ids, by type, and how many
    are completed."""
    still = open_notes(notes)
    completed = sum(1 for n in notes if n.type == "completed")
    if not notes:
        return "No notes yet: add the spec's tasks as `remaining` notes."
    lines: list[str] = []
    for kind, label in (("in_progress", "IN PROGRESS"), ("blocked", "BLOCKED"),
                        ("remaining", "REMAINING")):
        group = [n for n in still if n.type == kind]
        if group:
            lines.append(f"{label}:")
            lines += [f"  - [{n.id}] {_short(n.text, 300)}" for n in group]
    lines.append(f"COMPLETED: {completed} note{'s' if completed != 1 else ''}")
    if not still:
        lines.append("Nothing is open.")
    return "\n".join(lines)


def _short(text: str, limit: int = 80) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 1] + "…"


def _loop_fields(result: StepResult) -> dict[str, object]:
    """The loop's record of an iteration, beside the specification's fields of its end."""
    return {"run_id": result.run_id, "iteration": result.iteration,
            "iteration_id": result.iteration_id, "verified": result.verified,
            "loop_status": result.status, "reason": result.reason, "commit": result.commit}

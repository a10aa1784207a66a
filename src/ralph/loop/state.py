"""`.ralph/state.json`: the loop's small, bounded current state (history is in the store).

Plain dataclasses, validated by msgspec when read (ralph.records): `ralph status` and `ralph
tasks` read this file, and importing pydantic alone would take most of their start-up budget
(docs/architecture.md, "Records the CLI reads")."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import orjson

from ralph.errors import RalphError
from ralph.fsutil import atomic_write_bytes
from ralph.loop.models import LastIteration
from ralph.loop.usage import RunSpend
from ralph.records import convert, declared_fields

log = logging.getLogger("ralph.loop")

STATE_VERSION = 1


def owner_died(pid: int) -> str:
    """Why an iteration found in flight by a later process ended: its process died."""
    return f"the process running it (pid {pid}) died mid-iteration"


class StateError(RalphError):
    """state.json cannot be written."""


@dataclass
class ActiveRun:
    run_id: str
    pid: int
    agent: str
    max_iterations: int
    started_at: str
    paused: bool = False
    mode: str = "run"  # "run" or "step"
    server_pgid: int | None = None  # an agent server started for this run (opencode serve)
    # The orchestrator's owner id (ralph.proc.owner_id): every process it started carries
    # it, so a later start can end what a dead one left if its guard could not.
    owner: str | None = None


@dataclass
class InFlight:
    """The iteration under way: if the process dies, the next start finds and records it."""

    iteration: int
    iteration_id: str
    run_id: str
    task_id: str
    task_title: str
    attempt_id: str
    started_at: str
    pid: int
    # The process group of the child running now: the agent, a gate, the judge or the
    # reviewer (one at a time). The name is older than gates being recorded too.
    agent_pgid: int | None = None
    # The tracker file as the iteration began (a copy, relative to the project root):
    # whatever else is marked done when it ends without a verdict (stopped, crashed, died)
    # is reopened. `done_before` (those tasks' ids) is what older versions recorded instead.
    tracker_copy: str | None = None
    done_before: list[str] | None = None
    # HEAD when the iteration began: protected paths are put back to it, and what the
    # iteration left is committed on top of it, by whoever finishes the iteration.
    head: str | None = None
    # The agent's work is staged (before the gates): whoever finishes the iteration commits
    # the index as it is, leaving what the gates made out.
    staged: bool = False


@dataclass
class TaskState:
    attempts: int = 0  # attempts started
    failures: int = 0  # attempts that ended without the task verified done
    blocked: str | None = None
    # What the next attempt's prompt must tell the agent about the last one (a protected
    # path it changed, say); replaced by each attempt, dropped once the task is done.
    notes: list[str] = field(default_factory=list)


@dataclass
class LoopState:
    version: int = STATE_VERSION
    iteration_count: int = 0
    no_progress_streak: int = 0
    active_run: ActiveRun | None = None
    in_flight: InFlight | None = None
    last: LastIteration | None = None
    tasks: dict[str, TaskState] = field(default_factory=dict)
    agent_starts: list[float] = field(default_factory=list)  # epoch seconds, last hour only
    # Untracked files and directories the gates created (ralph.loop.worktree): never
    # committed, and not the user's changes when a run starts. Bounded.
    gate_outputs: list[str] = field(default_factory=list)
    # Tracked files the gates changed, with their `size:mtime` then: as long as they stay so,
    # they are the gates' doing, not the user's changes. Bounded.
    gate_changed: dict[str, str] = field(default_factory=dict)
    # Tokens and cost: of the last run (the active one while it runs), and of all runs.
    spend_last_run: RunSpend | None = None
    spend_all: RunSpend = field(default_factory=RunSpend)

    def task(self, task_id: str) -> TaskState:
        return self.tasks.setdefault(task_id, TaskState())


def load_state(path: Path, *, repair: bool = True) -> LoopState:
    """The state, or a fresh one if the file is missing or damaged. A damaged file is set
    aside when `repair` is set (a step or run is about to write a new one); readers that
    only look (status) leave it where it is."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return LoopState()
    except OSError as exc:
        raise StateError(f"cannot read {path}: {exc.strerror}") from None
    try:
        return convert(orjson.loads(raw) if raw.strip() else {}, LoopState)
    except (orjson.JSONDecodeError, msgspec.ValidationError) as exc:
        if not repair:
            log.warning("%s is damaged (%s); showing a fresh state", path,
                        str(exc).splitlines()[0])
            return LoopState()
        aside = path.with_name(path.name + ".damaged")
        path.replace(aside)
        log.warning("%s was damaged (%s); kept as %s and starting from a fresh state", path,
                    str(exc).splitlines()[0], aside.name)
        return LoopState()


def save_state(path: Path, state: LoopState, *, durable: bool = True) -> None:
    """Replace state.json atomically. `durable=False` skips the fsyncs: enough for records
    that only need to survive the death of this process (the in-flight iteration), not a
    power loss."""
    try:
        body = orjson.dumps(state, default=declared_fields,
                            option=orjson.OPT_INDENT_2 | orjson.OPT_PASSTHROUGH_DATACLASS)
        atomic_write_bytes(path, body + b"\n", durable=durable)
    except OSError as exc:
        raise StateError(f"cannot write {path}: {exc.strerror}") from None

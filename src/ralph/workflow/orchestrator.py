"""The state machine of a workflow session: which role runs next, and what its result does.

`Orchestrator.run` takes steps until the session is BLOCKED, COMPLETE or FAILED. A step is
one state's work (a planner call; one half of a Q&A cycle; one executor attempt; the gates
and the review of that attempt). Each state change is recorded with the whole position
(`workflow.state`), and its frame's seq is the step's id: a call of the current step that
has a recorded result is not run again, and one without (its process stopped or died) is
run again against the files as they were before it. The orchestrator, not an agent, sets a
task `[x]` (a Qualified review and passing gates), `[ ]` for a rework and `[F]` when its
attempts are used up, and commits each finished task as the loop commits an iteration.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ralph.config import Config
from ralph.errors import RalphError
from ralph.git import Git
from ralph.loop.events import EventSink
from ralph.loop.gates import GateReceipt, run_gates
from ralph.loop.paths import RUNTIME_PATHS, ProjectPaths
from ralph.loop.state import load_state, save_state
from ralph.loop.worktree import (
    attempt_message,
    by_gates,
    gate_changes,
    remember_gate_outputs,
)
from ralph.store import Store
from ralph.workflow.contracts import (
    ExecutorInput,
    ExecutorOutput,
    PlannerInput,
    PlannerOutput,
    QuestionerInput,
    QuestionerOutput,
    ReviewerInput,
    ReviewerOutput,
    RoleInput,
    role_of,
)
from ralph.workflow.errors import WorkflowError
from ralph.workflow.integrity import SessionFiles, validate_session
from ralph.workflow.position import Position, State
from ralph.workflow.progress import Marker, set_marker
from ralph.workflow.record import WorkflowRecord, read_record
from ralph.workflow.role_call import RoleCaller, RoleResult
from ralph.workflow.session_dir import SessionDir, report_name
from ralph.workflow.tasks_file import TaskKind

log = logging.getLogger("ralph.workflow")

# Completion checks that may add tasks before the session is failed: a planner that finds
# a gap after every round would otherwise never let the session end.
MAX_COMPLETION_ROUNDS = 5
_QA_ACTIONS = ("qa_brainstorm", "qa_research")
_OPEN = (Marker.NOT_STARTED, Marker.IN_PROGRESS, Marker.REVIEW_PENDING)


@dataclass(frozen=True)
class Limits:
    max_qa_cycles: int
    max_task_attempts: int


class Orchestrator:
    """Runs one session's steps (see the module docstring)."""

    def __init__(self, root: Path, config: Config, store: Store, session: SessionDir,
                 caller: RoleCaller, emit: EventSink, limits: Limits) -> None:
        self.root = root
        self.config = config
        self.store = store
        self.session = session
        self.caller = caller
        self.emit = emit
        self.limits = limits
        self.git = Git(root)

    # -- the loop ----------------------------------------------------------------------------

    async def run(self) -> Position:
        """Steps from the recorded position until a final state; the position then."""
        while True:
            record = read_record(self.store, self.session.session_id)
            position = record.position
            if position is None:
                raise WorkflowError(f"workflow session {self.session.session_id} has no "
                                    "recorded state")
            try:
                if position.state.final:
                    await self._commit_session(position.state.value.lower())
                    return position
                await self._step(record, position)
            except (RalphError, OSError) as exc:
                # The session's files unreadable mid-step, an agent that cannot start, a
                # commit refused by a hook: recorded, and `resume` runs the step again.
                why = " ".join((str(exc) if isinstance(exc, RalphError)
                                else f"{exc.strerror or exc}").split())
                now = read_record(self.store, self.session.session_id).position or position
                if now.state is State.FAILED:  # its own files' commit refused: said, kept
                    self.emit("workflow.note", {"message": "the session's files are not "
                                                           f"committed: {why}"})
                    return now
                self._fail(now, why)  # a final state's commit refused: resume commits it

    def move(self, position: Position, state: State, reason: str = "",
             **changes: Any) -> Position:
        """Record the move to `state` (a new step); the new position."""
        new = position.moved(state, reason=reason, **changes)
        record_state(self.emit, new, position.state.value, reason)
        return new

    async def _step(self, record: WorkflowRecord, position: Position) -> None:
        handlers = {State.INITIALIZING: self._planning, State.PLANNING: self._planning,
                    State.QA: self._qa, State.EXECUTING: self._executing,
                    State.REVIEWING: self._reviewing}
        await handlers[position.state](record, position)

    async def _call(self, record: WorkflowRecord, role_input: RoleInput,
                    context: str | None = None) -> RoleResult:
        """The current step's call of this role: its recorded result if it finished, run
        again if it was in flight, else run now."""
        role = role_of(role_input)
        mode = getattr(role_input, "mode", None)
        mode_text = str(mode) if mode is not None else None
        done = record.result_of(record.step, role, mode_text)
        if done is not None and done.result is not None:
            return RoleResult.from_record(role, done.result)
        again = record.in_flight(record.step)
        if again is not None and (again.role != role or again.mode != mode_text):
            again = None
        if again is not None and again.agent_session:
            # Ends what the dead owner left running (the session is recorded lost).
            self.caller.sessions.get(again.agent_session)
        if again is not None:
            role_input = type(role_input).model_validate(again.input)
        position = record.position
        before = None
        if again is None and position is not None and position.retry_of is not None:
            # The step failed and is run again (resume): judged against the files as they
            # were before its first run, not as the rejected run left them.
            failed = next((call for call in record.calls
                           if call.call_id == position.retry_of), None)
            if failed is not None and failed.role == role and failed.mode == mode_text:
                before = failed.snapshot_hash
        result = await self.caller.call(record.step, role_input, context=context, again=again,
                                        before=before)
        if result.not_started:  # no attempt was made: nothing to count, resume retries
            raise WorkflowError(result.message)
        return result

    # -- planning ----------------------------------------------------------------------------

    async def _planning(self, record: WorkflowRecord, position: Position) -> None:
        mode = "INITIALIZE" if position.state is State.INITIALIZING else position.planner_mode
        role_input = PlannerInput.model_validate({
            "SESSION_PATH": self.session.session_path, "MODE": mode,
            "USER_REQUEST": position.request, "CONTEXT": position.planner_context})
        result = await self._call(record, role_input)
        if not result.ok or not isinstance(result.output, PlannerOutput):
            self._fail(position, f"the planner ({mode}) was not usable: {result.why()}")
            return
        output = result.output
        if output.status in ("blocked", "needs_clarification"):
            self.move(position, State.BLOCKED, f"the planner is {output.status}",
                      blockers=list(output.blockers), planner_mode=mode,
                      planner_context=position.planner_context,
                      completion_check=position.completion_check)
            return
        try:
            files = validate_session(self.session)
        except WorkflowError as exc:
            self._fail(position, f"the planner ({mode}) left the session invalid: {exc}")
            return
        wants_qa = output.status == "needs_qa_cycle" or any(
            action in _QA_ACTIONS for action in output.next_actions)
        if wants_qa and not position.completion_check:
            if position.qa_cycle < self.limits.max_qa_cycles:
                self.move(position, State.QA, "the planner asks for a Q&A cycle",
                          qa_cycle=position.qa_cycle + 1)
                return
            self.emit("workflow.note", {"message": f"the planner asks for another Q&A cycle, "
                                                   f"but max_qa_cycles "
                                                   f"({self.limits.max_qa_cycles}) are done: "
                                                   "going on with the tasks"})
        if position.completion_check and not _open_tasks(files):
            self.move(position, State.COMPLETE,
                      "every task is done and the completion check found no gap")
            return
        self.move(position, State.EXECUTING, "the tasks are ready")

    async def _qa(self, record: WorkflowRecord, position: Position) -> None:
        phase = position.qa_phase
        role_input = QuestionerInput.model_validate({
            "SESSION_PATH": self.session.session_path, "MODE": phase,
            "CYCLE_NUMBER": position.qa_cycle})
        result = await self._call(record, role_input)
        summary: dict[str, Any] = {"qa_cycle": position.qa_cycle, "phase": phase}
        if result.ok and isinstance(result.output, QuestionerOutput):
            summary |= result.output.model_dump(mode="json", exclude_defaults=True)
        else:
            summary["questioner_problem"] = result.why()
        if phase == "BRAINSTORM" and result.ok:
            self.move(position, State.QA, f"Q&A cycle {position.qa_cycle}: research",
                      qa_cycle=position.qa_cycle, qa_phase="RESEARCH", qa_brainstorm=summary)
            return
        context = {"qa_cycle": position.qa_cycle,
                   "brainstorm": position.qa_brainstorm if phase == "RESEARCH" else summary,
                   "research": summary if phase == "RESEARCH" else None}
        self.move(position, State.PLANNING, f"Q&A cycle {position.qa_cycle} done",
                  planner_mode="UPDATE", planner_context=context)

    # -- executing ---------------------------------------------------------------------------

    async def _executing(self, record: WorkflowRecord, position: Position) -> None:
        in_flight = record.in_flight(record.step)
        task_id, attempt = position.task_id, position.attempt
        if in_flight is not None and in_flight.role == "executor":
            task_id = str(in_flight.input.get("TASK_ID"))
            attempt = int(in_flight.input.get("ATTEMPT_NUMBER", 1))
        elif task_id is None:
            files = validate_session(self.session)
            chosen = self._choose(position, files)
            if chosen is None:
                return
            task_id, attempt = chosen, position.attempts.get(chosen, 0) + 1
            position = self.move(position, State.EXECUTING, f"{task_id}, attempt {attempt}",
                                 task_id=task_id, attempt=attempt)
            record = read_record(self.store, self.session.session_id)
        role_input = ExecutorInput.model_validate({
            "SESSION_PATH": self.session.session_path, "TASK_ID": task_id,
            "ATTEMPT_NUMBER": attempt})
        result = await self._call(record, role_input)
        output = result.output if isinstance(result.output, ExecutorOutput) else None
        for_planner = dict(position.for_planner)
        if output is not None and result.ok and output.discovered_tasks:
            for_planner.setdefault("discovered_tasks", []).extend(
                task.model_dump(mode="json", exclude_defaults=True)
                for task in output.discovered_tasks)
        if result.ok and output is not None and output.status == "completed" and \
                output.success_criteria_met:
            self.move(position, State.REVIEWING, f"{task_id}, attempt {attempt}: review",
                      task_id=task_id, attempt=attempt, for_planner=for_planner)
            return
        if result.ok and output is not None and output.status == "blocked":
            for_planner.setdefault("blocked_tasks", []).append(
                {"task_id": task_id, "blockers": list(output.blockers)})
            why = f"the executor is blocked: {'; '.join(output.blockers)}"
        elif result.ok and output is not None:
            why = (f"the executor reports {output.status}, success criteria "
                   f"{'met' if output.success_criteria_met else 'not met'}")
        else:
            why = f"the executor's answer was not usable: {result.why()}"
        await self._attempt_failed(position, task_id, attempt, why, for_planner)

    def _choose(self, position: Position, files: SessionFiles) -> str | None:
        """The next task to run (in tasks.md's order, its dependencies done), or None after
        moving on: to the planner (no tasks yet, or a completion check) or to FAILED."""
        tasks = files.tasks
        markers = files.progress.markers if files.progress is not None else {}
        implementation = [t for t in (tasks.tasks if tasks else ())
                          if t.kind is TaskKind.IMPLEMENTATION]
        if not implementation:
            if not position.broke_down:
                self.move(position, State.PLANNING, "no implementation task yet",
                          planner_mode="TASK_BREAKDOWN", broke_down=True)
            else:
                self._fail(position, "the planner made no implementation task",
                           resumable=False)
            return None
        for task in implementation:
            if markers.get(task.task_id) is not Marker.NOT_STARTED:
                continue
            if all(markers.get(dep) is Marker.COMPLETED for dep in task.dependencies):
                return task.task_id
        failed = [t.task_id for t in implementation if markers.get(t.task_id) is Marker.FAILED]
        waiting = [t.task_id for t in implementation if markers.get(t.task_id) in _OPEN]
        if failed:
            reasons = "; ".join(f"{task}: {position.failures.get(task, 'failed')}"
                                for task in failed)
            left = f" ({', '.join(waiting)} cannot run)" if waiting else ""
            self._fail(position, f"failed task{'s' if len(failed) > 1 else ''}: "
                                 f"{reasons}{left}", resumable=False)
            return None
        if waiting:
            self._fail(position, f"no task can run: {', '.join(waiting)} "
                                 "wait for tasks that are not done", resumable=False)
            return None
        if position.completion_rounds >= MAX_COMPLETION_ROUNDS:
            self._fail(position, f"{MAX_COMPLETION_ROUNDS} completion checks each found gaps",
                       resumable=False)
            return None
        reports = {}
        for task in implementation:
            found = self.session.reports(task.task_id)
            if found:
                reports[task.task_id] = found[max(found)].name
        self.move(position, State.PLANNING, "every task is done: the completion check",
                  planner_mode="UPDATE", completion_check=True,
                  completion_rounds=position.completion_rounds + 1,
                  planner_context={"completion_check": True,
                                   "instruction": "Check the whole goal of plan.md against "
                                                  "the reports: add a task for each gap, or "
                                                  "answer next_actions [\"complete\"].",
                                   "reports": reports})
        return None

    async def _attempt_failed(self, position: Position, task_id: str, attempt: int,
                              why: str, for_planner: dict[str, Any]) -> None:
        """`[ ]` for a rework, or `[F]` once the attempts are used up; then on."""
        attempts = {**position.attempts, task_id: attempt}
        failures = {**position.failures, task_id: why}
        if attempt >= self.limits.max_task_attempts:
            self._set(task_id, Marker.FAILED, attempt,
                      f"{attempt} attempt{'s' if attempt > 1 else ''}, {why}")
            await self._commit(task_id, attempt, status="failed", why=why)
        else:
            self._set(task_id, Marker.NOT_STARTED, attempt, why)
            await self._commit(task_id, attempt, status="not_done", why=why)
        self._after_task(position, attempts, failures, for_planner,
                         f"{task_id}, attempt {attempt} not done: {why}")

    def _after_task(self, position: Position, attempts: dict[str, int],
                    failures: dict[str, str], for_planner: dict[str, Any], why: str) -> None:
        if for_planner:
            self.move(position, State.PLANNING, f"{why}; the planner gets "
                                                f"{', '.join(sorted(for_planner))}",
                      planner_mode="TASK_BREAKDOWN",
                      planner_context=for_planner, attempts=attempts, failures=failures,
                      for_planner={})
        else:
            self.move(position, State.EXECUTING, why, attempts=attempts, failures=failures,
                      for_planner={})

    # -- reviewing ---------------------------------------------------------------------------

    async def _reviewing(self, record: WorkflowRecord, position: Position) -> None:
        task_id, attempt = position.task_id, position.attempt
        assert task_id is not None
        gates = record.gates.get((record.step, task_id, attempt))
        if gates is None:
            gates = await self._run_gates(record.step, task_id, attempt)
            record = read_record(self.store, self.session.session_id)
        report = report_name(task_id, attempt)
        role_input = ReviewerInput.model_validate({
            "SESSION_PATH": self.session.session_path, "TASK_ID": task_id,
            "REPORT_PATH": report})
        result = await self._call(record, role_input, context=_gates_context(gates))
        output = result.output if isinstance(result.output, ReviewerOutput) else None
        qualified = result.ok and output is not None and output.status == "completed" and \
            output.verdict == "Qualified"
        attempts = {**position.attempts, task_id: attempt}
        if qualified and gates["passed"]:
            self._set(task_id, Marker.COMPLETED, attempt, None)
            await self._commit(task_id, attempt)
            failures = {k: v for k, v in position.failures.items() if k != task_id}
            self._after_task(position, attempts, failures, dict(position.for_planner),
                             f"{task_id} done (attempt {attempt})")
            return
        if qualified:
            why = f"Qualified, but the gates failed: {_failed_gates(gates)}"
        elif result.ok and output is not None and output.status == "completed":
            why = "review failed" + (f": {output.feedback}" if output.feedback else "")
        elif result.ok and output is not None:
            why = "the reviewer could not review (status error)"
        else:
            why = f"the reviewer's answer was not usable: {result.why()}"
        if not gates["passed"] and not qualified:
            why += f"; gates failed: {_failed_gates(gates)}"
        await self._attempt_failed(position, task_id, attempt, why, dict(position.for_planner))

    async def _run_gates(self, step: int, task_id: str, attempt: int) -> dict[str, Any]:
        commands = list(self.config.gates.commands)
        receipts: list[GateReceipt] = []
        made: list[str] = []
        if commands:
            repo = await self.git.is_repo()
            pre = await self.git.snapshot(exclude=RUNTIME_PATHS) if repo else None
            receipts = await run_gates(
                commands, cwd=self.root, timeout_s=float(self.config.gates.timeout_seconds),
                receipts_dir=(self.root / ".ralph" / "workflows" / self.session.session_id
                              / "gates" / f"{task_id}-{attempt}"),
                emit=self.emit.tagged(task_id=task_id, attempt=attempt))
            if pre is not None:
                post = await self.git.snapshot(exclude=RUNTIME_PATHS, untracked="normal")
                made, changed = gate_changes(pre, post)
                # The loop's record of what gates make: a later start (of a workflow or a
                # run) counts them as the gates' doing, not as the user's changes. The
                # workflow holds the loop lock, so nothing else writes state.json now.
                paths = ProjectPaths(self.root)
                state = load_state(paths.state)
                remember_gate_outputs(state, made, changed)
                save_state(paths.state, state)
        gates = {"step": step,
                 "task_id": task_id, "attempt": attempt,
                 "passed": all(receipt.ok for receipt in receipts),
                 "gates": [{"command": r.command, "ok": r.ok, "exit_code": r.exit_code,
                            "timed_out": r.timed_out, "error": r.error,
                            "output_tail": r.output_tail} for r in receipts],
                 "made": made}
        self.emit("workflow.gates", gates)
        return gates

    # -- markers and commits -----------------------------------------------------------------

    def _set(self, task_id: str, marker: Marker, attempt: int, reason: str | None) -> None:
        was = set_marker(self.session.progress, task_id, marker, reason=reason)
        if was is marker is Marker.COMPLETED:
            return  # set before a stop that came before the step's end: done once
        self.emit("workflow.task", {"task_id": task_id, "marker": marker.value,
                                    "from": was.value, "attempt": attempt, "reason": reason})

    async def _commit(self, task_id: str, attempt: int, *, status: str | None = None,
                      why: str | None = None) -> None:
        """Commit the attempt's work and the session's files, as the loop commits an
        iteration: `status` None for a task done, `not_done` for an attempt to rework,
        `failed` for the last one (the message says why)."""
        files = validate_session(self.session)
        task = files.tasks.get(task_id) if files.tasks is not None else None
        title = task.description if task is not None else task_id
        await self._commit_tree(attempt_message(self.config, (task_id, title), attempt,
                                                attempt, status, why), task_id)

    async def commit_stopped(self, by: str) -> None:
        """Commit what a stopped step left (the tree is clean for whatever comes next, as
        after a stopped loop iteration); the step runs again on resume."""
        position = read_record(self.store, self.session.session_id).position
        where = position.state.value if position is not None else "?"
        task_id = position.task_id if position is not None else None
        if position is not None and task_id is not None:
            where += f", {task_id} attempt {position.attempt}"
        await self._commit_tree(f"ralph: workflow {self.session.session_id} stopped by {by} "
                                f"({where})", task_id)

    async def _commit_session(self, how: str) -> None:
        """Commit the session's own files (the planner's last updates) as the session ends."""
        await self._commit_tree(f"ralph: workflow {self.session.session_id} {how}", None,
                                session_only=True)

    async def _commit_tree(self, message: str, task_id: str | None, *,
                           session_only: bool = False) -> None:
        """The workflow's one way to commit, following ralph.toml's [git] as the loop does
        (nothing when auto_commit is off or the project is not in git): every change but
        Ralph's runtime files and what the gates made, or only the session's own files."""
        if not self.config.git.auto_commit or not await self.git.is_repo():
            return
        tree = await self.git.snapshot(exclude=RUNTIME_PATHS)
        if session_only:
            folder = self.session.relative(self.session.path) + "/"
            instructions = self.session.relative(self.session.instructions)
            paths = [path for _, path in tree.changes
                     if path.startswith(folder) or path == instructions]
        else:
            state = load_state(ProjectPaths(self.root).state, repair=False)
            paths = [path for code, path in tree.changes
                     if not by_gates(code, path, tree.stamps.get(path, ""), state)]
        sha = await self.git.commit_paths(message, paths)
        if sha is not None:
            self.emit("workflow.commit", {"task_id": task_id, "sha": sha, "message": message})

    def _fail(self, position: Position, reason: str, *, resumable: bool = True) -> None:
        """FAILED; a resumable failure keeps the step to run again (`resume_to`)."""
        self.move(position, State.FAILED, reason,
                  resume_to=position.to_json() if resumable else None)


def record_state(emit: EventSink, position: Position, came_from: str | None,
                 reason: str) -> None:
    """The `workflow.state` event: the state, where it came from, why, and the position."""
    emit("workflow.state", {"state": position.state.value, "from": came_from,
                            "reason": reason, "position": position.to_json()})


def _open_tasks(files: SessionFiles) -> list[str]:
    if files.tasks is None or files.progress is None:
        return []
    markers = files.progress.markers
    return [t.task_id for t in files.tasks.tasks if t.kind is TaskKind.IMPLEMENTATION
            and markers.get(t.task_id) in _OPEN]


def _failed_gates(gates: dict[str, Any]) -> str:
    failed = [g for g in gates["gates"] if not g["ok"]]
    return ", ".join(f"`{g['command']}` " + ("timed out" if g["timed_out"] else
                                             f"exit {g['exit_code']}" if g["exit_code"]
                                             is not None else (g["error"] or "did not run"))
                     for g in failed)


def _gates_context(gates: dict[str, Any]) -> str:
    """The gate results the reviewer is given after its input lines."""
    if not gates["gates"]:
        return "## Gate results\n\nNo gates are configured (ralph.toml [gates] commands)."
    lines = ["## Gate results", "",
             "Ralph ran the project's gates after the executor. A task with a failing gate "
             "is not done, whatever the verdict.", ""]
    for gate in gates["gates"]:
        status = "passed" if gate["ok"] else "FAILED"
        lines.append(f"- `{gate['command']}`: {status} (exit {gate['exit_code']})")
        if gate["output_tail"]:
            lines += ["", "  ```", *(f"  {line}" for line in gate["output_tail"].splitlines()),
                      "  ```"]
    return "\n".join(lines)

"""Side effects checked, not believed: what a role claims, held against the session's files.

`check_side_effects(before, after, role, role_input, output)` compares two snapshots of the
session (taken just before and just after the role ran) with the role's input and validated
output, and returns the contract violations: each says what was claimed (by the output, or
by the contract for that role and mode) and what the files show. An empty list means the
files bear the role out. It reads nothing from disk, so it is tested with hand-made
snapshots; `snapshot(session)` takes the real ones.

Besides the writes a role owes, every other change is looked at: each role may change only
its own files (questioner: plan.questions.md; reviewer: the report it reviews; executor: its
report and its own task's line of progress.md; planner: plan.md, tasks.md, progress.md, the
instructions file, and plan.questions.md in DISCOVERY). A planner adds tasks as `[ ]` and may
set planning tasks to `[x]`, but moves no existing implementation task's marker.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from ralph.workflow.contracts import ROLES
from ralph.workflow.errors import WorkflowError
from ralph.workflow.progress import Marker, ProgressFile, parse_progress
from ralph.workflow.reports import parse_report
from ralph.workflow.session_dir import (
    PLAN,
    PROGRESS,
    QUESTIONS,
    TASKS,
    parse_report_name,
    report_name,
)
from ralph.workflow.snapshot import FileState, Snapshot, snapshot
from ralph.workflow.tasks_file import TaskKind, parse_tasks

__all__ = ["FileState", "Snapshot", "Violation", "check_side_effects", "snapshot"]

# Statuses after which a planner's mode must have left its files (a blocked planner, or
# one asking for clarification, may have written nothing).
_PLANNER_DONE = ("completed", "needs_qa_cycle")


@dataclass(frozen=True)
class Violation:
    """A claim the files contradict: what was claimed, and what the files show."""

    claim: str
    found: str


def check_side_effects(before: Snapshot, after: Snapshot, role: str,
                       role_input: Mapping[str, Any] | BaseModel,
                       output: Mapping[str, Any] | BaseModel) -> list[Violation]:
    """The violations of a role's run (empty: none). `role` is planner, executor, reviewer
    or questioner (any case, `Ralph-` prefix allowed); `role_input` and `output` are the
    validated models or their dicts, with the contract's field names (SESSION_PATH, TASK_ID,
    ...; status, report_path, ...). WorkflowError for an unknown role."""
    name = role.strip().lower().removeprefix("ralph-")
    if name not in ROLES:
        raise WorkflowError(f"unknown role {role!r}: expected one of {', '.join(ROLES)}")
    check = _CHECKS[name]
    return check(_Run(before, after, _as_dict(role_input), _as_dict(output)))


def _as_dict(value: Mapping[str, Any] | BaseModel) -> dict[str, Any]:
    if isinstance(value, BaseModel):
        # Both spellings: the models may name fields in Python style with the contract's
        # names as aliases.
        return {**value.model_dump(mode="json"), **value.model_dump(mode="json", by_alias=True)}
    return dict(value)


@dataclass(frozen=True)
class _Run:
    """One role run: the snapshots and the role's input and output."""

    before: Snapshot
    after: Snapshot
    given: dict[str, Any]
    output: dict[str, Any]

    def field(self, source: dict[str, Any], name: str) -> Any:
        for key in (name, name.lower(), name.upper()):
            if key in source:
                return source[key]
        return None

    def arg(self, name: str) -> Any:
        return self.field(self.given, name)

    def out(self, name: str) -> Any:
        return self.field(self.output, name)

    def where(self) -> str:
        return self.after.session.session_path

    def changed(self, key: str) -> bool:
        """Whether `key` was created, changed or deleted."""
        return self.before.files.get(key) != self.after.files.get(key)

    def progress(self, snap: Snapshot) -> ProgressFile | str | None:
        """progress.md parsed, the error that makes it unreadable, or None if absent."""
        text = snap.text(PROGRESS)
        if text is None:
            return None
        try:
            return parse_progress(text, PROGRESS)
        except WorkflowError as exc:
            return str(exc)

    def markers(self, snap: Snapshot) -> dict[str, Marker] | str:
        """progress.md's markers, or the error that makes it unreadable."""
        progress = self.progress(snap)
        if progress is None:
            return {}
        return progress if isinstance(progress, str) else progress.markers


def _created(run: _Run, key: str, claim: str) -> list[Violation]:
    """`key` must exist now and be new or rewritten."""
    if not run.after.exists(key):
        return [Violation(claim, f"no {key} in {run.where()}")]
    if run.before.exists(key) and not run.changed(key):
        return [Violation(claim, f"{key} was there before and is unchanged")]
    return []


def _updated(run: _Run, key: str, claim: str) -> list[Violation]:
    """`key` must exist now with other bytes than before (or be new)."""
    if not run.after.exists(key):
        return [Violation(claim, f"no {key} in {run.where()}")]
    if key in run.after.files and not run.changed(key):
        return [Violation(claim, f"{key} is unchanged")]
    return []


def _outside(run: _Run, allowed: Collection[str], role: str) -> list[Violation]:
    """Every file added, modified or removed other than the role's own (`allowed`)."""
    own = ", ".join(sorted(allowed)) or "no file"
    found: list[Violation] = []
    for key in sorted(set(run.before.files) | set(run.after.files)):
        if key in allowed or not run.changed(key):
            continue
        what = ("added" if key not in run.before.files
                else "removed" if key not in run.after.files else "modified")
        moved = _moved(run) if key == PROGRESS else ""
        found.append(Violation(f"the {role} changes only {own}",
                               f"{key} {what}" + (f" ({moved})" if moved else "")))
    return found


def _moved(run: _Run) -> str:
    """The markers that moved between the snapshots, `task-1 [P] -> [x], ...`."""
    before, after = run.markers(run.before), run.markers(run.after)
    if isinstance(before, str) or isinstance(after, str):
        return ""
    return ", ".join(f"{task} {_show(before.get(task))} -> {_show(after.get(task))}"
                     for task in sorted(set(before) | set(after))
                     if before.get(task) != after.get(task))


def _check_planner(run: _Run) -> list[Violation]:
    mode = str(run.arg("MODE") or "").upper()
    status = str(run.out("status") or "")
    found: list[Violation] = []
    if status in _PLANNER_DONE:
        if mode == "INITIALIZE":
            for name in (PLAN, TASKS, PROGRESS, run.after.instructions_key):
                found += _created(run, name, f"MODE INITIALIZE creates {name}")
        elif mode == "TASK_BREAKDOWN":
            # Nothing to add (the tasks asked for are there already) is a valid breakdown;
            # a claim to have updated tasks.md is checked with the other claims.
            if not run.after.exists(TASKS):
                found.append(Violation(f"MODE TASK_BREAKDOWN leaves a {TASKS}",
                                       f"no {TASKS} in {run.where()}"))
        elif mode == "UPDATE":
            for name in (PLAN, TASKS, PROGRESS):
                if not run.after.exists(name):
                    found.append(Violation(f"MODE UPDATE keeps {name}", f"no {name} in "
                                           f"{run.where()}"))
        elif mode == "DISCOVERY" and not run.before.exists(QUESTIONS):
            found += _created(run, QUESTIONS, f"MODE DISCOVERY (first cycle) creates {QUESTIONS}")
    for label, check in (("artifacts_created", _created), ("artifacts_updated", _updated)):
        for claimed in run.out(label) or []:
            key = run.after.key_for(str(claimed))
            claim = f"{label}: {claimed}"
            if key is None:
                found.append(Violation(claim, "not a file of this session (paths are relative "
                                       "to the session directory or the project root)"))
            else:
                found += check(run, key, claim)
    found += _task_count(run)
    allowed = {PLAN, TASKS, PROGRESS, run.after.instructions_key}
    if mode == "DISCOVERY":
        allowed.add(QUESTIONS)
    return found + _outside(run, allowed, "planner") + _planner_markers(run)


def _planner_markers(run: _Run) -> list[Violation]:
    """New tasks `[ ]` (planning tasks also `[x]`), planning tasks set `[x]`, and no existing
    implementation task's marker moved or removed."""
    before, after = run.markers(run.before), run.markers(run.after)
    if isinstance(after, str):
        return [Violation(f"the planner leaves {PROGRESS} readable", after)]
    if isinstance(before, str):
        return []
    planning = _planning_ids(run.before) | _planning_ids(run.after)
    found: list[Violation] = []
    for task in sorted(set(before) | set(after)):
        was, now = before.get(task), after.get(task)
        if was == now:
            continue
        moved = f"{task} {_show(was)} -> {_show(now)}"
        if task in planning or task.startswith("plan-"):
            if now is Marker.COMPLETED or (was is None and now is Marker.NOT_STARTED):
                continue
            found.append(Violation("the planner adds planning tasks as [ ] and sets them [x] "
                                   "only", moved))
        elif was is not None:
            found.append(Violation(f"the planner moves no implementation task's marker "
                                   f"({task} is the executor's and the orchestrator's)", moved))
        elif now is not Marker.NOT_STARTED:
            found.append(Violation("the planner adds implementation tasks as [ ]", moved))
    return found


def _planning_ids(snap: Snapshot) -> set[str]:
    """The planning tasks of a snapshot's tasks.md (none if absent or unreadable)."""
    text = snap.text(TASKS)
    if text is None:
        return set()
    try:
        tasks = parse_tasks(text, TASKS)
    except WorkflowError:
        return set()
    return {task.task_id for task in tasks.tasks if task.kind is TaskKind.PLANNING}


def _task_count(run: _Run) -> list[Violation]:
    claimed = run.out("task_count")
    if not isinstance(claimed, Mapping):
        return []
    text = run.after.text(TASKS)
    if text is None:
        total = claimed.get("total")
        if any(claimed.get(key) for key in ("planning", "implementation", "total")):
            return [Violation(f"task_count {dict(claimed)}", f"no {TASKS} (total {total})")]
        return []
    try:
        tasks = parse_tasks(text, TASKS)
    except WorkflowError as exc:
        return [Violation(f"task_count {dict(claimed)}", str(exc))]
    actual = {"planning": tasks.count(TaskKind.PLANNING),
              "implementation": tasks.count(TaskKind.IMPLEMENTATION),
              "total": tasks.count()}
    return [Violation(f"task_count.{key} = {claimed[key]}", f"{TASKS} has {actual[key]}")
            for key in ("planning", "implementation", "total")
            if claimed.get(key) is not None and claimed[key] != actual[key]]


def _check_executor(run: _Run) -> list[Violation]:
    task_id = str(run.arg("TASK_ID") or "")
    attempt = run.arg("ATTEMPT_NUMBER") or 1
    status = str(run.out("status") or "")
    met = run.out("success_criteria_met") is True
    expected = report_name(task_id, int(attempt))
    found: list[Violation] = []
    claimed = str(run.out("report_path") or "").strip()
    key = run.after.key_for(claimed) if claimed else None
    if not claimed:
        if status in ("completed", "failed"):
            found.append(Violation(f"a report for attempt {attempt} ({expected})",
                                   "report_path is empty"))
    elif key is None:
        found.append(Violation(f"report_path {claimed}", "not a file of this session"))
    elif status == "blocked" and not run.after.exists(key):
        pass  # report_path is required even of a blocked executor, which may write none
    else:
        if key != expected:
            found.append(Violation(f"report_path {claimed} for ATTEMPT_NUMBER {attempt}",
                                   f"attempt {attempt}'s report is named {expected}"))
        found += _created(run, key, f"report_path {claimed} written")
        text = run.after.text(key)
        if text is not None and not parse_report(text).has_part1:
            found.append(Violation(f"report {key} has its PART 1",
                                   "no `## PART 1` heading in it"))
    found += _executor_markers(run, task_id, status, met)
    allowed = {PROGRESS} | ({key} if key is not None and parse_report_name(key) else set())
    return found + _outside(run, allowed, "executor")


def _executor_markers(run: _Run, task_id: str, status: str, met: bool) -> list[Violation]:
    before, after = run.markers(run.before), run.markers(run.after)
    if isinstance(after, str):
        return [Violation(f"{PROGRESS} with {task_id}'s marker moved", after)]
    now = after.get(task_id)
    if now is None:
        return [Violation(f"{task_id} has a status line in {PROGRESS}", "it has none")]
    was = before.get(task_id) if isinstance(before, dict) else None
    moved = f"{_show(was)} -> {now.value}"
    success = status == "completed" and met
    found: list[Violation] = []
    if now in (Marker.COMPLETED, Marker.FAILED):
        found.append(Violation(f"the executor marks {task_id} [/] or [P] only",
                               f"{task_id} {moved}: [x] and [F] are the orchestrator's"))
    elif success and now is not Marker.REVIEW_PENDING:
        found.append(Violation(f"status completed, success_criteria_met true: {task_id} [P]",
                               f"{task_id} {moved}"))
    elif not success and now is Marker.REVIEW_PENDING:
        found.append(Violation(f"status {status}, success_criteria_met {str(met).lower()}: "
                               f"{task_id} not [P]", f"{task_id} {moved}"))
    elif status == "completed" and now is Marker.NOT_STARTED:
        found.append(Violation(f"implementation started: {task_id} [ ] -> [/] at least",
                               f"{task_id} {moved}"))
    if isinstance(before, dict):
        for other in sorted(set(before) | set(after)):
            if other != task_id and before.get(other) != after.get(other):
                found.append(Violation(f"the executor moves only {task_id}'s marker",
                                       f"{other} {_show(before.get(other))} -> "
                                       f"{_show(after.get(other))}"))
    if not found and _other_lines(run, run.before, task_id) != _other_lines(run, run.after,
                                                                              task_id):
        found.append(Violation(f"the executor changes only {task_id}'s line of {PROGRESS}",
                               "other lines changed"))
    return found


def _other_lines(run: _Run, snap: Snapshot, task_id: str) -> list[str]:
    """progress.md's lines other than `task_id`'s status line(s), line endings ignored."""
    progress, text = run.progress(snap), snap.text(PROGRESS)
    if text is None:
        return []
    own = ({entry.line for entry in progress.entries if entry.task_id == task_id}
           if isinstance(progress, ProgressFile) else set())
    return [line.rstrip() for number, line in enumerate(text.splitlines(), start=1)
            if number not in own]


def _check_reviewer(run: _Run) -> list[Violation]:
    claimed = str(run.arg("REPORT_PATH") or "")
    status = str(run.out("status") or "")
    verdict = str(run.out("verdict") or "")
    key = run.after.key_for(claimed)
    found: list[Violation] = []
    if key is None:
        return [Violation(f"REPORT_PATH {claimed} reviewed", "not a file of this session")]
    text_after, text_before = run.after.text(key), run.before.text(key)
    outside = _outside(run, {key}, "reviewer")
    if status == "completed" and text_before is None:
        # A reviewer reviews the executor's report; it does not write one of its own.
        return [Violation(f"{key} with the executor's PART 1 reviewed",
                          f"no {key} before the reviewer ran"), *outside]
    if text_after is None:
        # A review that ended in error over a missing report is honest about it.
        if status != "completed":
            return outside
        return [Violation(f"PART 2 appended to {key}", f"no {key} in {run.where()}"), *outside]
    report = parse_report(text_after)
    appended = report.part2_count > 0
    if text_before is not None:
        earlier = parse_report(text_before)
        if status == "completed" and not earlier.has_part1:
            found.append(Violation(f"{key} with the executor's PART 1 reviewed",
                                   f"{key} had no `## PART 1` before the reviewer ran"))
        if report.head != earlier.head:
            found.append(Violation(f"the reviewer leaves {key}'s PART 1 as it is",
                                   "the text before PART 2 changed"))
        if (report.part2_count, report.last_part2) == (earlier.part2_count, earlier.last_part2):
            appended = False
    if status == "completed":
        if not appended:
            found.append(Violation(f"PART 2 appended to {key}", "no new PART 2 section"))
        elif report.status is None:
            shown = report.status_text if report.status_text is not None else "none"
            found.append(Violation(f"verdict {verdict} in PART 2's **Status** line",
                                   f"the last PART 2's last **Status**: {shown}"))
        elif report.status.value != verdict:
            found.append(Violation(f"verdict {verdict}",
                                   f"{key}'s PART 2 says **Status**: {report.status.value}"))
    # progress.md is the orchestrator's: a moved marker is among `outside`'s changes.
    return found + outside


def _show(marker: Marker | None) -> str:
    return marker.value if marker is not None else "absent"


def _check_questioner(run: _Run) -> list[Violation]:
    found: list[Violation] = []
    if str(run.out("status") or "") == "completed":
        found += _updated(run, QUESTIONS, f"{QUESTIONS} updated")
    return found + _outside(run, {QUESTIONS}, "questioner")


_CHECKS: dict[str, Callable[[_Run], list[Violation]]] = {
    "planner": _check_planner,
    "executor": _check_executor,
    "reviewer": _check_reviewer,
    "questioner": _check_questioner,
}

"""tasks.md read into tasks: ids, descriptions, fields and dependencies.

The planner writes tasks under `## Planning Tasks` and `## Implementation Tasks`, one task a
line `- <id>: <description>`, followed by indented field bullets `- **Field**: value`
(Type, Files or Deliverables, Objective, Success Criteria, Inherits From). Agents vary in the
details, so the reader is tolerant of them: checkbox (`- [ ] task-1: ...`) and numbered
(`1. task-1: ...`) task lines, indented sub-tasks (`    - task-2.1: ...`), field bullets with
or without bold, at any indentation, `*` or `-` bullets, a value continued on further
indented lines (multi-line success criteria), unknown fields (kept). Only the `## Planning...`
and `## Implementation...` sections (and text before the first `##` section) hold tasks: a
`## Task Summary` repeating ids is not read. It is strict where the orchestrator depends on
it: a task id appears once, and a line that looks like a task (a task id and `:`) but cannot
be read is an error, never dropped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum

from ralph.workflow.errors import WorkflowError
from ralph.workflow.session_dir import TASK_ID_PATTERN

_HEADING_RE = re.compile(r"(?P<hashes>#{1,6})\s+(?P<title>.*?)\s*#*\s*")
# `- task-1: ...`, `- [ ] task-1: ...`, `1. task-1: ...`, `- **task-1**: ...`, `- **task-1:** ...`
_TASK_RE = re.compile(
    rf"(?P<indent>\s*)(?:[-*]\s+(?:\[.\]\s+)?|\d+[.)]\s+)(?P<q>\*\*|`)?"
    rf"(?P<id>{TASK_ID_PATTERN})(?:(?P=q)\s*:|\s*:(?P=q)|\s*:)\s*(?P<description>.*)")
_BOLD_FIELD_RE = re.compile(r"\s*[-*]\s+\*\*(?P<name>[^*:]+?):?\*\*\s*:?\s*(?P<value>.*)")
_PLAIN_FIELD_RE = re.compile(r"\s*[-*]\s+(?P<name>[A-Za-z][A-Za-z /]*?)\s*:\s*(?P<value>.*)")
# Ids the way the planner names tasks: a word of them is taken to mean a task.
_LIKELY_ID = r"(?:task-[0-9]+(?:\.[0-9]+)*|plan-[A-Za-z0-9_.-]*[A-Za-z0-9_])"
_LIKELY_ID_RE = re.compile(_LIKELY_ID, re.IGNORECASE)
# Only markup before a likely id and its colon: a task line, whatever it looks like.
_LOOKS_LIKE_TASK_RE = re.compile(rf"[\s>#*+\-`\[\]()0-9.xX/]*{_LIKELY_ID}[*`]*\s*:",
                                 re.IGNORECASE)
_ID_IN_TEXT_RE = re.compile(rf"(?<![A-Za-z0-9_.-])({TASK_ID_PATTERN})(?![A-Za-z0-9_-])")
_DEPENDS_RE = re.compile(r"depends\s+on\b(?P<rest>.*)", re.IGNORECASE | re.DOTALL)
_NONE_VALUES = {"", "none", "n/a", "-", "—"}

# Field names as agents write them -> the one the reader files them under.
_FIELD_ALIASES = {
    "type": "type",
    "files": "files",
    "deliverables": "files",
    "files/deliverables": "files",
    "target files": "files",
    "objective": "objective",
    "success criteria": "success criteria",
    "inherits from": "inherits from",
    "depends on": "depends on",
    "dependencies": "depends on",
}


class TaskKind(StrEnum):
    """Whether a task plans the work or does it (task_count's two counts)."""

    PLANNING = "planning"
    IMPLEMENTATION = "implementation"


@dataclass(frozen=True)
class Task:
    """One task of tasks.md. `fields` holds every field bullet by its lower-cased name (as
    written, e.g. "deliverables"); the properties read the usual ones."""

    task_id: str
    description: str
    line: int
    section: str | None
    kind: TaskKind
    fields: Mapping[str, str] = field(default_factory=dict)
    field_lines: Mapping[str, int] = field(default_factory=dict)
    dependencies: tuple[str, ...] = ()
    """Ids of the tasks this one waits for, from "depends on" in its Type and a Depends On
    field: the words that are tasks of the file, and those that look like task ids
    (`task-<n>[.<n>]`, `plan-...`: unknown ones, for the integrity check to report); other
    hyphenated words ("read-only", "e2e-tests") are prose."""

    def _get(self, canonical: str) -> tuple[str, int] | None:
        for name, value in self.fields.items():
            if _FIELD_ALIASES.get(name, name) == canonical:
                return value, self.field_lines[name]
        return None

    @property
    def type(self) -> str | None:
        """The Type field: Sequential, Parallelizable, "Sequential (depends on task-1)"."""
        found = self._get("type")
        return None if found is None else found[0]

    @property
    def objective(self) -> str | None:
        found = self._get("objective")
        return None if found is None else found[0]

    @property
    def success_criteria(self) -> str | None:
        """The Success Criteria field, several lines joined by newlines when it has them."""
        found = self._get("success criteria")
        return None if found is None else found[0]

    @property
    def files(self) -> tuple[str, ...]:
        """The Files (or Deliverables) field split on commas, backquotes removed."""
        found = self._get("files")
        if found is None:
            return ()
        names = (part.strip().strip("`").strip() for part in re.split(r"[,\n]", found[0]))
        return tuple(name for name in names if name.lower() not in _NONE_VALUES)

    def dependency_words(self) -> tuple[str, ...]:
        """Every id-shaped word after "depends on" in Type and in a Depends On field."""
        found: list[str] = []
        type_value = self._get("type")
        if type_value is not None:
            match = _DEPENDS_RE.search(type_value[0])
            if match is not None:
                found += _ID_IN_TEXT_RE.findall(match["rest"])
        depends = self._get("depends on")
        if depends is not None:
            found += _ID_IN_TEXT_RE.findall(depends[0])
        return tuple(dict.fromkeys(found))

    @property
    def dependencies_line(self) -> int:
        """The line that states the dependencies (for messages): Type's, or the task's."""
        for canonical in ("depends on", "type"):
            found = self._get(canonical)
            if found is not None and any(word in found[0] for word in self.dependencies):
                return found[1]
        return self.line

    @property
    def inherits_from(self) -> tuple[str, ...]:
        """Ids in the Inherits From field ("None" gives none)."""
        found = self._get("inherits from")
        return () if found is None else tuple(dict.fromkeys(_ID_IN_TEXT_RE.findall(found[0])))


@dataclass(frozen=True)
class TasksFile:
    """The tasks of tasks.md in file order."""

    tasks: tuple[Task, ...]

    def get(self, task_id: str) -> Task | None:
        return next((task for task in self.tasks if task.task_id == task_id), None)

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(task.task_id for task in self.tasks)

    def count(self, kind: TaskKind | None = None) -> int:
        """How many tasks (of `kind`, or all)."""
        return sum(1 for task in self.tasks if kind is None or task.kind is kind)


def _holds_tasks(section: str | None) -> bool:
    """Whether a `##` section holds tasks: the text before any, Planning and Implementation."""
    title = (section or "").strip().strip("*_").lower()
    return section is None or title.startswith(("planning", "implementation"))


def _kind(section: str | None, task_id: str) -> TaskKind:
    title = (section or "").lower()
    if "planning" in title:
        return TaskKind.PLANNING
    if "implementation" in title:
        return TaskKind.IMPLEMENTATION
    return TaskKind.PLANNING if task_id.startswith("plan-") else TaskKind.IMPLEMENTATION


@dataclass
class _Building:
    """A task being read: its head line and the fields so far."""

    task_id: str
    description: str
    line: int
    section: str | None
    values: dict[str, list[str]] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)
    current: str | None = None

    def done(self) -> Task:
        fields = {name: "\n".join(parts).strip() for name, parts in self.values.items()}
        return Task(self.task_id, self.description, self.line, self.section,
                    _kind(self.section, self.task_id), fields, dict(self.lines))

    def add(self, line: str, number: int) -> bool:
        """Take a line after the task's head: a field, a blank or a continuation (True), or
        prose at the margin, which ends the task (False)."""
        found = _field(line)
        if found is not None:
            name, value = found
            self.values[name] = [value]
            self.lines[name] = number
            self.current = name
        elif line.strip() and line[0] not in " \t":
            return False
        elif line.strip() and self.current is not None:
            # blank lines may sit inside a multi-line value; indented lines continue it
            self.values[self.current].append(line.strip())
        return True


def _unreadable(source: str, number: int, line: str) -> WorkflowError:
    return WorkflowError(f"{source}:{number}: cannot read this task line: {line.strip()} "
                         "(expected `- <task-id>: <description>`)")


def _field(line: str) -> tuple[str, str] | None:
    """A field bullet's lower-cased name and value: any name in bold, a known one plain."""
    match = _BOLD_FIELD_RE.fullmatch(line)
    if match is None:
        match = _PLAIN_FIELD_RE.fullmatch(line)
        if match is None or " ".join(match["name"].lower().split()) not in _FIELD_ALIASES:
            return None
    return " ".join(match["name"].lower().split()), match["value"].strip()


def _resolved(tasks: list[Task]) -> tuple[Task, ...]:
    """The tasks with their dependencies: words naming a task of the file, or shaped like
    a task id."""
    known = {task.task_id for task in tasks}
    return tuple(replace(task, dependencies=tuple(
        word for word in task.dependency_words()
        if word in known or _LIKELY_ID_RE.fullmatch(word))) for task in tasks)


def parse_tasks(text: str, source: str = "tasks.md") -> TasksFile:
    """The tasks of a tasks.md text. WorkflowError `<source>:<line>: ...` for a task id that
    appears twice, or a line in a task section that looks like a task but cannot be read."""
    tasks: list[Task] = []
    first_line: dict[str, int] = {}
    section: str | None = None
    building: _Building | None = None
    in_fence = False

    def finish() -> None:
        nonlocal building
        if building is not None:
            tasks.append(building.done())
            building = None

    for number, raw in enumerate(text.splitlines(), start=1):
        if raw.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        heading = _HEADING_RE.fullmatch(raw)
        if heading is not None:
            finish()
            if len(heading["hashes"]) == 2:
                section = heading["title"]
            elif _holds_tasks(section) and _LOOKS_LIKE_TASK_RE.match(heading["title"]):
                raise _unreadable(source, number, raw)
            continue
        if not _holds_tasks(section):
            continue
        line = raw.rstrip()
        task = _TASK_RE.fullmatch(line)
        if task is not None and task["indent"] and not _LIKELY_ID_RE.fullmatch(task["id"]):
            task = None  # an indented `- Some-Word: ...` is a field or prose, not a sub-task
        if task is not None:
            finish()
            task_id = task["id"]
            if task_id in first_line:
                raise WorkflowError(f"{source}:{number}: duplicate task id {task_id} "
                                    f"(first on line {first_line[task_id]})")
            first_line[task_id] = number
            building = _Building(task_id, task["description"].strip(), number, section)
            continue
        if _LOOKS_LIKE_TASK_RE.match(line):
            raise _unreadable(source, number, line)
        if building is not None and not building.add(line, number):
            finish()  # prose at the margin ends the task
    finish()
    return TasksFile(_resolved(tasks))

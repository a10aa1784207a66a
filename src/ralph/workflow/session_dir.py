"""A workflow session's directory: its id, where each of its files lives, and its report names.

A session lives in `.ralph-sessions/<SESSION_ID>/` under the project root, its id the local
time it was created as `YYMMDD-HHMMSS`. Beside the directory (not in it) is the session's
instructions file `.ralph-sessions/<SESSION_ID>.instructions.md`. Roles are given the
directory as `SESSION_PATH`, relative to the project root and with the trailing slash
(`.ralph-sessions/260131-144400/`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from ralph.workflow.errors import WorkflowError

SESSIONS_DIR = ".ralph-sessions"
PLAN = "plan.md"
TASKS = "tasks.md"
PROGRESS = "progress.md"
QUESTIONS = "plan.questions.md"

_SESSION_ID_RE = re.compile(r"\d{6}-\d{6}")
# Task ids: words joined by `-` (at least one) or `.`: task-1, task-2.1, plan-init,
# qa-brainstorm. Requiring a hyphen keeps prose bullets ("- Note: ...", a legend's
# "- [ ] Not Started") from being read as tasks; no `/` or `..` can reach a file name.
TASK_ID_PATTERN = (r"[A-Za-z][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*"
                   r"(?:-[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*)+")
_TASK_ID_RE = re.compile(TASK_ID_PATTERN)
_REPORT_RE = re.compile(rf"tasks\.(?P<task>{TASK_ID_PATTERN})-report(?:-r(?P<n>[0-9]+))?\.md")
# How many later seconds a new session may take when its own second is taken (see create).
_MAX_ID_CLASHES = 3600


def validate_session_id(session_id: str) -> str:
    """`session_id` if it has the shape `YYMMDD-HHMMSS`; else WorkflowError (so no id can be a
    path such as `../x`)."""
    if not _SESSION_ID_RE.fullmatch(session_id):
        raise WorkflowError(f"invalid session id {session_id!r}: expected YYMMDD-HHMMSS, "
                            "e.g. 260131-144400")
    return session_id


def is_task_id(text: str) -> bool:
    """Whether `text` is a well-formed task id (task-1, task-2.1, plan-init)."""
    return _TASK_ID_RE.fullmatch(text) is not None


def validate_task_id(task_id: str) -> str:
    """`task_id` if well-formed; else WorkflowError."""
    if not is_task_id(task_id):
        raise WorkflowError(f"invalid task id {task_id!r}: expected e.g. task-1, task-2.1 "
                            "or plan-init")
    return task_id


def session_id_for(moment: datetime) -> str:
    """The session id of a local time: `YYMMDD-HHMMSS`."""
    return moment.strftime("%y%m%d-%H%M%S")


def report_name(task_id: str, attempt: int) -> str:
    """The report file of a task's attempt: `tasks.<TASK_ID>-report.md` for attempt 1,
    `tasks.<TASK_ID>-report-r<N>.md` for attempt N >= 2."""
    validate_task_id(task_id)
    if attempt < 1:
        raise WorkflowError(f"invalid attempt number {attempt}: attempts count from 1")
    return f"tasks.{task_id}-report.md" if attempt == 1 else f"tasks.{task_id}-report-r{attempt}.md"


def parse_report_name(name: str) -> tuple[str, int] | None:
    """(task id, attempt) of a report file name, or None if `name` is not one (`-r1` is not:
    attempt 1 has no suffix)."""
    match = _REPORT_RE.fullmatch(name)
    if match is None:
        return None
    attempt = int(match["n"]) if match["n"] is not None else 1
    if match["n"] is not None and (attempt < 2 or match["n"].startswith("0")):
        return None
    return match["task"], attempt


@dataclass(frozen=True)
class SessionDir:
    """The paths of one session, under the project `root` (absolute)."""

    root: Path
    session_id: str

    def __post_init__(self) -> None:
        validate_session_id(self.session_id)

    @classmethod
    def open(cls, root: Path, session_id: str) -> SessionDir:
        """An existing session; WorkflowError if the id is malformed or there is no such
        session."""
        session = cls(root.resolve(), validate_session_id(session_id))
        if not session.path.is_dir():
            raise WorkflowError(f"no workflow session {session_id} "
                                f"(no directory {session.session_path})")
        return session

    @classmethod
    def from_session_path(cls, root: Path, session_path: str) -> SessionDir:
        """The session a `SESSION_PATH` names (`.ralph-sessions/<id>/`, with or without the
        trailing slash); WorkflowError for anything else."""
        parts = session_path.rstrip("/").split("/")
        if len(parts) != 2 or parts[0] != SESSIONS_DIR:
            raise WorkflowError(f"invalid SESSION_PATH {session_path!r}: expected "
                                f"{SESSIONS_DIR}/<YYMMDD-HHMMSS>/")
        return cls(root.resolve(), validate_session_id(parts[1]))

    @classmethod
    def create(cls, root: Path, now: datetime | None = None) -> SessionDir:
        """A new, empty session directory named after `now` (default: the local time now).

        If that second's id is taken (another session started in the same second), the next
        free second is used: ids keep their `YYMMDD-HHMMSS` shape and their order, and
        creating the directory is the atomic claim, so two processes never share one.
        """
        moment = datetime.now() if now is None else now
        sessions = root.resolve() / SESSIONS_DIR
        sessions.mkdir(parents=True, exist_ok=True)
        for _ in range(_MAX_ID_CLASHES):
            session = cls(root.resolve(), session_id_for(moment))
            moment += timedelta(seconds=1)
            try:
                session.path.mkdir()
            except FileExistsError:
                continue
            if session.instructions.exists():
                # A stray instructions file from an earlier session: that id is not free.
                session.path.rmdir()
                continue
            return session
        raise WorkflowError(f"no free session id within {_MAX_ID_CLASHES} s of "
                            f"{session_id_for(moment)} in {SESSIONS_DIR}/")

    @property
    def path(self) -> Path:
        """The session directory (absolute)."""
        return self.root / SESSIONS_DIR / self.session_id

    @property
    def session_path(self) -> str:
        """`SESSION_PATH` as roles are given it: `.ralph-sessions/<id>/`."""
        return f"{SESSIONS_DIR}/{self.session_id}/"

    @property
    def instructions_name(self) -> str:
        """The instructions file's name: `<id>.instructions.md`."""
        return f"{self.session_id}.instructions.md"

    @property
    def instructions(self) -> Path:
        """The instructions file, beside the session directory."""
        return self.root / SESSIONS_DIR / self.instructions_name

    @property
    def plan(self) -> Path:
        return self.path / PLAN

    @property
    def tasks(self) -> Path:
        return self.path / TASKS

    @property
    def progress(self) -> Path:
        return self.path / PROGRESS

    @property
    def questions(self) -> Path:
        return self.path / QUESTIONS

    def report(self, task_id: str, attempt: int) -> Path:
        """The report of a task's attempt (see report_name)."""
        return self.path / report_name(task_id, attempt)

    def reports(self, task_id: str) -> dict[int, Path]:
        """The task's report files present, by attempt number."""
        validate_task_id(task_id)
        found: dict[int, Path] = {}
        if not self.path.is_dir():
            return found
        for entry in self.path.iterdir():
            parsed = parse_report_name(entry.name)
            if parsed is not None and parsed[0] == task_id and entry.is_file():
                found[parsed[1]] = entry
        return dict(sorted(found.items()))

    def attempt_number(self, task_id: str) -> int:
        """The attempt the task's next execution is: its report files + 1.

        With a gap in the numbering (a report deleted by hand) the count would name a report
        that exists, and reports are never overwritten: then it is the highest attempt + 1.
        """
        attempts = self.reports(task_id)
        return max(len(attempts), max(attempts, default=0)) + 1

    def relative(self, path: Path) -> str:
        """`path` relative to the project root, for messages (`.ralph-sessions/<id>/tasks.md`)."""
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return str(path)


def list_sessions(root: Path) -> list[SessionDir]:
    """The project's sessions, oldest first (entries that are not session directories are
    ignored)."""
    sessions = root.resolve() / SESSIONS_DIR
    if not sessions.is_dir():
        return []
    return [SessionDir(root.resolve(), entry.name) for entry in sorted(sessions.iterdir())
            if _SESSION_ID_RE.fullmatch(entry.name) and entry.is_dir()]

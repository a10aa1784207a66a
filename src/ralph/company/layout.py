"""Where things live in a workspace, and the one check every id that names a file or a
directory goes through: an id is a single path component (`proj_01…`), never a path, so a
client cannot reach outside the workspace with `../` in an id."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ralph.errors import RalphError

PROJECTS = "work/projects"
AGENTS = "org/agents"
TEAMS = "org/teams"
REVIEWS = "inbox/reviews"
HELP_REQUESTS = "inbox/help_requests"
INDEX_FILE = ".local/index.sqlite"
WORKTREES = ".local/worktrees"
EVENTS_FILE = "events.jsonl"


class CompanyError(RalphError):
    """A request the company service refuses: its message is the answer's, and `data` says
    what it is about (the control plane sends both as a -32000 error)."""

    def __init__(self, message: str, **data: Any) -> None:
        super().__init__(message)
        self.data = data


def component(value: str, what: str) -> str:
    """`value` if it can name one file or directory; CompanyError if it is a path."""
    if (not value or value in (".", "..") or "/" in value or "\\" in value
            or "\x00" in value):
        raise CompanyError(f"{what} must be a name, not a path: {value!r}", **{what: value})
    return value


def project_dir(root: Path, project_id: str) -> Path:
    return root / PROJECTS / component(project_id, "project_id")


def run_dir(root: Path, project_id: str, run_id: str) -> Path:
    return project_dir(root, project_id) / "runs" / component(run_id, "run_id")


def events_relpath(run_id: str) -> str:
    """As run.yaml writes it: relative to the project's directory."""
    return f"runs/{run_id}/{EVENTS_FILE}"


def agent_dir(root: Path, agent_id: str) -> Path:
    return root / AGENTS / component(agent_id, "agent_id")


def existing_project(root: Path, project_id: str) -> Path:
    """The directory of a project the workspace holds; CompanyError naming it if none."""
    found = project_dir(root, project_id)
    if not (found / "project.yaml").is_file():
        raise CompanyError(f"Unknown project: {project_id}", project_id=project_id)
    return found


def existing_run(root: Path, project_id: str, run_id: str) -> Path:
    """The directory of a run the workspace holds; CompanyError naming it if none."""
    found = run_dir(root, project_id, run_id)
    if not (found / "run.yaml").is_file():
        existing_project(root, project_id)
        raise CompanyError(f"Unknown run: {run_id} (project {project_id})",
                           project_id=project_id, run_id=run_id)
    return found


def is_workspace(root: Path) -> bool:
    return (root / "company" / "company.yaml").is_file()


def require_workspace(root: Path) -> None:
    """CompanyError unless `root` looks like a workspace (its company file is there)."""
    if not is_workspace(root):
        raise CompanyError(f"Not an AgentCompany workspace (no company/company.yaml): {root}",
                           workspace_dir=str(root))

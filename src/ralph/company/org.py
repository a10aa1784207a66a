"""New teams, agents and projects, written as AgentCompany's `team:new`, `agent:new` and
`project:new` write them (the protocol has no method for them: a workspace gets them from
the command line)."""

from __future__ import annotations

from pathlib import Path

from ralph.company.files import write_yaml
from ralph.company.ids import new_id
from ralph.company.layout import AGENTS, PROJECTS, TEAMS, CompanyError, require_workspace
from ralph.company.workspace import now_iso
from ralph.fsutil import atomic_write_bytes

AGENT_ROLES = ("ceo", "director", "manager", "worker")
PROJECT_DIRS = ("tasks", "artifacts", "context_packs", "runs", "share_packs")


def _named(name: str) -> str:
    if not name.strip():
        raise CompanyError("a name is required (it must not be blank)")
    return name


def create_team(root: Path, name: str) -> str:
    require_workspace(root)
    team_id = new_id("team")
    folder = root / TEAMS / team_id
    write_yaml(folder / "team.yaml", {"schema_version": 1, "type": "team", "id": team_id,
                                      "name": _named(name), "created_at": now_iso()})
    _write(folder / "memory.md",
           "# Team Memory (Curated)\n\n## Principles\n\n## Decisions\n\n## Links\n")
    return team_id


def create_agent(root: Path, name: str, role: str, provider: str,
                 team_id: str | None = None) -> str:
    require_workspace(root)
    if role not in AGENT_ROLES:
        raise CompanyError(f'Invalid role "{role}". Valid: {", ".join(AGENT_ROLES)}',
                           role=role)
    if not provider.strip():
        raise CompanyError("a provider is required (codex, claude, ...)")
    if team_id is not None and not (root / TEAMS / team_id / "team.yaml").is_file():
        raise CompanyError(f"Unknown team: {team_id}", team_id=team_id)
    agent_id = new_id("agent")
    folder = root / AGENTS / agent_id
    created_at = now_iso()
    write_yaml(folder / "agent.yaml", {
        "schema_version": 1, "type": "agent", "id": agent_id, "name": _named(name),
        "role": role, "provider": provider,
        **({"team_id": team_id} if team_id is not None else {}),
        "created_at": created_at, "launcher": {}})
    _write(folder / "journal.md", f"# Agent Journal (Append-only)\n\n- created_at: "
                                  f"{created_at}\n- agent_id: {agent_id}\n\n## Entries\n")
    return agent_id


def create_project(root: Path, name: str) -> str:
    require_workspace(root)
    project_id = new_id("proj")
    folder = root / PROJECTS / project_id
    for sub in PROJECT_DIRS:
        (folder / sub).mkdir(parents=True, exist_ok=True)
    write_yaml(folder / "project.yaml", {
        "schema_version": 1, "type": "project", "id": project_id, "name": _named(name),
        "status": "active", "created_at": now_iso()})
    _write(folder / "memory.md",
           "# Project Memory (Curated)\n\n## Summary\n\n## Decisions\n\n## Links\n")
    return project_id


def _write(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), follow_symlinks=False)

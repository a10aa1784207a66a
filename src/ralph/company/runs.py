"""Runs: `run.create` (run.yaml, an empty events file, `outputs/`, a context pack, the
`run.started` event), `run.list` (from the run.yaml files) and `run.replay` (a run's events
and the lines that are not events)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ralph.company.events import append_event, envelope, read_event_lines
from ralph.company.files import FileFormatError, read_yaml, write_yaml
from ralph.company.ids import new_id
from ralph.company.layout import (
    EVENTS_FILE,
    PROJECTS,
    CompanyError,
    agent_dir,
    component,
    events_relpath,
    existing_project,
    existing_run,
    require_workspace,
)
from ralph.company.schemas import RunYaml, schema_issues
from ralph.company.workspace import now_iso
from ralph.fsutil import atomic_write_bytes


def create_run(root: Path, project_id: str, agent_id: str, provider: str) -> dict[str, str]:
    """A new run of an agent the workspace holds in a project it holds (the original checked
    neither, and made the project's directories for any id): {run_id, context_pack_id,
    run_dir}."""
    require_workspace(root)
    project = existing_project(root, project_id)
    if not (agent_dir(root, agent_id) / "agent.yaml").is_file():
        raise CompanyError(f"Unknown agent: {agent_id}", agent_id=agent_id)
    run_id, ctx_id, created_at = new_id("run"), new_id("ctx"), now_iso()
    run = project / "runs" / run_id
    (run / "outputs").mkdir(parents=True)
    events = run / EVENTS_FILE
    atomic_write_bytes(events, b"", follow_symlinks=False)
    write_yaml(run / "run.yaml", {
        "schema_version": 1, "type": "run", "id": run_id, "project_id": project_id,
        "agent_id": agent_id, "provider": provider, "created_at": created_at,
        "status": "running", "context_pack_id": ctx_id, "events_relpath": events_relpath(run_id),
    })
    pack = project / "context_packs" / ctx_id
    (pack / "bundle").mkdir(parents=True)
    write_yaml(pack / "manifest.yaml", {
        "schema_version": 1, "type": "context_pack_manifest", "id": ctx_id,
        "created_at": created_at, "run_id": run_id, "project_id": project_id,
        "agent_id": agent_id, "included_docs": [], "tool_allowlist": [],
    })
    write_yaml(pack / "policy_snapshot.yaml", {
        "schema_version": 1, "type": "policy_snapshot", "id": new_id("art"),
        "created_at": created_at, "run_id": run_id, "tool_allowlist": [],
    })
    append_event(events, envelope(run_id, "run.started", {
        "project_id": project_id, "agent_id": agent_id, "provider": provider,
        "context_pack_id": ctx_id,
    }, ts_wallclock=created_at))
    return {"run_id": run_id, "context_pack_id": ctx_id, "run_dir": str(run)}


def read_run(run: Path) -> RunYaml | None:
    """A run's run.yaml, or None if it is missing or invalid (validate reports it)."""
    try:
        data = read_yaml(run / "run.yaml")
    except (OSError, ValueError, FileFormatError):
        return None
    if schema_issues(RunYaml, data):
        return None
    return RunYaml.model_validate(data)


def project_ids(root: Path) -> list[str]:
    """The projects' directory names, in byte order."""
    try:
        with os.scandir(root / PROJECTS) as entries:
            return sorted((e.name for e in entries if e.is_dir(follow_symlinks=False)),
                          key=os.fsencode)
    except OSError:
        return []


def run_ids(root: Path, project_id: str) -> list[str]:
    try:
        with os.scandir(root / PROJECTS / project_id / "runs") as entries:
            return sorted((e.name for e in entries if e.is_dir(follow_symlinks=False)),
                          key=os.fsencode)
    except OSError:
        return []


def list_runs(root: Path, project_id: str | None = None) -> list[dict[str, Any]]:
    """Every run with a valid run.yaml, newest first: {project_id, run_id, created_at,
    status, provider, agent_id}."""
    require_workspace(root)
    projects = [component(project_id, "project_id")] if project_id else project_ids(root)
    runs: list[dict[str, Any]] = []
    for pid in projects:
        for rid in run_ids(root, pid):
            run = read_run(root / PROJECTS / pid / "runs" / rid)
            if run is None:
                continue
            runs.append({"project_id": pid, "run_id": run.id, "created_at": run.created_at,
                         "status": run.status, "provider": run.provider,
                         "agent_id": run.agent_id})
    # Stable, as JavaScript's sort: runs of the same millisecond keep their listing order.
    runs.sort(key=lambda found: found["created_at"], reverse=True)
    return runs


def replay_run(root: Path, project_id: str, run_id: str,
               tail: int | None = None) -> dict[str, Any]:
    """A run's events (the last `tail` of them) and the lines that are not events:
    {run_id, project_id, events, parse_issues[{ok: false, raw, error}]}."""
    require_workspace(root)
    run = existing_run(root, project_id, run_id)
    try:
        lines = read_event_lines(run / EVENTS_FILE)
    except FileNotFoundError:
        raise CompanyError(f"Run {run_id} has no events file ({events_relpath(run_id)})",
                           project_id=project_id, run_id=run_id) from None
    events = [line.event for line in lines if line.event is not None]
    return {
        "run_id": run_id,
        "project_id": project_id,
        "events": events[-tail:] if tail else events,
        "parse_issues": [{"ok": False, "raw": line.raw, "error": line.error}
                         for line in lines if line.event is None],
    }

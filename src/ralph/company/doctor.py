"""`workspace.doctor`: the checks AgentCompany's doctor makes, with its ids, statuses and
messages: the workspace's files, the machine file, the agent programs, the repositories it
maps, the index (rebuilt or synced when asked, else how fresh it is) and the worktrees run
specs name."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ralph.company.adapters import adapter_statuses
from ralph.company.files import FileFormatError, read_yaml
from ralph.company.layout import HELP_REQUESTS, INDEX_FILE, PROJECTS, REVIEWS
from ralph.company.runs import project_ids, read_run, run_ids
from ralph.company.schemas import MachineYaml, schema_issues
from ralph.company.workspace import MACHINE_FILE, validate_workspace

Check = dict[str, Any]
# (root, rebuild, sync) -> the index check; given by the index service.
IndexCheck = Callable[[Path, bool, bool], Check]


def check(id_: str, status: str, message: str, details: list[str] | None = None) -> Check:
    found: Check = {"id": id_, "status": status, "message": message}
    if details is not None:
        found["details"] = details
    return found


def doctor(root: Path, index_check: IndexCheck, *, rebuild_index: bool = False,
           sync_index: bool = False, shown_as: str | None = None) -> dict[str, Any]:
    checks = [_schema(root)]
    machine = _machine(root, checks)
    statuses = adapter_statuses(root)
    checks.extend(_providers(statuses))
    if machine is not None:
        checks.append(_repos(machine))
    checks.append(index_check(root, rebuild_index, sync_index))
    checks.append(_worktrees(root))
    summary = {status: sum(1 for c in checks if c["status"] == status)
               for status in ("pass", "warn", "fail")}
    return {"workspace_dir": shown_as or str(root), "ok": summary["fail"] == 0,
            "checks": checks, "summary": summary}


def _schema(root: Path) -> Check:
    issues = validate_workspace(root)
    if not issues:
        return check("workspace.schema", "pass", "Workspace schema validation passed.")
    return check("workspace.schema", "fail",
                 f"Workspace validation found {len(issues)} issue(s).",
                 [f"{i.code}: {i.message}" for i in issues][:50])


def _machine(root: Path, checks: list[Check]) -> dict[str, Any] | None:
    try:
        data = read_yaml(root / MACHINE_FILE)
        problems = schema_issues(MachineYaml, data)
        if problems:
            raise ValueError("; ".join(f"{p.path}: {p.message}" for p in problems))
    except (OSError, ValueError, FileFormatError) as exc:
        reason = (exc.reason if isinstance(exc, FileFormatError) and exc.reason
                  else exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc))
        checks.append(check("machine.config", "fail",
                            f"Failed to read .local/machine.yaml: {reason}"))
        return None
    checks.append(check("machine.config", "pass", "Machine config loaded."))
    return dict(data)


def _providers(statuses: list[dict[str, Any]]) -> list[Check]:
    # An agent CLI, that is: the command adapter runs whatever it is given, so it is always
    # "available" and says nothing about whether an agent can run here.
    statuses = [s for s in statuses if s["provider"] != "command"]
    available = [s["name"] for s in statuses if s["mode"] == "cli" and s["available"]]
    if available:
        cli = check("providers.cli", "pass", f"Available provider CLIs: {', '.join(available)}")
    else:
        cli = check("providers.cli", "fail", "No provider CLI adapter is available.",
                    [f"{s['name']}: {s.get('reason', 'unavailable')}" for s in statuses
                     if s["mode"] == "cli"])
    down = [s for s in statuses if s["mode"] == "protocol" and not s["available"]]
    protocol = check("providers.protocol", "warn", "Some protocol adapters are unavailable.",
                     [f"{s['name']}: {s.get('reason', 'unavailable')}" for s in down]) \
        if down else check("providers.protocol", "pass", "All protocol adapters are available.")
    return [cli, protocol]


def _repos(machine: dict[str, Any]) -> Check:
    roots = machine.get("repo_roots") or {}
    if not roots:
        return check("repos.mappings", "warn",
                     "No repo mappings configured in .local/machine.yaml (repo_roots).")
    details: list[str] = []
    failures = warnings = 0
    for repo_id, where in roots.items():
        path = Path(str(where))
        if not path.is_absolute():
            failures += 1
            details.append(f"{repo_id}: path is not absolute ({path})")
        elif not path.exists():
            failures += 1
            details.append(f"{repo_id}: path does not exist ({path})")
        elif not (path / ".git").is_symlink() and not (path / ".git").exists():
            warnings += 1
            details.append(f"{repo_id}: path exists but .git marker not found ({path})")
        else:
            details.append(f"{repo_id}: OK ({path})")
    if failures:
        return check("repos.mappings", "fail",
                     f"Repo mapping issues detected ({failures} failure(s)).", details)
    if warnings:
        return check("repos.mappings", "warn",
                     f"Repo mappings loaded with {warnings} warning(s).", details)
    return check("repos.mappings", "pass", "Repo mappings loaded and look healthy.", details)


def latest_mtime_ms(root: Path) -> float:
    """The newest modification time of the files the index is made from (ms)."""
    newest = 0.0
    for top in (PROJECTS, REVIEWS, HELP_REQUESTS):
        for directory, _dirs, files in os.walk(root / top):
            for name in (".", *files):
                try:
                    newest = max(newest, (Path(directory) / name).stat().st_mtime * 1000)
                except OSError:
                    continue
    return newest


def index_is_stale(root: Path) -> tuple[bool, float, float]:
    """(stale, index mtime ms, newest source mtime ms), as the original judges it."""
    index_ms = (root / INDEX_FILE).stat().st_mtime * 1000
    newest = latest_mtime_ms(root)
    return newest > index_ms + 1, index_ms, newest


def _worktrees(root: Path) -> Check:
    referenced: list[str] = []
    missing: list[str] = []
    for pid in project_ids(root):
        for rid in run_ids(root, pid):
            run = read_run(root / PROJECTS / pid / "runs" / rid)
            rel = run.spec.worktree_relpath if run is not None and run.spec else None
            if not rel:
                continue
            referenced.append(f"{pid}/{rid}: {rel}")
            if not (root / rel).exists():
                missing.append(f"{pid}/{rid}: {rel}")
    if not referenced:
        return check("worktrees.references", "pass",
                     "No run specs reference isolated worktrees yet.")
    if missing:
        return check("worktrees.references", "warn",
                     f"{len(missing)} referenced worktree path(s) are missing.", missing)
    return check("worktrees.references", "pass", "All referenced worktree paths are present.",
                 referenced)

"""`workspace.doctor`: the checks AgentCompany's doctor makes, with its ids, statuses and
messages: the workspace's files, the machine file, the agent programs, the repositories it
maps, the index (rebuilt or synced when asked, else how fresh it is) and the worktrees run
specs name."""

from __future__ import annotations

import math
import os
import sqlite3
from pathlib import Path
from typing import Any

from ralph.company.adapters import adapter_statuses
from ralph.company.files import FileFormatError, read_yaml
from ralph.company.index import index_stats, rebuild_index, sync_index
from ralph.company.index_db import db_path
from ralph.company.layout import HELP_REQUESTS, INDEX_FILE, PROJECTS, REVIEWS, CompanyError
from ralph.company.runs import project_ids, read_run, run_ids
from ralph.company.schemas import MachineYaml, schema_issues
from ralph.company.workspace import MACHINE_FILE, validate_workspace

Check = dict[str, Any]


def check(id_: str, status: str, message: str, details: list[str] | None = None) -> Check:
    found: Check = {"id": id_, "status": status, "message": message}
    if details is not None:
        found["details"] = details
    return found


def doctor(root: Path, *, rebuild_index: bool = False,
           sync_index: bool = False, shown_as: str | None = None) -> dict[str, Any]:
    checks = [_schema(root)]
    machine = _machine(root, checks)
    statuses = adapter_statuses(root)
    checks.extend(_providers(statuses))
    if machine is not None:
        checks.append(_repos(machine))
    checks.append(_index(root, rebuild_index, sync_index))
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


def _index(root: Path, rebuild: bool, sync: bool) -> Check:
    if rebuild:
        return _rebuilt(rebuild_index(root))
    if sync:
        synced = sync_index(root)
        errors = index_stats(root)["event_parse_errors"]
        return check("index.sync", "warn" if errors else "pass",
                     f"Index synced with {errors} event parse error(s)." if errors
                     else "Index synced successfully.",
                     [f"{key}: {_js(value)}" for key, value in synced.items()])
    if not db_path(root).exists():
        return check("index.rebuild", "warn",
                     "SQLite index is missing. Run index:rebuild for fast queries.")
    try:
        stats = index_stats(root)
        stale, index_ms, newest_ms = index_is_stale(root)
    except (CompanyError, OSError, sqlite3.Error) as exc:
        return check("index.rebuild", "fail", f"SQLite index exists but could not be read: {exc}")
    errors = stats["event_parse_errors"]
    message = ("SQLite index is readable but appears stale relative to canonical files."
               if stale else f"SQLite index loaded with {errors} event parse error(s)."
               if errors else "SQLite index is present and readable.")
    return check("index.rebuild", "warn" if stale or errors else "pass", message, [
        *(f"{key}: {value}" for key, value in stats.items()),
        f"index_mtime_ms: {math.floor(index_ms)}",
        f"canonical_latest_mtime_ms: {math.floor(newest_ms)}"])


def _rebuilt(result: dict[str, Any]) -> Check:
    errors = result["event_parse_errors"]
    return check("index.rebuild", "warn" if errors else "pass",
                 f"Index rebuilt with {errors} event parse error(s)." if errors
                 else "Index rebuilt successfully.",
                 [f"{key}: {result[key]}" for key in (
                     "db_path", "runs_indexed", "events_indexed", "artifacts_indexed",
                     "reviews_indexed", "help_requests_indexed")])


def _js(value: Any) -> str:
    """A value as JavaScript's template strings write it (`true`, not `True`)."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


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

"""`agent.refresh_context`: the managed `## Relevant Context Index` section of an agent's
`AGENTS.md`, one line per file the agent should know of: the company contract and policy,
its profile, journal and mistakes log, then for each task assigned to it (newest first) the
task, its project's memory and the task's scope (repo, working directory, paths), or
`- no_assigned_tasks: true`. The rest of the file is kept as it is."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ralph.company.files import FileFormatError, read_text, split_front_matter
from ralph.company.inbox import agent_files_lock, decision_lock, js_order
from ralph.company.layout import (
    AGENTS,
    PROJECTS,
    CompanyError,
    component,
    existing_project,
    require_workspace,
)
from ralph.company.mistakes import base_guidance, ensure_guidance
from ralph.company.patches import js_trim_end
from ralph.company.schemas import TaskFrontMatter, schema_issues
from ralph.company.workspace import COMPANY_FILE, POLICY_FILE, now_iso
from ralph.fsutil import atomic_write_bytes

CONTEXT_HEADING = "## Relevant Context Index"
CONTEXT_MARKER = "<!-- managed: context-index -->"
DEFAULT_MAX_TASKS = 20
MAX_TASKS = 200
DEFAULT_MAX_SCOPE_PATHS = 40
MAX_SCOPE_PATHS = 500


@dataclass(frozen=True)
class Assignment:
    project_id: str
    task_id: str
    created_at: str
    task_relpath: str
    repo_id: str | None
    workdir_rel: str | None
    paths: tuple[str, ...]


def _names(directory: Path, want_dirs: bool, suffix: str = "") -> list[str]:
    try:
        with os.scandir(directory) as entries:
            found = [e.name for e in entries
                     if (e.is_dir(follow_symlinks=False) if want_dirs
                         else e.is_file(follow_symlinks=False)) and e.name.endswith(suffix)]
    except OSError:
        return []
    return sorted(found, key=js_order)


def assignments(root: Path, agent_id: str, project_id: str | None,
                max_tasks: int) -> list[Assignment]:
    """The valid tasks assigned to the agent, newest first (ties by id), at most
    `max_tasks`."""
    projects = [project_id] if project_id else _names(root / PROJECTS, want_dirs=True)
    found: list[Assignment] = []
    for pid in projects:
        for name in _names(root / PROJECTS / pid / "tasks", want_dirs=False, suffix=".md"):
            rel = f"{PROJECTS}/{pid}/tasks/{name}"
            try:
                data, _ = split_front_matter(read_text(root / rel), rel)
            except (OSError, FileFormatError):
                continue
            if schema_issues(TaskFrontMatter, data) or data.get("assignee_agent_id") != agent_id:
                continue
            scope: dict[str, Any] = data.get("scope") or {}
            found.append(Assignment(pid, data["id"], data["created_at"], rel,
                                    scope.get("repo_id"), scope.get("workdir_rel"),
                                    tuple(scope.get("paths") or ())))
    found.sort(key=lambda a: a.task_id)
    found.sort(key=lambda a: js_order(a.created_at), reverse=True)  # (stable: ids stay up)
    return found[:max(1, min(max_tasks, MAX_TASKS))]


def context_lines(agent_id: str, tasks: list[Assignment], has_mistakes_log: bool,
                  max_scope_paths: int) -> list[str]:
    """The section's lines (each once)."""
    lines: list[str] = []

    def add(line: str) -> None:
        if line not in lines:
            lines.append(line)

    # (the original names `company.yaml` and `org/policy.yaml`, files that do not exist)
    add(f"- company_contract: `{COMPANY_FILE}`")
    add(f"- org_visibility_policy: `{POLICY_FILE}`")
    add(f"- agent_profile: `{AGENTS}/{agent_id}/agent.yaml`")
    add(f"- agent_journal: `{AGENTS}/{agent_id}/journal.md`")
    if has_mistakes_log:
        add(f"- mistakes_log: `{AGENTS}/{agent_id}/mistakes.yaml`")
    if not tasks:
        add("- no_assigned_tasks: true")
        return lines
    limit = max(1, min(max_scope_paths, MAX_SCOPE_PATHS))
    listed = 0
    for task in tasks:
        add(f"- assigned_task: `{task.task_relpath}`")
        add(f"- project_memory: `{PROJECTS}/{task.project_id}/memory.md`")
        if task.repo_id:
            add(f"- task_scope_repo_id: `{task.repo_id}` (task: `{task.task_id}`)")
        if task.workdir_rel:
            add(f"- task_scope_workdir: `{task.workdir_rel}` (task: `{task.task_id}`)")
        for path in task.paths:
            if listed >= limit:
                break
            add(f"- task_scope_path: `{path}` (task: `{task.task_id}`)")
            listed += 1
        if listed >= limit:
            break
    if listed >= limit:
        add(f"- task_scope_paths_truncated: true (max_scope_paths={limit})")
    return lines


# a `## ` heading line as JavaScript's multiline `^##\s.+$` finds one (its lines also end at
# \r, U+2028 and U+2029)
_NEXT_SECTION = re.compile(r"(?:^|(?<=[\r\u2028\u2029]))##\s[^\n\r\u2028\u2029]+"
                           r"(?=[\n\r\u2028\u2029]|\Z)", re.M)


def _section_end(text: str, start: int) -> int:
    found = _NEXT_SECTION.search(text, start)
    return len(text) if found is None else found.start()


def with_context_section(markdown: str, lines: list[str]) -> tuple[str, bool]:
    """`markdown` (ending with a newline) with the managed section's body replaced by
    `lines` (from its marker, or its heading, to the next `## ` heading), or the section
    added at the end; and whether that changed it."""
    text = markdown if markdown.endswith("\n") else markdown + "\n"
    section = CONTEXT_MARKER + "\n" + "".join(line + "\n" for line in lines)
    marker = text.find(CONTEXT_MARKER)
    if marker >= 0:
        line_start = text.rfind("\n", 0, marker) + 1
        line_end = text.find("\n", marker)
        after = len(text) if line_end == -1 else line_end + 1
        updated = text[:line_start] + section + text[_section_end(text, after):]
        return updated, updated != text
    heading = text.find(CONTEXT_HEADING)
    if heading >= 0:
        line_end = text.find("\n", heading)
        after = len(text) if line_end == -1 else line_end + 1
        updated = text[:after] + section + text[_section_end(text, after):]
        return updated, updated != text
    return f"{js_trim_end(text)}\n\n{CONTEXT_HEADING}\n{section}", True


def refresh_context(root: Path, agent_id: str, project_id: str | None = None,
                    max_tasks: int = DEFAULT_MAX_TASKS,
                    max_scope_paths: int = DEFAULT_MAX_SCOPE_PATHS) -> dict[str, Any]:
    """`agent.refresh_context`: {agent_id, agents_md_relpath, assignment_count,
    reference_count, updated, generated_at, project_id (when given)}."""
    require_workspace(root)
    agent = root / AGENTS / component(agent_id, "agent_id")
    if not (agent / "agent.yaml").exists():
        raise CompanyError(f"Agent not found: {agent_id}", agent_id=agent_id)
    if project_id is not None:
        existing_project(root, project_id)
    guidance_rel = f"{AGENTS}/{agent_id}/AGENTS.md"
    tasks = assignments(root, agent_id, project_id, max_tasks)
    lines = context_lines(agent_id, tasks, (agent / "mistakes.yaml").exists(), max_scope_paths)
    # (the agent's lock: agent.record_mistake rewrites the same AGENTS.md)
    with decision_lock(root, agent_files_lock(agent_id)):
        existing = ensure_guidance(root / guidance_rel, "\n".join(
            [*base_guidance(agent_id), CONTEXT_HEADING, CONTEXT_MARKER, ""]))
        updated, changed = with_context_section(existing, lines)
        if changed:
            atomic_write_bytes(root / guidance_rel, updated.encode("utf-8"),
                               follow_symlinks=False)
    result: dict[str, Any] = {
        "agent_id": agent_id, "agents_md_relpath": guidance_rel,
        "assignment_count": len(tasks), "reference_count": len(lines), "updated": changed,
        "generated_at": now_iso(),
    }
    if project_id is not None:
        result["project_id"] = project_id
    return result

"""Where a session's command runs, and the repository it works on.

- `plan_cwd` (before a launch is answered): the workspace, or the repository
  `.local/machine.yaml` maps `repo_id` to (plus `workdir_rel`), or a git worktree of it
  for the task's milestone: with `repo_id` and `task_id`, when the task's scope asks for
  isolation, or its milestone is `coding` and the scope does not refuse isolation.
- `add_worktree`: `git worktree add -b ac/<project>/<task>/<run>
  <workspace>/.local/worktrees/<project>/<task>/<run> HEAD` in the repository, and the
  `worktree.prepared` event.
- `snapshot_repo`: the repository's HEAD and whether it is dirty, into the run's context
  pack manifest (`repo_snapshot`); a dirty tree's diff is saved as the artifact
  `<art>.patch` (`artifact.produced`). Best effort: a failure is the event
  `context_pack.snapshot_failed`, and the session goes on.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from pydantic import BaseModel

from ralph.company.events import append_event, envelope
from ralph.company.files import FileFormatError, read_front_matter, read_yaml, write_yaml
from ralph.company.ids import new_id
from ralph.company.layout import EVENTS_FILE, PROJECTS, WORKTREES, CompanyError, component
from ralph.company.schemas import (
    ContextPackManifestYaml,
    MachineYaml,
    TaskFrontMatter,
    schema_issues,
)
from ralph.company.workspace import MACHINE_FILE
from ralph.fsutil import atomic_write_bytes
from ralph.git import Git, GitError

M = TypeVar("M", bound=BaseModel)
GIT_TIMEOUT_S = 120.0
MAX_PATCH_BYTES = 16 << 20  # a dirty diff longer than this is cut (and marked so)


@dataclass(frozen=True)
class CwdPlan:
    """Where the command runs; a worktree to add first when `worktree_rel` is set."""

    cwd: Path
    repo_root: Path | None = None
    worktree_rel: str | None = None  # relative to the workspace
    branch: str | None = None


def checked(model: type[M], data: Any, what: str, **about: Any) -> M:
    """`data` as `model`; CompanyError "Invalid <what>: <path>: <problem>; ..." if not."""
    problems = schema_issues(model, data)
    if problems:
        raise CompanyError(f"Invalid {what}: " + "; ".join(
            f"{p.path}: {p.message}" for p in problems), **about)
    return model.model_validate(data)


def read_machine(root: Path) -> MachineYaml:
    """`.local/machine.yaml` (CompanyError if it cannot be read or is not valid)."""
    try:
        data = read_yaml(root / MACHINE_FILE)
    except (OSError, FileFormatError) as exc:
        raise CompanyError(f"Cannot read {MACHINE_FILE}: {exc}") from None
    return checked(MachineYaml, data, MACHINE_FILE)


def check_workdir_rel(workdir_rel: str) -> str:
    """`workdir_rel` if it names a directory inside the repository (relative, no `..`)."""
    parts = PurePosixPath(workdir_rel).parts
    if (workdir_rel.startswith(("/", "\\")) or "\x00" in workdir_rel or ".." in parts
            or "\\" in workdir_rel):
        raise CompanyError("workdir_rel must be a relative path inside the repository "
                           f"(no '..'): {workdir_rel!r}", workdir_rel=workdir_rel)
    return workdir_rel


def plan_cwd(root: Path, project_id: str, run_id: str, repo_id: str | None,
             workdir_rel: str | None, task_id: str | None,
             milestone_id: str | None) -> CwdPlan:
    """Where the session runs (see the module docstring); CompanyError for an unknown
    repo_id, a bad workdir_rel, an unreadable task or an unknown milestone, and for a
    directory that is not there (unless a worktree will be made)."""
    if workdir_rel is not None:
        check_workdir_rel(workdir_rel)
    if repo_id is None:
        return CwdPlan(_existing_dir(root))
    roots = read_machine(root).repo_roots
    if repo_id not in roots:
        known = ", ".join(roots)
        hint = f"Known repo_ids: {known}" if known else "No repo_ids configured yet."
        raise CompanyError(f'Unknown repo_id "{repo_id}". Configure it in {MACHINE_FILE}. '
                           f"{hint}", repo_id=repo_id)
    repo_root = Path(roots[repo_id])
    base = repo_root / workdir_rel if workdir_rel else repo_root
    if task_id is None or not _isolated(root, project_id, task_id, milestone_id):
        return CwdPlan(_existing_dir(base), repo_root)
    _existing_dir(repo_root)
    rel = f"{WORKTREES}/{project_id}/{component(task_id, 'task_id')}/{run_id}"
    worktree = root / rel
    return CwdPlan(worktree / workdir_rel if workdir_rel else worktree, repo_root, rel,
                   f"ac/{project_id}/{task_id}/{run_id}")


def _isolated(root: Path, project_id: str, task_id: str, milestone_id: str | None) -> bool:
    path = root / PROJECTS / project_id / "tasks" / f"{component(task_id, 'task_id')}.md"
    try:
        data, _ = read_front_matter(path)
    except FileNotFoundError:
        raise CompanyError(f"Unknown task: {task_id} (project {project_id})",
                           task_id=task_id) from None
    except (OSError, FileFormatError) as exc:
        raise CompanyError(f"Invalid task markdown: {exc}", task_id=task_id) from None
    task = checked(TaskFrontMatter, data, f"task markdown: {task_id}", task_id=task_id)
    kind = None
    if milestone_id is not None:
        milestone = next((m for m in task.milestones if m.id == milestone_id), None)
        if milestone is None:
            raise CompanyError(f"Milestone not found in task {task_id}: {milestone_id}",
                               task_id=task_id, milestone_id=milestone_id)
        kind = milestone.kind
    isolation = task.scope.requires_worktree_isolation if task.scope is not None else None
    return isolation is True or (isolation is not False and kind == "coding")


def _existing_dir(path: Path) -> Path:
    if not path.is_dir():
        raise CompanyError(f"Resolved cwd does not exist or is not a directory: {path}",
                           cwd=str(path))
    return path


async def add_worktree(root: Path, plan: CwdPlan, run: Path, run_id: str, actor: str,
                       repo_id: str, task_id: str, milestone_id: str | None, *,
                       session_ref: str | None = None) -> None:
    """Add the planned worktree (GitError if git refuses) and say so in the run's events."""
    assert plan.repo_root is not None and plan.worktree_rel is not None
    assert plan.branch is not None
    worktree = root / plan.worktree_rel
    await asyncio.to_thread(worktree.parent.mkdir, parents=True, exist_ok=True)
    await Git(plan.repo_root, timeout_s=GIT_TIMEOUT_S).add_worktree(worktree, plan.branch)
    await asyncio.to_thread(append_event, run / EVENTS_FILE, envelope(
        run_id, "worktree.prepared", {
            "repo_id": repo_id, "task_id": task_id, "milestone_id": milestone_id,
            "worktree_relpath": plan.worktree_rel, "branch": plan.branch}, actor=actor,
        session_ref=session_ref))


async def snapshot_repo(root: Path, project_id: str, run: Path, run_id: str,
                        context_pack_id: str, repo_id: str, repo_root: Path, *,
                        session_ref: str | None = None) -> None:
    """HEAD and dirtiness of the repository into the context pack manifest (see the module
    docstring); never raises for git or file trouble (`context_pack.snapshot_failed`)."""
    events = run / EVENTS_FILE
    try:
        git = Git(repo_root, timeout_s=GIT_TIMEOUT_S)
        head = await git.head()
        if head is None:
            raise GitError("the repository has no commit yet (HEAD is unborn)")
        dirty = not await git.is_clean()
        patch_id = None
        if dirty:
            patch = await git.diff(max_bytes=MAX_PATCH_BYTES)
            if patch.strip():
                patch_id = new_id("art")
                relpath = f"{PROJECTS}/{project_id}/artifacts/{patch_id}.patch"
                await asyncio.to_thread(_write_patch, root / relpath, patch)
                await asyncio.to_thread(append_event, events, envelope(
                    run_id, "artifact.produced", {
                        "artifact_id": patch_id, "relpath": relpath,
                        "kind": "repo_dirty_patch", "repo_id": repo_id},
                    session_ref=session_ref))
        manifest = run.parent.parent / "context_packs" / context_pack_id / "manifest.yaml"
        await asyncio.to_thread(_write_snapshot, manifest, {
            "repo_id": repo_id, "head_sha": head, "dirty": dirty,
            **({"dirty_patch_artifact_id": patch_id} if patch_id else {})})
        await asyncio.to_thread(append_event, events, envelope(
            run_id, "context_pack.snapshot_written", {
                "context_pack_id": context_pack_id, "repo_id": repo_id, "head_sha": head,
                "dirty": dirty, "dirty_patch_artifact_id": patch_id},
            session_ref=session_ref))
    except (GitError, CompanyError, OSError, FileFormatError) as exc:
        await asyncio.to_thread(append_event, events, envelope(
            run_id, "context_pack.snapshot_failed", {
                "context_pack_id": context_pack_id, "repo_id": repo_id, "error": str(exc)},
            session_ref=session_ref))


def _write_patch(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, text.encode("utf-8", "surrogateescape"), follow_symlinks=False)


def _write_snapshot(manifest: Path, snapshot: dict[str, Any]) -> None:
    data = read_yaml(manifest)
    checked(ContextPackManifestYaml, data, "context pack manifest")
    write_yaml(manifest, {**data, "repo_snapshot": snapshot})

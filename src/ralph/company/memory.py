"""Curated memory changes: `memory.propose_delta` writes a `memory_delta` artifact (its `.md`
and the unified diff `.patch` that inserts lines under a heading of a memory file, the file
itself untouched), and `memory.approve_delta` decides it: approved, the patch is applied to
the file and a review and an `approval.decided` event record it; denied (an extension), only
the review and the event. A delta is decided once: a second decision is refused, and two
racing ones are made one after the other (a lock per delta), so a patch is never applied
twice."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Any

from ralph.company.artifacts import artifact_relpath, parse_artifact, read_artifact_file
from ralph.company.events import envelope
from ralph.company.files import read_text, with_front_matter
from ralph.company.ids import new_id
from ralph.company.inbox import (
    append_run_event,
    decision_lock,
    file_lock,
    reviews_of,
    write_review,
)
from ralph.company.layout import (
    PROJECTS,
    CompanyError,
    component,
    existing_project,
    require_workspace,
)
from ralph.company.patches import PatchError, apply_patch, js_trim_end, two_files_patch
from ralph.company.policy import Actor, Resource, enforce
from ralph.company.schemas import MemoryDeltaFrontMatter
from ralph.company.workspace import now_iso
from ralph.fsutil import atomic_write_bytes

KIND = "memory_delta"
DECISIONS = ("approved", "denied")


def insert_under_heading(markdown: str, heading: str, insert_lines: list[str]) -> str:
    """`markdown` (its line ends made `\\n`) with `insert_lines` and a blank line after the
    line that is `heading` (trailing blanks aside) and the blank line below it, if any."""
    lines = re.split(r"\r?\n", markdown)
    at = next((n for n, line in enumerate(lines) if js_trim_end(line) == heading), None)
    if at is None:
        raise CompanyError(f"Heading not found: {heading}", under_heading=heading)
    at += 1
    if at < len(lines) and lines[at] == "":
        at += 1
    return "\n".join([*lines[:at], *insert_lines, "", *lines[at:]])


def workspace_file(root: Path, rel: str, what: str) -> Path:
    """The file `rel` names inside the workspace; CompanyError if it is absolute, climbs
    out with `..`, or leads out through a link."""
    if not rel or "\x00" in rel:
        raise CompanyError(f"{what} must be a workspace-relative path: {rel!r}", **{what: rel})
    if rel.startswith("/"):
        raise CompanyError(f"{what} must be workspace-relative, not absolute: {rel}",
                           **{what: rel})
    if ".." in PurePosixPath(rel).parts:
        raise CompanyError(f"{what} must not contain '..': {rel}", **{what: rel})
    path = root / rel
    if not path.resolve().is_relative_to(root.resolve()):
        raise CompanyError(f"{what} leads out of the workspace (through a link): {rel}",
                           **{what: rel})
    return path


def _read_target(root: Path, rel: str) -> str:
    path = workspace_file(root, rel, "target_file")
    try:
        return read_text(path)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise CompanyError(f"Target file not found: {rel}", target_file=rel) from None


def propose_delta(root: Path, project_id: str, title: str, under_heading: str,
                  insert_lines: list[str], visibility: str, produced_by: str, run_id: str,
                  context_pack_id: str, target_file: str | None = None,
                  evidence: list[str] | None = None) -> dict[str, str]:
    """`memory.propose_delta`: {artifact_id, artifact_relpath, patch_relpath, target_file}."""
    require_workspace(root)
    existing_project(root, project_id)
    component(run_id, "run_id")  # (approvals find the run's log by it)
    target = target_file if target_file is not None else f"{PROJECTS}/{project_id}/memory.md"
    before = _read_target(root, target)
    after = insert_under_heading(before, under_heading, insert_lines)
    patch = two_files_patch(f"a/{target}", f"b/{target}", before, after)
    if apply_patch(before, patch) != after:  # (a diff that does not redo its change is a bug)
        raise CompanyError("Generated patch did not reproduce the change", target_file=target)

    artifact_id, created_at = new_id("art"), now_iso()
    md_rel = artifact_relpath(project_id, artifact_id)
    patch_rel = artifact_relpath(project_id, artifact_id, ".patch")
    front: dict[str, Any] = {
        "schema_version": 1, "type": KIND, "id": artifact_id, "created_at": created_at,
        "title": title, "visibility": visibility, "produced_by": produced_by,
        "run_id": run_id, "context_pack_id": context_pack_id, "project_id": project_id,
        "target_file": target, "patch_file": patch_rel,
    }
    if evidence:
        front["evidence"] = evidence
    body = [f"# {title}", "", "## Summary", "", "## Changes", "",
            f"- target_file: `{target}`", f"- patch_file: `{patch_rel}`",
            f"- inserted_under: `{under_heading}`", "", "```text", *insert_lines, "```", "",
            "## Evidence", "", *(f"- {item}" for item in evidence or [])]
    (root / md_rel).parent.mkdir(parents=True, exist_ok=True)
    # the patch first: a delta whose .md is there always has its patch
    atomic_write_bytes(root / patch_rel, patch.encode("utf-8"), follow_symlinks=False)
    atomic_write_bytes(root / md_rel, with_front_matter(front, "\n" + "\n".join(body) + "\n")
                       .encode("utf-8"), follow_symlinks=False)
    return {"artifact_id": artifact_id, "artifact_relpath": md_rel, "patch_relpath": patch_rel,
            "target_file": target}


def approve_delta(root: Path, project_id: str, artifact_id: str, actor_id: str,
                  actor_role: str, actor_team_id: str | None = None, notes: str | None = None,
                  decision: str = "approved") -> dict[str, str]:
    """`memory.approve_delta`: {review_id, decision}. Approved: the patch applied to the
    target file (replaced atomically), then the review, then `approval.decided`; a patch
    that does not apply changes nothing. Denied: the review and the event only."""
    if decision not in DECISIONS:
        raise CompanyError(f"decision must be one of {', '.join(DECISIONS)}: {decision}",
                           decision=decision)
    rel, text = read_artifact_file(root, project_id, artifact_id)
    data, _ = parse_artifact(rel, text, MemoryDeltaFrontMatter, "memory delta")
    delta = MemoryDeltaFrontMatter.model_validate(data)
    if delta.project_id != project_id:
        raise CompanyError(f"Memory delta project_id mismatch (expected {project_id}, got "
                           f"{delta.project_id})", project_id=project_id,
                           artifact_id=artifact_id)
    target = workspace_file(root, delta.target_file, "target_file")
    patch_path = workspace_file(root, delta.patch_file, "patch_file")
    policy = enforce(root, project_id, delta.run_id, Actor(actor_id, actor_role, actor_team_id),
                     "approve", Resource(delta.id, delta.visibility, KIND)).to_dict()
    subject = {"kind": KIND, "artifact_id": delta.id, "project_id": delta.project_id,
               "target_file": delta.target_file, "patch_file": delta.patch_file}
    where = {"project_id": project_id, "artifact_id": artifact_id,
             "target_file": delta.target_file, "patch_file": delta.patch_file}
    with decision_lock(root, f"{KIND}-{project_id}-{artifact_id}"):
        earlier = reviews_of(root, KIND, project_id, delta.id)
        if earlier:
            raise CompanyError(f"Memory delta {delta.id} was already decided "
                               f"({earlier[0]['decision']}, review {earlier[0]['id']})",
                               review_id=earlier[0]["id"], decision=earlier[0]["decision"],
                               **where)
        if decision == "approved":
            # Another delta may patch the same file at the same time (this lock is the
            # delta's): the file's own lock, always taken inside a delta's.
            with decision_lock(root, file_lock(str(target.resolve()))):
                _apply(target, patch_path, where)
        review_id, created_at = write_review(root, actor_id=actor_id, actor_role=actor_role,
                                             decision=decision, subject=subject,
                                             policy=policy, notes=notes)
    append_run_event(root, project_id, delta.run_id, envelope(delta.run_id, "approval.decided", {
        "review_id": review_id, "decision": decision, "subject_kind": KIND,
        "artifact_id": delta.id, "target_file": delta.target_file,
        "patch_file": delta.patch_file, "policy": policy,
    }, actor=actor_id, visibility="managers", ts_wallclock=created_at))
    return {"review_id": review_id, "decision": decision}


def _apply(target: Path, patch_path: Path, where: dict[str, str]) -> None:
    try:
        before = read_text(target)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise CompanyError(f"Target file not found: {where['target_file']}", **where) from None
    try:
        patch = read_text(patch_path)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise CompanyError(f"Patch file not found: {where['patch_file']}", **where) from None
    try:
        after = apply_patch(before, patch)
    except PatchError as exc:
        raise CompanyError(f"Patch file is not a unified diff of one file: {exc}",
                           **where) from None
    if after is None:
        raise CompanyError("Patch did not apply cleanly to target file", **where)
    # the link itself is replaced, not followed: the file stays inside the workspace
    atomic_write_bytes(target, after.encode("utf-8"), follow_symlinks=False)

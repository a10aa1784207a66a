"""`milestone.approve`: a manager accepts a task's milestone on the strength of a
`milestone_report` artifact. The milestone must not be done yet, the report must be about
it, the approval policy must allow the actor, and the evidence the milestone requires must
be beside the report's artifacts (`requires_patch`: a `.patch` among `evidence_artifacts`;
`requires_tests`: a `.txt` or `.json` among `tests_artifacts`; both required by default for
a coding milestone). Then the milestone is marked done in the task file (the task too, when
all of its milestones are), a review is written and `approval.decided` is appended."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ralph.company.artifacts import (
    evidence_exists,
    parse_artifact,
    read_artifact_file,
)
from ralph.company.events import envelope
from ralph.company.files import read_text, with_front_matter
from ralph.company.inbox import append_run_event, decision_lock, write_review
from ralph.company.layout import (
    PROJECTS,
    CompanyError,
    component,
    existing_project,
    require_workspace,
)
from ralph.company.policy import Actor, Resource, enforce
from ralph.company.schemas import MilestoneReportFrontMatter, TaskFrontMatter
from ralph.fsutil import atomic_write_bytes

KIND = "milestone"


def task_relpath(project_id: str, task_id: str) -> str:
    return (f"{PROJECTS}/{component(project_id, 'project_id')}/tasks/"
            f"{component(task_id, 'task_id')}.md")


def read_task(root: Path, project_id: str, task_id: str) -> tuple[str, dict[str, Any], str]:
    """(relative path, front matter in the task schema's key order, body) of a task."""
    rel = task_relpath(project_id, task_id)
    try:
        text = read_text(root / rel)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise CompanyError(f"Unknown task: {task_id} (project {project_id})",
                           project_id=project_id, task_id=task_id) from None
    data, body = parse_artifact(rel, text, TaskFrontMatter, "task file")
    # as the original rewrites it: the schema's key order, unknown keys impossible (strict)
    return rel, TaskFrontMatter.model_validate(data).model_dump(exclude_none=True), body


def set_milestone_status(front: dict[str, Any], milestone_id: str, status: str) -> None:
    """The milestone's status; the task is done when all its milestones are (unless it was
    canceled), and back in progress when one of a done task's milestones is not."""
    for milestone in front["milestones"]:
        if milestone["id"] == milestone_id:
            milestone["status"] = status
    milestones = front["milestones"]
    if milestones and all(m["status"] == "done" for m in milestones):
        if front["status"] != "canceled":
            front["status"] = "done"
    elif front["status"] == "done":
        front["status"] = "in_progress"


def approve_milestone(root: Path, project_id: str, task_id: str, milestone_id: str,
                      report_artifact_id: str, actor_id: str, actor_role: str,
                      actor_team_id: str | None = None,
                      notes: str | None = None) -> dict[str, str]:
    """`milestone.approve`: {review_id, decision: "approved", task_status,
    milestone_status}."""
    require_workspace(root)
    existing_project(root, project_id)
    component(report_artifact_id, "report_artifact_id")
    where = {"project_id": project_id, "task_id": task_id, "milestone_id": milestone_id,
             "report_artifact_id": report_artifact_id}
    with decision_lock(root, f"task-{project_id}-{component(task_id, 'task_id')}"):
        rel, front, body = read_task(root, project_id, task_id)
        milestone = next((m for m in front["milestones"] if m["id"] == milestone_id), None)
        if milestone is None:
            raise CompanyError(f"Milestone not found: {milestone_id}", **where)
        if milestone["status"] == "done":
            raise CompanyError("Milestone is already done", **where)
        report_rel, text = read_artifact_file(root, project_id, report_artifact_id)
        data, _ = parse_artifact(report_rel, text, MilestoneReportFrontMatter,
                                 "milestone report")
        report = MilestoneReportFrontMatter.model_validate(data)
        for key, expected in (("project_id", project_id), ("task_id", task_id),
                              ("milestone_id", milestone_id)):
            if getattr(report, key) != expected:
                raise CompanyError(f"Milestone report {key} mismatch", **where,
                                   **{f"report_{key}": getattr(report, key)})
        policy = enforce(root, project_id, report.run_id,
                         Actor(actor_id, actor_role, actor_team_id), "approve",
                         Resource(report.id, report.visibility, "milestone_report",
                                  team_id=front.get("team_id"))).to_dict()
        _check_evidence(root, project_id, milestone, report, where)

        set_milestone_status(front, milestone_id, "done")
        atomic_write_bytes(root / rel, with_front_matter(
            front, body if body.startswith("\n") else "\n" + body).encode("utf-8"),
            follow_symlinks=False)
        review_id, created_at = write_review(
            root, actor_id=actor_id, actor_role=actor_role, decision="approved",
            subject={"kind": KIND, "artifact_id": report.id, "project_id": project_id},
            policy=policy, notes=notes)
    append_run_event(root, project_id, report.run_id, envelope(report.run_id,
                                                               "approval.decided", {
        "review_id": review_id, "decision": "approved", "subject_kind": KIND,
        "task_id": task_id, "milestone_id": milestone_id, "report_artifact_id": report.id,
        "policy": policy,
    }, actor=actor_id, visibility="managers", ts_wallclock=created_at))
    return {"review_id": review_id, "decision": "approved", "task_status": front["status"],
            "milestone_status": "done"}


def _check_evidence(root: Path, project_id: str, milestone: dict[str, Any],
                    report: MilestoneReportFrontMatter, where: dict[str, str]) -> None:
    coding = milestone["kind"] == "coding"
    evidence = milestone.get("evidence") or {}
    if evidence.get("requires_patch", coding) and not any(
            evidence_exists(root, project_id, art, (".patch",))
            for art in report.evidence_artifacts):
        raise CompanyError("Missing required patch evidence (.patch) for milestone approval",
                           **where, evidence_artifacts=list(report.evidence_artifacts))
    tests = list(report.tests_artifacts or [])
    if evidence.get("requires_tests", coding) and not any(
            evidence_exists(root, project_id, art, (".txt", ".json")) for art in tests):
        raise CompanyError("Missing required tests evidence (.txt or .json) for milestone "
                           "approval", **where, tests_artifacts=tests)

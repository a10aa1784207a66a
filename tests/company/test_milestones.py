"""`milestone.approve`: the evidence rules (a patch and tests by default for coding,
`evidence` overriding), the task file updated (the task done when all of its milestones
are), the review and event, and what is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ralph.company.files import read_front_matter, read_yaml, with_front_matter
from ralph.company.ids import new_id
from tests.company.conftest import Client, RpcFailure
from tests.company.fixtures import TS
from tests.company.test_governance import (
    Workspace,
    assert_valid,
    review_files,
    run_events,
    write_artifact,
)


def _milestone(kind: str = "coding", status: str = "ready",
               evidence: dict[str, bool] | None = None) -> dict[str, Any]:
    made: dict[str, Any] = {"id": new_id("ms"), "title": "M", "kind": kind, "status": status,
                            "acceptance_criteria": ["ok"]}
    if evidence is not None:
        made["evidence"] = evidence
    return made


def _task(root: Path, ids: dict[str, str], milestones: list[dict[str, Any]],
          **extra: Any) -> tuple[str, Path]:
    task_id = new_id("task")
    front = {"schema_version": 1, "type": "task", "id": task_id, "project_id": ids["proj"],
             "title": "Cart", "created_at": TS, "status": "in_progress", "visibility": "team",
             **extra, "deliverables": ["d"], "acceptance_criteria": ["a"],
             "milestones": milestones}
    path = root / "work/projects" / ids["proj"] / "tasks" / f"{task_id}.md"
    path.write_text(with_front_matter(front, "\n# Cart\n\n## Contract\n\n## Milestones\n"))
    return task_id, path


def _report(root: Path, ids: dict[str, str], task_id: str, milestone_id: str,
            evidence: list[str] | None = None, tests: list[str] | None = None,
            visibility: str = "team") -> str:
    report_id = new_id("art")
    front: dict[str, Any] = {
        "type": "milestone_report", "visibility": visibility, "produced_by": ids["agent"],
        "run_id": ids["run"], "context_pack_id": ids["ctx"], "project_id": ids["proj"],
        "task_id": task_id, "milestone_id": milestone_id, "evidence_artifacts": evidence or []}
    if tests is not None:
        front["tests_artifacts"] = tests
    write_artifact(root, ids["proj"], report_id, front, "\n## Summary\n\n## Evidence\n\n## Next\n")
    return report_id


def _evidence(root: Path, ids: dict[str, str], ext: str) -> str:
    art = new_id("art")
    (root / "work/projects" / ids["proj"] / "artifacts" / f"{art}{ext}").write_text("x\n")
    return art


def _approve(client: Client, root: Path, ids: dict[str, str], task_id: str, milestone_id: str,
             report_id: str, **change: Any) -> Any:
    return client.call("milestone.approve", {
        "workspace_dir": str(root), "project_id": ids["proj"], "task_id": task_id,
        "milestone_id": milestone_id, "report_artifact_id": report_id, "actor_id": "mgr_1",
        "actor_role": "manager", **change})


def test_coding_milestone_needs_patch_and_tests_then_task_is_done_with_the_last(
        client: Client, workspace: Workspace) -> None:
    root, ids = workspace
    first, second = _milestone(), _milestone("research")
    task_id, path = _task(root, ids, [first, second], team_id=ids["team"])
    patch, tests = _evidence(root, ids, ".patch"), _evidence(root, ids, ".json")
    bare = _report(root, ids, task_id, first["id"], evidence=[tests])
    with pytest.raises(RpcFailure) as failed:
        _approve(client, root, ids, task_id, first["id"], bare)
    assert failed.value.error["message"] == (
        "Missing required patch evidence (.patch) for milestone approval")
    no_tests = _report(root, ids, task_id, first["id"], evidence=[patch], tests=[patch])
    with pytest.raises(RpcFailure) as failed:
        _approve(client, root, ids, task_id, first["id"], no_tests)
    assert failed.value.error["message"] == (
        "Missing required tests evidence (.txt or .json) for milestone approval")
    assert review_files(root) == [f"{ids['rev']}.yaml"]

    report = _report(root, ids, task_id, first["id"], evidence=["art_gone", patch],
                     tests=[tests])
    decided = _approve(client, root, ids, task_id, first["id"], report, notes="n")
    assert decided == {"review_id": decided["review_id"], "decision": "approved",
                       "task_status": "in_progress", "milestone_status": "done"}
    front, body = read_front_matter(path)
    assert [m["status"] for m in front["milestones"]] == ["done", "ready"]
    assert body == "\n# Cart\n\n## Contract\n\n## Milestones\n"
    assert list(front) == ["schema_version", "type", "id", "project_id", "title", "created_at",
                           "status", "visibility", "team_id", "deliverables",
                           "acceptance_criteria", "milestones"]  # the schema's order
    review = read_yaml(root / f"inbox/reviews/{decided['review_id']}.yaml")
    policy = {"allowed": True, "rule_id": "vis.team.manager_override",
              "reason": "manager_override"}
    assert review == {"schema_version": 1, "type": "review", "id": decided["review_id"],
                      "created_at": review["created_at"], "actor_id": "mgr_1",
                      "actor_role": "manager", "decision": "approved",
                      "subject": {"kind": "milestone", "artifact_id": report,
                                  "project_id": ids["proj"]},
                      "policy": policy, "notes": "n"}
    [event] = run_events(root, ids["proj"], ids["run"])
    assert (event["type"], event["actor"], event["visibility"]) == (
        "approval.decided", "mgr_1", "managers")
    assert event["payload"] == {"review_id": decided["review_id"], "decision": "approved",
                                "subject_kind": "milestone", "task_id": task_id,
                                "milestone_id": first["id"], "report_artifact_id": report,
                                "policy": policy}
    assert_valid(root)

    # research: no evidence needed; the last milestone done makes the task done
    last = _approve(client, root, ids, task_id, second["id"],
                    _report(root, ids, task_id, second["id"]))
    assert (last["task_status"], last["milestone_status"]) == ("done", "done")
    assert read_front_matter(path)[0]["status"] == "done"
    assert_valid(root)


@pytest.mark.parametrize(("evidence", "files", "error"), [
    ({"requires_patch": False, "requires_tests": True}, [], "tests evidence"),
    ({"requires_patch": False, "requires_tests": True}, [".txt"], None),
    ({"requires_patch": False, "requires_tests": False}, [], None),
    ({"requires_patch": True, "requires_tests": False}, [".txt"], "patch evidence"),
    ({"requires_patch": True, "requires_tests": False}, [".patch"], None),
])
def test_explicit_evidence_rules(client: Client, workspace: Workspace,
                                 evidence: dict[str, bool], files: list[str],
                                 error: str | None) -> None:
    root, ids = workspace
    milestone = _milestone("coding", evidence=evidence)
    task_id, path = _task(root, ids, [milestone])
    arts = [_evidence(root, ids, ext) for ext in files]
    report = _report(root, ids, task_id, milestone["id"], evidence=arts, tests=arts)
    if error is None:
        assert _approve(client, root, ids, task_id, milestone["id"], report)["task_status"] \
            == "done"
        return
    with pytest.raises(RpcFailure, match=error):
        _approve(client, root, ids, task_id, milestone["id"], report)
    assert read_front_matter(path)[0]["milestones"][0]["status"] == "ready"


def test_done_milestone_and_mismatched_or_unknown_things_are_refused(
        client: Client, workspace: Workspace) -> None:
    root, ids = workspace
    done, other = _milestone("planning", status="done"), _milestone("planning")
    task_id, path = _task(root, ids, [done, other])
    before = path.read_text()
    report = _report(root, ids, task_id, done["id"])
    cases: list[tuple[dict[str, Any], str]] = [
        ({"milestone_id": done["id"]}, "Milestone is already done"),
        ({"milestone_id": "ms_none"}, "Milestone not found: ms_none"),
        ({"milestone_id": other["id"]}, "Milestone report milestone_id mismatch"),
        ({"milestone_id": other["id"], "report_artifact_id": "art_none"},
         f"Unknown artifact: art_none (project {ids['proj']})"),
        ({"milestone_id": other["id"], "report_artifact_id": ids["delta"]},
         "Invalid milestone report"),
        ({"task_id": "task_none"}, f"Unknown task: task_none (project {ids['proj']})"),
        ({"task_id": "../../x"}, "task_id must be a name, not a path"),
        ({"report_artifact_id": "../x"}, "report_artifact_id must be a name, not a path"),
        ({"project_id": "proj_none"}, "Unknown project: proj_none"),
    ]
    for change, message in cases:
        params = {"task_id": task_id, "milestone_id": done["id"], "report_artifact_id": report,
                  **change}
        with pytest.raises(RpcFailure) as failed:
            client.call("milestone.approve", {
                "workspace_dir": str(root), "project_id": ids["proj"], "actor_id": "m",
                "actor_role": "manager", **params})
        assert failed.value.code == -32000
        assert failed.value.error["message"].startswith(message), change
    assert path.read_text() == before and review_files(root) == [f"{ids['rev']}.yaml"]
    # another task's report does not approve this task's milestone
    other_task, _ = _task(root, ids, [_milestone("planning")])
    with pytest.raises(RpcFailure, match="Milestone report task_id mismatch"):
        _approve(client, root, ids, task_id, other["id"],
                 _report(root, ids, other_task, other["id"]))


def test_milestone_approval_policy(client: Client, workspace: Workspace) -> None:
    root, ids = workspace
    milestone = _milestone("planning")
    task_id, path = _task(root, ids, [milestone], team_id=ids["team"])
    private = _report(root, ids, task_id, milestone["id"], visibility="private_agent")
    with pytest.raises(RpcFailure) as failed:
        _approve(client, root, ids, task_id, milestone["id"], private, actor_role="worker",
                 actor_team_id=ids["team"])
    assert failed.value.error["message"] == "Policy denied approval: approve.role " \
        "(role_not_allowed)"
    with pytest.raises(RpcFailure) as failed:
        _approve(client, root, ids, task_id, milestone["id"], private)
    assert failed.value.data["policy"]["reason"] == "not_owner"
    events = run_events(root, ids["proj"], ids["run"])
    assert [(e["type"], e["payload"]["resource_kind"]) for e in events] == [
        ("policy.denied", "milestone_report")] * 2
    assert read_front_matter(path)[0]["milestones"][0]["status"] == "ready"
    decided = _approve(client, root, ids, task_id, milestone["id"], private, actor_id="h",
                       actor_role="human")
    assert decided["task_status"] == "done"
    assert_valid(root)

"""`memory.propose_delta` and `memory.approve_delta`: the artifact and patch written, the
patch applied on approval (and nothing at all changed when it does not apply), the deny
extension, one decision per delta (also when two race), policy refusals and paths that try
to leave the workspace."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from ralph.company.files import read_front_matter, read_yaml
from ralph.company.layout import CompanyError
from ralph.company.memory import approve_delta
from tests.company.conftest import Client, RpcFailure
from tests.company.test_governance import (
    MEMORY,
    Workspace,
    assert_valid,
    review_files,
    run_events,
    write_artifact,
)


def _memory(root: Path, ids: dict[str, str], text: str = MEMORY) -> Path:
    path = root / "work/projects" / ids["proj"] / "memory.md"
    path.write_text(text)
    return path


def _propose(client: Client, root: Path, ids: dict[str, str], **change: Any) -> Any:
    return client.call("memory.propose_delta", {
        "workspace_dir": str(root), "project_id": ids["proj"], "title": "Adopt X",
        "under_heading": "## Decisions", "insert_lines": ["- adopt X", "- drop Y"],
        "visibility": "team", "produced_by": ids["agent"], "run_id": ids["run"],
        "context_pack_id": ids["ctx"], **change})


def _decide(client: Client, root: Path, ids: dict[str, str], artifact_id: str,
            **change: Any) -> Any:
    return client.call("memory.approve_delta", {
        "workspace_dir": str(root), "project_id": ids["proj"], "artifact_id": artifact_id,
        "actor_id": "mgr_1", "actor_role": "manager", **change})


def test_propose_writes_the_delta_and_its_patch_not_the_target(
        client: Client, workspace: Workspace) -> None:
    root, ids = workspace
    memory = _memory(root, ids)
    made = _propose(client, root, ids, evidence=["ev_1"])
    rel = f"work/projects/{ids['proj']}/memory.md"
    art = f"work/projects/{ids['proj']}/artifacts/{made['artifact_id']}"
    assert made == {"artifact_id": made["artifact_id"], "artifact_relpath": f"{art}.md",
                    "patch_relpath": f"{art}.patch", "target_file": rel}
    assert memory.read_text() == MEMORY
    assert (root / f"{art}.patch").read_text() == (
        "===================================================================\n"
        f"--- a/{rel}\t\n+++ b/{rel}\t\n@@ -3,5 +3,8 @@\n ## Summary\n \n ## Decisions\n \n"
        "+- adopt X\n+- drop Y\n+\n ## Links\n")
    front, body = read_front_matter(root / f"{art}.md")
    assert front == {
        "schema_version": 1, "type": "memory_delta", "id": made["artifact_id"],
        "created_at": front["created_at"], "title": "Adopt X", "visibility": "team",
        "produced_by": ids["agent"], "run_id": ids["run"], "context_pack_id": ids["ctx"],
        "project_id": ids["proj"], "target_file": rel, "patch_file": f"{art}.patch",
        "evidence": ["ev_1"]}
    assert list(front) == ["schema_version", "type", "id", "created_at", "title", "visibility",
                           "produced_by", "run_id", "context_pack_id", "project_id",
                           "target_file", "patch_file", "evidence"]
    assert body == (
        "\n# Adopt X\n\n## Summary\n\n## Changes\n\n"
        f"- target_file: `{rel}`\n- patch_file: `{art}.patch`\n- inserted_under: `## Decisions`"
        "\n\n```text\n- adopt X\n- drop Y\n```\n\n## Evidence\n\n- ev_1\n")
    assert_valid(root)
    without = _propose(client, root, ids)  # no evidence: no key
    assert "evidence" not in read_front_matter(root / without["artifact_relpath"])[0]


def test_approve_applies_the_patch_writes_the_review_and_the_event(
        client: Client, workspace: Workspace) -> None:
    root, ids = workspace
    memory = _memory(root, ids)
    made = _propose(client, root, ids)
    decided = _decide(client, root, ids, made["artifact_id"], notes="good")
    assert list(decided) == ["review_id", "decision"] and decided["decision"] == "approved"
    assert memory.read_text() == ("# Project Memory (Curated)\n\n## Summary\n\n## Decisions\n\n"
                                  "- adopt X\n- drop Y\n\n## Links\n")
    review = read_yaml(root / f"inbox/reviews/{decided['review_id']}.yaml")
    policy = {"allowed": True, "rule_id": "vis.team.manager_override",
              "reason": "manager_override"}
    subject = {"kind": "memory_delta", "artifact_id": made["artifact_id"],
               "project_id": ids["proj"], "target_file": made["target_file"],
               "patch_file": made["patch_relpath"]}
    assert review == {"schema_version": 1, "type": "review", "id": decided["review_id"],
                      "created_at": review["created_at"], "actor_id": "mgr_1",
                      "actor_role": "manager", "decision": "approved", "subject": subject,
                      "policy": policy, "notes": "good"}
    [event] = run_events(root, ids["proj"], ids["run"])
    assert (event["type"], event["actor"], event["visibility"], event["ts_wallclock"]) == (
        "approval.decided", "mgr_1", "managers", review["created_at"])
    assert event["payload"] == {
        "review_id": decided["review_id"], "decision": "approved",
        "subject_kind": "memory_delta", "artifact_id": made["artifact_id"],
        "target_file": made["target_file"], "patch_file": made["patch_relpath"],
        "policy": policy}
    assert_valid(root)


def test_deny_records_the_decision_and_leaves_the_target(client: Client,
                                                         workspace: Workspace) -> None:
    root, ids = workspace
    memory = _memory(root, ids)
    made = _propose(client, root, ids)
    decided = _decide(client, root, ids, made["artifact_id"], decision="denied")
    assert decided["decision"] == "denied"
    assert memory.read_text() == MEMORY
    review = read_yaml(root / f"inbox/reviews/{decided['review_id']}.yaml")
    assert (review["decision"], review["notes"]) == ("denied", "")  # notes always written
    [event] = run_events(root, ids["proj"], ids["run"])
    assert event["payload"]["decision"] == "denied"
    assert_valid(root)
    with pytest.raises(RpcFailure) as failed:
        _decide(client, root, ids, made["artifact_id"], decision="maybe")
    assert failed.value.code == -32602


@pytest.mark.parametrize("first", ["approved", "denied"])
def test_a_delta_is_decided_once(client: Client, workspace: Workspace, first: str) -> None:
    root, ids = workspace
    memory = _memory(root, ids)
    made = _propose(client, root, ids)
    decided = _decide(client, root, ids, made["artifact_id"], decision=first)
    after_first = memory.read_text()
    reviews = review_files(root)
    for second in ("approved", "denied"):
        with pytest.raises(RpcFailure) as failed:
            _decide(client, root, ids, made["artifact_id"], decision=second,
                    actor_id="other", actor_role="human")
        assert failed.value.code == -32000
        assert failed.value.error["message"] == (
            f"Memory delta {made['artifact_id']} was already decided ({first}, review "
            f"{decided['review_id']})")
        assert failed.value.data["review_id"] == decided["review_id"]
    assert memory.read_text() == after_first and review_files(root) == reviews
    assert len(run_events(root, ids["proj"], ids["run"])) == 1


def test_racing_approvals_apply_the_patch_once(client: Client, workspace: Workspace) -> None:
    """Service calls from four threads at once (the control plane would put them in a row;
    two servers or a CLI would not): one applies, the others see its review."""
    root, ids = workspace
    memory = _memory(root, ids)
    made = client.call("memory.propose_delta", {
        "workspace_dir": str(root), "project_id": ids["proj"], "title": "T",
        "under_heading": "## Decisions", "insert_lines": ["- once"], "visibility": "org",
        "produced_by": "human", "run_id": ids["run"], "context_pack_id": ids["ctx"]})
    start = threading.Barrier(4)
    outcomes: list[str] = []

    def approve() -> None:
        start.wait()
        try:
            outcomes.append(approve_delta(root, ids["proj"], made["artifact_id"], "h",
                                          "human")["decision"])
        except CompanyError as exc:
            outcomes.append(str(exc))

    threads = [threading.Thread(target=approve) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(outcomes) == 4 and outcomes.count("approved") == 1
    assert all("was already decided (approved" in o for o in outcomes if o != "approved")
    assert memory.read_text().count("- once") == 1
    assert len(review_files(root)) == 2  # the fixture's and this one


def test_a_patch_that_no_longer_applies_changes_nothing(client: Client,
                                                        workspace: Workspace) -> None:
    root, ids = workspace
    memory = _memory(root, ids)
    made = _propose(client, root, ids)
    edited = MEMORY.replace("## Links", "## References")  # the hunk's context is gone
    memory.write_text(edited)
    reviews = review_files(root)
    with pytest.raises(RpcFailure) as failed:
        _decide(client, root, ids, made["artifact_id"])
    assert failed.value.code == -32000
    assert failed.value.error["message"] == "Patch did not apply cleanly to target file"
    assert failed.value.data == {
        "workspace_dir": str(root), "project_id": ids["proj"],
        "artifact_id": made["artifact_id"], "target_file": made["target_file"],
        "patch_file": made["patch_relpath"]}
    assert memory.read_text() == edited
    assert review_files(root) == reviews
    assert run_events(root, ids["proj"], ids["run"]) == []
    memory.write_text(MEMORY)  # put back, it applies (it was not decided)
    assert _decide(client, root, ids, made["artifact_id"])["decision"] == "approved"


def test_a_patch_in_the_originals_format_is_applied(client: Client,
                                                    workspace: Workspace) -> None:
    """A delta as the original writes it, its patch made by the JavaScript diff library for
    a heading followed by several blank lines (its Myers diff puts the inserted blank line
    after them, not beside the inserted text)."""
    root, ids = workspace
    rel = f"work/projects/{ids['proj']}/notes.md"
    (root / rel).write_text("# M\n## D\n\n\n\nx\n")
    patch_rel = f"work/projects/{ids['proj']}/artifacts/art_orig.patch"
    (root / patch_rel).write_text(
        "===================================================================\n"
        f"--- a/{rel}\t\n+++ b/{rel}\t\n@@ -1,6 +1,8 @@\n # M\n ## D\n \n+- a\n \n \n+\n x\n")
    write_artifact(root, ids["proj"], "art_orig", {
        "type": "memory_delta", "visibility": "org", "produced_by": "human",
        "run_id": ids["run"], "context_pack_id": ids["ctx"], "project_id": ids["proj"],
        "target_file": rel, "patch_file": patch_rel}, "\n## Summary\n\n## Changes\n\n"
        "## Evidence\n")
    assert_valid(root)
    assert _decide(client, root, ids, "art_orig")["decision"] == "approved"
    assert (root / rel).read_text() == "# M\n## D\n\n- a\n\n\n\nx\n"
    # and ours proposes the very same patch for the same change
    (root / rel).write_text("# M\n## D\n\n\n\nx\n")
    made = _propose(client, root, ids, target_file=rel, under_heading="## D",
                    insert_lines=["- a"])
    assert (root / made["patch_relpath"]).read_text() == (root / patch_rel).read_text()


def test_approval_refused_by_the_policy_writes_nothing_but_the_event(
        client: Client, workspace: Workspace) -> None:
    root, ids = workspace
    memory = _memory(root, ids)
    team = _propose(client, root, ids)
    private = _propose(client, root, ids, visibility="private_agent")
    reviews = review_files(root)
    cases = [(team, "worker", "approve.role", "role_not_allowed"),
             (private, "manager", "vis.private.owner", "not_owner")]
    for made, role, rule, reason in cases:
        with pytest.raises(RpcFailure) as failed:
            _decide(client, root, ids, made["artifact_id"], actor_role=role)
        assert failed.value.error["message"] == f"Policy denied approval: {rule} ({reason})"
        assert failed.value.data["policy"] == {"allowed": False, "rule_id": rule,
                                               "reason": reason}
    events = run_events(root, ids["proj"], ids["run"])
    assert [e["payload"]["policy"]["rule_id"] for e in events] == [
        "approve.role", "vis.private.owner"]
    assert events[1]["payload"] == {
        "action": "approve", "resource_id": private["artifact_id"],
        "resource_kind": "memory_delta", "resource_visibility": "private_agent",
        "policy": {"allowed": False, "rule_id": "vis.private.owner", "reason": "not_owner"}}
    assert memory.read_text() == MEMORY and review_files(root) == reviews
    # a human may decide a private delta
    assert _decide(client, root, ids, private["artifact_id"], actor_role="human")


@pytest.mark.parametrize(("change", "message"), [
    ({"target_file": "/etc/passwd"},
     "target_file must be workspace-relative, not absolute: /etc/passwd"),
    ({"target_file": "work/../../outside.md"},
     "target_file must not contain '..': work/../../outside.md"),
    ({"target_file": "work/projects/nothing.md"}, "Target file not found: work/projects/"),
    ({"under_heading": "## Nowhere"}, "Heading not found: ## Nowhere"),
    ({"project_id": "proj_missing"}, "Unknown project: proj_missing"),
    ({"project_id": "../x"}, "project_id must be a name, not a path"),
    ({"run_id": "../../r"}, "run_id must be a name, not a path"),
])
def test_propose_refuses(client: Client, workspace: Workspace, change: dict[str, Any],
                         message: str) -> None:
    root, ids = workspace
    _memory(root, ids)
    artifacts = root / "work/projects" / ids["proj"] / "artifacts"
    before = sorted(artifacts.iterdir())
    with pytest.raises(RpcFailure) as failed:
        _propose(client, root, ids, **change)
    assert failed.value.code == -32000
    assert failed.value.error["message"].startswith(message)
    assert sorted(artifacts.iterdir()) == before


def test_propose_refuses_a_link_out_of_the_workspace(client: Client, workspace: Workspace,
                                                     tmp_path: Path) -> None:
    root, ids = workspace
    outside = tmp_path / "outside.md"
    outside.write_text(MEMORY)
    (root / "work/link.md").symlink_to(outside)
    with pytest.raises(RpcFailure) as failed:
        _propose(client, root, ids, target_file="work/link.md")
    assert failed.value.error["message"] == (
        "target_file leads out of the workspace (through a link): work/link.md")


def test_approve_refuses_traversal_in_a_delta_and_unknown_ids(client: Client,
                                                              workspace: Workspace) -> None:
    root, ids = workspace
    base = {"type": "memory_delta", "visibility": "org", "produced_by": "human",
            "run_id": ids["run"], "context_pack_id": ids["ctx"], "project_id": ids["proj"],
            "patch_file": f"work/projects/{ids['proj']}/artifacts/{ids['delta']}.patch"}
    body = "\n## Summary\n\n## Changes\n\n## Evidence\n"
    write_artifact(root, ids["proj"], "art_up", {**base, "target_file": "../../etc/x"}, body)
    write_artifact(root, ids["proj"], "art_abs", {**base, "target_file": "/etc/x"}, body)
    cases = [("art_up", "target_file must not contain '..': ../../etc/x"),
             ("art_abs", "target_file must be workspace-relative, not absolute: /etc/x"),
             ("art_none", f"Unknown artifact: art_none (project {ids['proj']})"),
             ("../art", "artifact_id must be a name, not a path"),
             (ids["report"], f"Invalid memory delta work/projects/{ids['proj']}/artifacts/"
                             f"{ids['report']}.md: ")]
    for artifact_id, message in cases:
        with pytest.raises(RpcFailure) as failed:
            _decide(client, root, ids, artifact_id)
        assert failed.value.code == -32000
        assert failed.value.error["message"].startswith(message), artifact_id
    assert run_events(root, ids["proj"], ids["run"]) == []


def test_approve_refuses_a_delta_of_another_project(client: Client,
                                                    workspace: Workspace) -> None:
    root, ids = workspace
    _memory(root, ids)
    made = _propose(client, root, ids)
    path = root / made["artifact_relpath"]
    path.write_text(path.read_text().replace(f"project_id: {ids['proj']}",
                                             "project_id: proj_other"))
    with pytest.raises(RpcFailure) as failed:
        _decide(client, root, ids, made["artifact_id"])
    assert failed.value.error["message"] == (
        f"Memory delta project_id mismatch (expected {ids['proj']}, got proj_other)")


def test_two_deltas_of_one_file_approved_at_once_both_land(client: Client,
                                                           workspace: Workspace) -> None:
    """Each delta has its own lock; the file they both patch has one too (two servers
    approving at once must not each write the file over the other's change)."""
    root, ids = workspace
    memory = _memory(root, ids)
    deltas = [client.call("memory.propose_delta", {
        "workspace_dir": str(root), "project_id": ids["proj"], "title": heading,
        "under_heading": heading, "insert_lines": [line], "visibility": "org",
        "produced_by": "human", "run_id": ids["run"], "context_pack_id": ids["ctx"]})
        for heading, line in (("## Summary", "- from a"), ("## Links", "- from b"))]
    start = threading.Barrier(2)
    outcomes: list[str] = []

    def approve(artifact_id: str) -> None:
        start.wait()
        outcomes.append(approve_delta(root, ids["proj"], artifact_id, "h", "human")["decision"])

    threads = [threading.Thread(target=approve, args=(d["artifact_id"],)) for d in deltas]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes == ["approved", "approved"]
    text = memory.read_text()
    assert "- from a" in text and "- from b" in text

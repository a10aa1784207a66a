"""Workspaces as AgentCompany writes them, for the company tests."""

from __future__ import annotations

from pathlib import Path

from ralph.company.files import with_front_matter, write_yaml
from ralph.company.ids import new_id
from ralph.company.workspace import init_workspace

TS = "2026-02-10T20:58:31.123Z"


def populated(root: Path) -> dict[str, str]:
    """A workspace with one of each file, as the original writes them; their ids."""
    init_workspace(root)
    ids = {k: new_id(p) for k, p in (("team", "team"), ("agent", "agent"), ("proj", "proj"),
                                     ("task", "task"), ("ms", "ms"), ("run", "run"),
                                     ("ctx", "ctx"), ("delta", "art"), ("report", "art"),
                                     ("rev", "rev"), ("help", "help"), ("share", "share"))}
    write_yaml(root / f"org/teams/{ids['team']}/team.yaml", {
        "schema_version": 1, "type": "team", "id": ids["team"], "name": "Core",
        "created_at": TS})
    write_yaml(root / f"org/agents/{ids['agent']}/agent.yaml", {
        "schema_version": 1, "type": "agent", "id": ids["agent"], "name": "Ada",
        "role": "worker", "provider": "codex", "team_id": ids["team"], "created_at": TS,
        "launcher": {}})
    project = root / "work/projects" / ids["proj"]
    write_yaml(project / "project.yaml", {"schema_version": 1, "type": "project",
                                          "id": ids["proj"], "name": "Shop",
                                          "status": "active", "created_at": TS})
    run = project / "runs" / ids["run"]
    write_yaml(run / "run.yaml", {
        "schema_version": 1, "type": "run", "id": ids["run"], "project_id": ids["proj"],
        "agent_id": ids["agent"], "provider": "codex", "created_at": TS, "status": "ended",
        "context_pack_id": ids["ctx"], "events_relpath": f"runs/{ids['run']}/events.jsonl",
        "spec": {"kind": "command", "argv": ["echo", "hi"]}})
    (run / "events.jsonl").write_text("")
    task = {"schema_version": 1, "type": "task", "id": ids["task"], "project_id": ids["proj"],
            "title": "Cart", "created_at": TS, "status": "ready", "visibility": "team",
            "deliverables": ["cart.py"], "acceptance_criteria": ["tests pass"],
            "milestones": [{"id": ids["ms"], "title": "Code", "kind": "coding",
                            "status": "ready", "acceptance_criteria": ["it works"]}]}
    (project / "tasks").mkdir()
    (project / "tasks" / f"{ids['task']}.md").write_text(
        with_front_matter(task, "\n# Cart\n\n## Contract\n\n## Milestones\n"))
    common = {"schema_version": 1, "id": "", "created_at": TS, "title": "T",
              "visibility": "team", "produced_by": ids["agent"], "run_id": ids["run"],
              "context_pack_id": ids["ctx"]}
    (project / "artifacts").mkdir()
    patch = f"work/projects/{ids['proj']}/artifacts/{ids['delta']}.patch"
    (root / patch).write_text("--- a/x\n+++ b/x\n")
    (project / "artifacts" / f"{ids['delta']}.md").write_text(with_front_matter(
        {**common, "type": "memory_delta", "id": ids["delta"], "project_id": ids["proj"],
         "target_file": f"work/projects/{ids['proj']}/memory.md", "patch_file": patch},
        "\n## Summary\n\n## Changes\n\n## Evidence\n"))
    (project / "artifacts" / f"{ids['report']}.md").write_text(with_front_matter(
        {**common, "type": "milestone_report", "id": ids["report"], "project_id": ids["proj"],
         "task_id": ids["task"], "milestone_id": ids["ms"], "evidence_artifacts": []},
        "\n## Summary\n\n## Evidence\n\n## Next\n"))
    pack = project / "context_packs" / ids["ctx"]
    write_yaml(pack / "manifest.yaml", {
        "schema_version": 1, "type": "context_pack_manifest", "id": ids["ctx"],
        "created_at": TS, "run_id": ids["run"], "project_id": ids["proj"],
        "agent_id": ids["agent"], "included_docs": [], "tool_allowlist": []})
    write_yaml(pack / "policy_snapshot.yaml", {
        "schema_version": 1, "type": "policy_snapshot", "id": new_id("art"), "created_at": TS,
        "run_id": ids["run"], "tool_allowlist": []})
    share = project / "share_packs" / ids["share"]
    bundle = f"work/projects/{ids['proj']}/share_packs/{ids['share']}/bundle/{ids['delta']}.md"
    write_yaml(share / "manifest.yaml", {
        "schema_version": 1, "type": "share_pack", "id": ids["share"], "created_at": TS,
        "project_id": ids["proj"], "created_by": ids["agent"], "visibility": "org",
        "included_artifacts": [{"artifact_id": ids["delta"], "type": "memory_delta",
                                "visibility": "team", "source_relpath": "a",
                                "bundle_relpath": bundle}]})
    (root / bundle).parent.mkdir(parents=True)
    (root / bundle).write_text("x")
    write_yaml(root / f"inbox/reviews/{ids['rev']}.yaml", {
        "schema_version": 1, "type": "review", "id": ids["rev"], "created_at": TS,
        "actor_id": "human", "actor_role": "human", "decision": "approved",
        "subject": {"kind": "memory_delta", "artifact_id": ids["delta"],
                    "project_id": ids["proj"]},
        "policy": {"allowed": True, "rule_id": "approve.role", "reason": "ok"}, "notes": ""})
    (root / f"inbox/help_requests/{ids['help']}.md").write_text(with_front_matter(
        {"schema_version": 1, "type": "help_request", "id": ids["help"], "created_at": TS,
         "title": "Stuck", "visibility": "managers", "requester": ids["agent"],
         "target_manager": "agent_x"}, "\n## Question\n\n## Response\n"))
    return ids

"""`agent.record_mistake`: the mistakes log, the AGENTS.md it starts, the promotion of a
prevention rule at the threshold (exactly once), the events, and what is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ralph.company.files import read_yaml
from tests.company.conftest import Client, RpcFailure
from tests.company.test_governance import Workspace, assert_valid, run_events

BASE = ("# AGENTS.md - {agent}\n\n## Operating Rules\n"
        "- Follow the assigned task contract and milestone acceptance criteria.\n"
        "- Produce required evidence artifacts for coding milestones (patch/commit + tests).\n"
        "- Report blockers early with concrete evidence.\n\n## Recurring Mistakes To Avoid\n"
        "<!-- managed: recurring-mistakes -->\n")


def _record(client: Client, root: Path, ids: dict[str, str], **change: Any) -> Any:
    return client.call("agent.record_mistake", {
        "workspace_dir": str(root), "worker_agent_id": ids["agent"],
        "manager_actor_id": "mgr_1", "manager_role": "manager", "mistake_key": "no-tests",
        "summary": "Shipped without tests", "prevention_rule": "Run the tests first",
        "project_id": ids["proj"], "run_id": ids["run"], **change})


def test_mistakes_are_counted_and_promoted_once_at_the_threshold(
        client: Client, workspace: Workspace) -> None:
    root, ids = workspace
    agent_dir = root / "org/agents" / ids["agent"]
    first = _record(client, root, ids, task_id="task_1", evidence_artifact_ids=["art_1"])
    assert first == {"worker_agent_id": ids["agent"], "mistake_key": "no-tests", "count": 1,
                     "promoted_to_agents_md": False,
                     "log_relpath": f"org/agents/{ids['agent']}/mistakes.yaml",
                     "agents_md_relpath": f"org/agents/{ids['agent']}/AGENTS.md"}
    assert (agent_dir / "AGENTS.md").read_text() == BASE.format(agent=ids["agent"])
    log = read_yaml(agent_dir / "mistakes.yaml")
    assert list(log) == ["schema_version", "type", "agent_id", "updated_at", "entries"]
    assert (log["type"], log["agent_id"]) == ("agent_mistake_log", ids["agent"])
    [entry] = log["entries"]
    assert entry == {"key": "no-tests", "count": 1, "last_seen_at": log["updated_at"],
                     "summary": "Shipped without tests",
                     "prevention_rule": "Run the tests first",
                     "observations": [{"at": log["updated_at"], "observed_by": "mgr_1",
                                       "project_id": ids["proj"], "run_id": ids["run"],
                                       "task_id": "task_1",
                                       "evidence_artifact_ids": ["art_1"]}]}

    assert _record(client, root, ids)["promoted_to_agents_md"] is False
    third = _record(client, root, ids, prevention_rule="Always run the tests")
    assert (third["count"], third["promoted_to_agents_md"]) == (3, True)
    rule = "- <!-- mistake:no-tests --> [no-tests] Always run the tests (promoted after 3 repeats)"
    assert (agent_dir / "AGENTS.md").read_text() == BASE.format(agent=ids["agent"]).replace(
        "Avoid\n", f"Avoid\n{rule}\n")
    fourth = _record(client, root, ids)
    assert (fourth["count"], fourth["promoted_to_agents_md"]) == (4, False)
    assert (agent_dir / "AGENTS.md").read_text().count("mistake:no-tests") == 1

    events = run_events(root, ids["proj"], ids["run"])
    assert [e["type"] for e in events] == [
        "evaluation.mistake_recorded", "evaluation.mistake_recorded",
        "evaluation.mistake_recorded", "evaluation.rule_promoted",
        "evaluation.mistake_recorded"]
    assert all((e["actor"], e["visibility"]) == ("mgr_1", "managers") for e in events)
    assert events[0]["payload"] == {"worker_agent_id": ids["agent"], "mistake_key": "no-tests",
                                    "count": 1, "threshold": 3, "task_id": "task_1",
                                    "milestone_id": None, "evidence_artifact_ids": ["art_1"]}
    assert events[3]["payload"] == {"worker_agent_id": ids["agent"], "mistake_key": "no-tests",
                                    "promoted_to": f"org/agents/{ids['agent']}/AGENTS.md",
                                    "count": 3}
    # a key that merely starts the same is another mistake, promoted on its own
    other = _record(client, root, ids, mistake_key="no-tests-2", promote_threshold=1)
    assert other["promoted_to_agents_md"] is True
    assert_valid(root)


def test_observations_are_capped_and_no_run_means_no_event(client: Client,
                                                           workspace: Workspace) -> None:
    root, ids = workspace
    for n in range(22):
        done = _record(client, root, ids, project_id=None, run_id=None, milestone_id=f"ms_{n}",
                       promote_threshold=100)
    assert done["count"] == 22
    [entry] = read_yaml(root / "org/agents" / ids["agent"] / "mistakes.yaml")["entries"]
    assert [o["milestone_id"] for o in entry["observations"]] == [f"ms_{n}" for n in
                                                                  range(2, 22)]
    assert "project_id" not in entry["observations"][0]
    assert run_events(root, ids["proj"], ids["run"]) == []
    # a run that does not exist: recorded, no event anywhere
    assert _record(client, root, ids, run_id="run_gone", promote_threshold=100)["count"] == 23
    assert not (root / "work/projects" / ids["proj"] / "runs/run_gone").exists()


@pytest.mark.parametrize(("change", "code", "message"), [
    ({"manager_role": "worker"}, -32000, "Only manager+ roles can record worker mistakes"),
    ({"worker_agent_id": "agent_nobody"}, -32000, "Agent not found: agent_nobody"),
    ({"worker_agent_id": "../../etc"}, -32000, "worker_agent_id must be a name, not a path"),
    ({"mistake_key": "  "}, -32000, "mistake_key is required"),
    ({"prevention_rule": " "}, -32000, "prevention_rule is required"),
    ({"run_id": "../x"}, -32000, "run_id must be a name, not a path"),
    ({"promote_threshold": 0}, -32602, "Invalid params"),
])
def test_record_mistake_refuses(client: Client, workspace: Workspace, change: dict[str, Any],
                                code: int, message: str) -> None:
    root, ids = workspace
    with pytest.raises(RpcFailure) as failed:
        _record(client, root, ids, **change)
    assert failed.value.code == code
    assert failed.value.error["message"].startswith(message)
    assert not (root / "org/agents" / ids["agent"] / "mistakes.yaml").exists()


def test_a_broken_mistakes_log_is_reported_and_kept(client: Client,
                                                    workspace: Workspace) -> None:
    root, ids = workspace
    log = root / "org/agents" / ids["agent"] / "mistakes.yaml"
    for broken, message in (("entries: [\n", "is not valid YAML: "), ("- 1\n", "is not a mapping")):
        log.write_text(broken)
        with pytest.raises(RpcFailure) as failed:
            _record(client, root, ids)
        assert failed.value.error["message"].startswith(
            f"The mistakes log of {ids['agent']} {message}")
        assert str(root) not in failed.value.error["message"]
        assert log.read_text() == broken
    assert run_events(root, ids["proj"], ids["run"]) == []

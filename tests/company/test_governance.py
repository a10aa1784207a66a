"""The visibility policy (every rule), `artifact.read`, `inbox.list_reviews` and
`inbox.list_help_requests`; helpers the other governance tests share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from ralph.company.files import with_front_matter, write_yaml
from ralph.company.policy import Actor, Resource, evaluate
from ralph.company.workspace import validate_workspace
from tests.company.conftest import Client, RpcFailure
from tests.company.fixtures import TS

Workspace = tuple[Path, dict[str, str]]
MEMORY = "# Project Memory (Curated)\n\n## Summary\n\n## Decisions\n\n## Links\n"


# -- helpers (shared by test_memory, test_milestones, test_mistakes, test_context_index) --------

def run_events(root: Path, project_id: str, run_id: str) -> list[dict[str, Any]]:
    path = root / "work/projects" / project_id / "runs" / run_id / "events.jsonl"
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def review_files(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "inbox/reviews").iterdir())


def write_agent(root: Path, agent_id: str, team_id: str | None = None,
                role: str = "worker") -> None:
    data: dict[str, Any] = {"schema_version": 1, "type": "agent", "id": agent_id, "name": "A",
                            "role": role, "provider": "codex", "created_at": TS}
    if team_id:
        data["team_id"] = team_id
    write_yaml(root / f"org/agents/{agent_id}/agent.yaml", data)


def write_artifact(root: Path, project_id: str, artifact_id: str, front: dict[str, Any],
                   body: str) -> Path:
    path = root / "work/projects" / project_id / "artifacts" / f"{artifact_id}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(with_front_matter({"schema_version": 1, "id": artifact_id,
                                       "created_at": TS, "title": "T", **front}, body))
    return path


def assert_valid(root: Path) -> None:
    assert [issue.to_dict() for issue in validate_workspace(root)] == []


# -- the policy ---------------------------------------------------------------------------------

POLICY_TABLE = [
    # role, action, visibility, actor team, resource team, producer -> allowed, rule, reason
    ("worker", "approve", "org", None, None, None, False, "approve.role", "role_not_allowed"),
    ("worker", "approve", "private_agent", None, None, "w", False, "approve.role",
     "role_not_allowed"),
    ("worker", "read", "org", None, None, None, True, "vis.org", "org_visible"),
    ("manager", "approve", "org", None, None, None, True, "vis.org", "org_visible"),
    ("director", "read", "managers", None, None, None, True, "vis.managers",
     "manager_visible"),
    ("worker", "read", "managers", None, None, None, False, "vis.managers",
     "role_not_allowed"),
    ("ceo", "read", "team", None, "t1", None, True, "vis.team.manager_override",
     "manager_override"),
    ("human", "approve", "team", None, None, None, True, "vis.team.manager_override",
     "manager_override"),
    ("worker", "read", "team", "t1", "t1", None, True, "vis.team.same_team", "same_team"),
    ("worker", "read", "team", "t1", "t2", None, False, "vis.team.mismatch", "team_mismatch"),
    ("worker", "read", "team", None, None, None, False, "vis.team.mismatch", "team_mismatch"),
    ("worker", "read", "team", "t1", None, None, False, "vis.team.mismatch", "team_mismatch"),
    ("human", "read", "private_agent", None, None, "w", True, "vis.private.human",
     "human_override"),
    ("human", "approve", "private_agent", None, None, None, True, "vis.private.human",
     "human_override"),
    ("worker", "read", "private_agent", None, None, "w", True, "vis.private.owner", "owner"),
    ("worker", "read", "private_agent", None, None, "other", False, "vis.private.owner",
     "not_owner"),
    ("manager", "approve", "private_agent", None, None, None, False, "vis.private.owner",
     "not_owner"),
    ("manager", "approve", "private_agent", None, None, "w", True, "vis.private.owner",
     "owner"),
]


@pytest.mark.parametrize(("role", "action", "visibility", "actor_team", "resource_team",
                          "producer", "allowed", "rule", "reason"), POLICY_TABLE)
def test_policy_rule(role: str, action: Any, visibility: str, actor_team: str | None,
                     resource_team: str | None, producer: str | None, allowed: bool,
                     rule: str, reason: str) -> None:
    actor_id = "w" if role == "worker" else ("w" if producer == "w" else "m")
    decision = evaluate(Actor(actor_id, role, actor_team), action,
                        Resource("art_x", visibility, "artifact", team_id=resource_team,
                                 producing_actor_id=producer))
    assert (decision.allowed, decision.rule_id, decision.reason) == (allowed, rule, reason)
    assert list(decision.to_dict()) == ["allowed", "rule_id", "reason"]


# -- artifact.read ------------------------------------------------------------------------------

def _read(client: Client, root: Path, ids: dict[str, str], **actor: Any) -> Any:
    return client.call("artifact.read", {"workspace_dir": str(root), "project_id": ids["proj"],
                                         "artifact_id": ids["report"], **actor})


def test_artifact_read_gives_the_whole_file_to_the_producers_team(
        client: Client, workspace: Workspace) -> None:
    root, ids = workspace
    path = root / f"work/projects/{ids['proj']}/artifacts/{ids['report']}.md"
    found = _read(client, root, ids, actor_id="agent_peer", actor_role="worker",
                  actor_team_id=ids["team"])  # the producer's team (from its agent.yaml)
    assert list(found) == ["artifact_id", "artifact_relpath", "frontmatter", "markdown"]
    assert found["artifact_id"] == ids["report"]
    assert found["artifact_relpath"] == f"work/projects/{ids['proj']}/artifacts/{ids['report']}.md"
    assert found["markdown"] == path.read_text()
    assert found["frontmatter"]["type"] == "milestone_report"
    assert list(found["frontmatter"])[:3] == ["schema_version", "id", "created_at"]  # as written
    assert run_events(root, ids["proj"], ids["run"]) == []  # an allowed read leaves no trace
    assert _read(client, root, ids, actor_id="h", actor_role="human")["artifact_id"] \
        == ids["report"]


def test_artifact_read_denied_is_refused_and_recorded(client: Client,
                                                      workspace: Workspace) -> None:
    root, ids = workspace
    with pytest.raises(RpcFailure) as denied:
        _read(client, root, ids, actor_id="agent_out", actor_role="worker",
              actor_team_id="team_other")
    assert denied.value.code == -32000
    assert denied.value.error["message"] == "Policy denied read: vis.team.mismatch (team_mismatch)"
    assert denied.value.data["policy"] == {"allowed": False, "rule_id": "vis.team.mismatch",
                                           "reason": "team_mismatch"}
    events = run_events(root, ids["proj"], ids["run"])  # the artifact's run
    assert len(events) == 1
    event = events[0]
    assert (event["type"], event["actor"], event["visibility"]) == (
        "policy.denied", "agent_out", "managers")
    assert event["payload"] == {
        "action": "read", "resource_id": ids["report"], "resource_kind": "artifact",
        "resource_visibility": "team",
        "policy": {"allowed": False, "rule_id": "vis.team.mismatch", "reason": "team_mismatch"}}
    assert_valid(root)


def test_artifact_read_denial_goes_to_the_run_named(client: Client,
                                                    workspace: Workspace) -> None:
    root, ids = workspace
    made = client.call("run.create", {"workspace_dir": str(root), "project_id": ids["proj"],
                                      "agent_id": ids["agent"], "provider": "codex"})
    with pytest.raises(RpcFailure, match=r"vis\.team\.mismatch"):
        _read(client, root, ids, actor_id="agent_out", actor_role="worker",
              run_id=made["run_id"])
    assert [e["type"] for e in run_events(root, ids["proj"], made["run_id"])] == [
        "run.started", "policy.denied"]
    assert run_events(root, ids["proj"], ids["run"]) == []


@pytest.mark.parametrize(("change", "message"), [
    ({"artifact_id": "../../x"}, "artifact_id must be a name, not a path"),
    ({"artifact_id": "art_missing"}, "Unknown artifact: art_missing"),
    ({"project_id": "proj_missing"}, "Unknown project: proj_missing"),
    ({"project_id": ".."}, "project_id must be a name, not a path"),
    ({"run_id": "../r"}, "run_id must be a name, not a path"),
])
def test_artifact_read_bad_ids(client: Client, workspace: Workspace, change: dict[str, str],
                               message: str) -> None:
    root, ids = workspace
    params = {"workspace_dir": str(root), "project_id": ids["proj"],
              "artifact_id": ids["report"], "actor_id": "h", "actor_role": "human", **change}
    with pytest.raises(RpcFailure) as failed:
        client.call("artifact.read", params)
    assert failed.value.code == -32000
    assert failed.value.error["message"].startswith(message)
    assert failed.value.data["workspace_dir"] == str(root)


def test_artifact_read_bad_role_is_invalid_params(client: Client, workspace: Workspace) -> None:
    root, ids = workspace
    with pytest.raises(RpcFailure) as failed:
        _read(client, root, ids, actor_id="x", actor_role="intern")
    assert failed.value.code == -32602


# -- inbox listings -----------------------------------------------------------------------------

def _review(review_id: str, decision: str = "approved") -> dict[str, Any]:
    # keys in another order than the schema's: the listing gives the schema's order
    return {"notes": "n", "type": "review", "schema_version": 1, "id": review_id,
            "created_at": TS, "actor_role": "manager", "actor_id": "m", "decision": decision,
            "policy": {"reason": "org_visible", "rule_id": "vis.org", "allowed": True},
            "subject": {"project_id": "proj_x", "kind": "memory_delta", "artifact_id": "art_x"}}


def test_list_reviews_newest_names_first_invalid_ones_count(client: Client,
                                                            workspace: Workspace) -> None:
    root, ids = workspace
    reviews = root / "inbox/reviews"
    for name in ("rev_a", "rev_b", "rev_d"):
        write_yaml(reviews / f"{name}.yaml", _review(name))
    (reviews / "rev_c.yaml").write_text("type: review\n")  # schema-invalid
    (reviews / "rev_e.txt").write_text("not a review")
    listed = client.call("inbox.list_reviews", {"workspace_dir": str(root)})
    # ids['rev'] (rev_01…) sorts before the lowercase names
    assert [r["id"] for r in listed] == ["rev_d", "rev_b", "rev_a", ids["rev"]]
    assert list(listed[0]) == ["schema_version", "type", "id", "created_at", "actor_id",
                               "actor_role", "decision", "subject", "policy", "notes"]
    assert list(listed[0]["subject"]) == ["kind", "artifact_id", "project_id"]
    assert list(listed[0]["policy"]) == ["allowed", "rule_id", "reason"]
    # the limit counts rev_d and the invalid rev_c
    limited = client.call("inbox.list_reviews", {"workspace_dir": str(root), "limit": 2})
    assert [r["id"] for r in limited] == ["rev_d"]
    for bad in (0, 1001, "2", 1.5):
        with pytest.raises(RpcFailure) as failed:
            client.call("inbox.list_reviews", {"workspace_dir": str(root), "limit": bad})
        assert failed.value.code == -32602


def test_list_help_requests_gives_valid_front_matter(client: Client,
                                                     workspace: Workspace) -> None:
    root, ids = workspace
    helps = root / "inbox/help_requests"
    front = {"schema_version": 1, "type": "help_request", "id": "help_z", "created_at": TS,
             "title": "Q", "visibility": "org", "requester": "a", "target_manager": "m",
             "project_id": ids["proj"]}
    (helps / "help_z.md").write_text(with_front_matter(front, "\n## Question\n\n## Response\n"))
    (helps / "help_y.md").write_text(with_front_matter({**front, "id": "help_y"},
                                                       "\n## Question\n"))  # no Response
    (helps / "help_x.md").write_text("no front matter\n")
    listed = client.call("inbox.list_help_requests", {"workspace_dir": str(root)})
    assert [h["id"] for h in listed] == ["help_z", ids["help"]]
    assert listed[0] == front
    assert client.call("inbox.list_help_requests",
                       {"workspace_dir": str(root), "limit": 2}) == [front]


def test_listings_of_a_directory_that_is_not_a_workspace(client: Client,
                                                         tmp_path: Path) -> None:
    for method in ("inbox.list_reviews", "inbox.list_help_requests"):
        with pytest.raises(RpcFailure) as failed:
            client.call(method, {"workspace_dir": str(tmp_path)})
        assert failed.value.code == -32000
        assert "Not an AgentCompany workspace" in failed.value.error["message"]

"""`agent.refresh_context`: the managed context index of AGENTS.md (the real company file
paths, assignments newest first, the limits, `no_assigned_tasks`), the rest of the file
kept, and unknown agents and projects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ralph.company.files import with_front_matter
from tests.company.conftest import Client, RpcFailure
from tests.company.test_governance import Workspace, assert_valid, write_agent

BASE = ("# AGENTS.md - {agent}\n\n## Operating Rules\n"
        "- Follow the assigned task contract and milestone acceptance criteria.\n"
        "- Produce required evidence artifacts for coding milestones (patch/commit + tests).\n"
        "- Report blockers early with concrete evidence.\n\n## Recurring Mistakes To Avoid\n"
        "<!-- managed: recurring-mistakes -->\n\n## Relevant Context Index\n"
        "<!-- managed: context-index -->\n")


def _refresh(client: Client, root: Path, agent_id: str, **change: Any) -> Any:
    return client.call("agent.refresh_context", {"workspace_dir": str(root),
                                                 "agent_id": agent_id, **change})


def _task(root: Path, project_id: str, task_id: str, created_at: str, assignee: str,
          scope: dict[str, Any] | None = None) -> str:
    front: dict[str, Any] = {"schema_version": 1, "type": "task", "id": task_id,
                             "project_id": project_id, "title": "T", "created_at": created_at,
                             "status": "draft", "visibility": "team",
                             "assignee_agent_id": assignee, "milestones": []}
    if scope:
        front["scope"] = scope
    rel = f"work/projects/{project_id}/tasks/{task_id}.md"
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_text(with_front_matter(front, "\n## Contract\n\n## Milestones\n"))
    return rel


def _head(agent: str) -> list[str]:
    return ["- company_contract: `company/company.yaml`",
            "- org_visibility_policy: `company/policy.yaml`",
            f"- agent_profile: `org/agents/{agent}/agent.yaml`",
            f"- agent_journal: `org/agents/{agent}/journal.md`"]


def test_no_assigned_tasks(client: Client, workspace: Workspace) -> None:
    root, _ = workspace
    agent = "agent_idle"
    write_agent(root, agent)
    done = _refresh(client, root, agent)
    assert list(done) == ["agent_id", "agents_md_relpath", "assignment_count",
                          "reference_count", "updated", "generated_at"]
    assert (done["agent_id"], done["agents_md_relpath"], done["assignment_count"],
            done["reference_count"], done["updated"]) == (
        agent, f"org/agents/{agent}/AGENTS.md", 0, 5, True)
    lines = [*_head(agent), "- no_assigned_tasks: true"]
    text = (root / done["agents_md_relpath"]).read_text()
    assert text == BASE.format(agent=agent) + "".join(f"{line}\n" for line in lines)
    again = _refresh(client, root, agent)
    assert again["updated"] is False
    assert (root / done["agents_md_relpath"]).read_text() == text


def test_assignments_newest_first_with_scope_and_limits(client: Client,
                                                        workspace: Workspace) -> None:
    root, ids = workspace
    agent, proj = ids["agent"], ids["proj"]
    old = _task(root, proj, "task_A", "2026-01-01T00:00:00.000Z", agent,
                {"repo_id": "repo1", "workdir_rel": "svc", "paths": ["a.py", "b.py"]})
    new = _task(root, proj, "task_B", "2026-03-01T00:00:00.000Z", agent, {"paths": ["c.py"]})
    tie = _task(root, proj, "task_C", "2026-03-01T00:00:00.000Z", agent)
    _task(root, proj, "task_D", "2026-04-01T00:00:00.000Z", "agent_other")
    (root / f"work/projects/{proj}/tasks/task_bad.md").write_text("no front matter\n")
    (root / f"org/agents/{agent}/mistakes.yaml").write_text("entries: []\n")
    guidance = root / f"org/agents/{agent}/AGENTS.md"
    guidance.write_text("# Mine\n\n## Relevant Context Index\n<!-- managed: context-index -->\n"
                        "- stale: true\n\n## Notes\nkeep me\n")

    done = _refresh(client, root, agent, project_id=proj)
    assert (done["assignment_count"], done["project_id"], done["updated"]) == (3, proj, True)
    memory = f"- project_memory: `work/projects/{proj}/memory.md`"
    lines = [*_head(agent), f"- mistakes_log: `org/agents/{agent}/mistakes.yaml`",
             f"- assigned_task: `{new}`", memory, "- task_scope_path: `c.py` (task: `task_B`)",
             f"- assigned_task: `{tie}`",
             f"- assigned_task: `{old}`", "- task_scope_repo_id: `repo1` (task: `task_A`)",
             "- task_scope_workdir: `svc` (task: `task_A`)",
             "- task_scope_path: `a.py` (task: `task_A`)",
             "- task_scope_path: `b.py` (task: `task_A`)"]
    assert done["reference_count"] == len(lines)
    assert guidance.read_text() == (
        "# Mine\n\n## Relevant Context Index\n<!-- managed: context-index -->\n"
        + "".join(f"{line}\n" for line in lines) + "## Notes\nkeep me\n")

    limited = _refresh(client, root, agent, max_tasks=1)
    assert limited["assignment_count"] == 1 and "project_id" not in limited
    text = guidance.read_text()
    assert f"`{new}`" in text and f"`{tie}`" not in text and f"`{old}`" not in text

    # the scope limit stops the listing (as the original: later tasks are left out)
    truncated = _refresh(client, root, agent, max_scope_paths=1)
    text = guidance.read_text()
    assert truncated["assignment_count"] == 3
    assert "- task_scope_path: `c.py` (task: `task_B`)\n" \
        "- task_scope_paths_truncated: true (max_scope_paths=1)\n## Notes" in text
    assert f"`{old}`" not in text
    (root / f"work/projects/{proj}/tasks/task_bad.md").unlink()  # (skipped, but invalid)
    assert_valid(root)


@pytest.mark.parametrize(("change", "code", "message"), [
    ({"agent_id": "agent_nobody"}, -32000, "Agent not found: agent_nobody"),
    ({"agent_id": "../../etc"}, -32000, "agent_id must be a name, not a path"),
    ({"project_id": "proj_none"}, -32000, "Unknown project: proj_none"),
    ({"max_tasks": 201}, -32602, "Invalid params"),
    ({"max_scope_paths": 0}, -32602, "Invalid params"),
])
def test_refresh_context_refuses(client: Client, workspace: Workspace, change: dict[str, Any],
                                 code: int, message: str) -> None:
    root, ids = workspace
    with pytest.raises(RpcFailure) as failed:
        client.call("agent.refresh_context", {"workspace_dir": str(root),
                                              "agent_id": ids["agent"], **change})
    assert failed.value.code == code
    assert failed.value.error["message"].startswith(message)
    assert not (root / "org/agents" / ids["agent"] / "AGENTS.md").exists()

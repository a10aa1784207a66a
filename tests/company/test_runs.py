"""`run.create`, `run.list` and `run.replay`: the files and the event the original writes,
its result shapes, and bad ids."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from ralph.company.events import append_event, envelope
from ralph.company.files import read_yaml
from ralph.company.ids import is_id
from ralph.company.workspace import validate_workspace
from tests.company.conftest import Client, RpcFailure

KEYS = ["schema_version", "ts_wallclock", "run_id", "session_ref", "actor", "visibility",
        "type", "payload", "ts_monotonic_ms"]


def test_create_writes_the_run_its_context_pack_and_run_started(
        client: Client, workspace: tuple[Path, dict[str, str]]) -> None:
    root, ids = workspace
    made = client.call("run.create", {"workspace_dir": str(root), "project_id": ids["proj"],
                                      "agent_id": ids["agent"], "provider": "claude"})
    assert list(made) == ["run_id", "context_pack_id", "run_dir"]
    assert is_id(made["run_id"], "run") and is_id(made["context_pack_id"], "ctx")
    run = Path(made["run_dir"])
    assert run == root / "work/projects" / ids["proj"] / "runs" / made["run_id"]
    assert (run / "outputs").is_dir()
    assert read_yaml(run / "run.yaml") == {
        "schema_version": 1, "type": "run", "id": made["run_id"], "project_id": ids["proj"],
        "agent_id": ids["agent"], "provider": "claude",
        "created_at": read_yaml(run / "run.yaml")["created_at"], "status": "running",
        "context_pack_id": made["context_pack_id"],
        "events_relpath": f"runs/{made['run_id']}/events.jsonl"}
    lines = (run / "events.jsonl").read_bytes().splitlines()
    assert len(lines) == 1
    event = orjson.loads(lines[0])
    assert list(event) == KEYS
    assert event["type"] == "run.started" and event["actor"] == "system"
    assert event["visibility"] == "org" and event["session_ref"] == f"local_{made['run_id']}"
    assert event["payload"] == {"project_id": ids["proj"], "agent_id": ids["agent"],
                                "provider": "claude",
                                "context_pack_id": made["context_pack_id"]}
    assert validate_workspace(root) == []  # the context pack and the run are well formed

    listed = client.call("run.list", {"workspace_dir": str(root)})
    assert [r["run_id"] for r in listed] == [made["run_id"], ids["run"]]  # newest first
    assert listed[0] == {"project_id": ids["proj"], "run_id": made["run_id"],
                         "created_at": event["ts_wallclock"], "status": "running",
                         "provider": "claude", "agent_id": ids["agent"]}
    assert client.call("run.list", {"workspace_dir": str(root),
                                    "project_id": "proj_none"}) == []


def test_replay_gives_events_the_last_tail_and_bad_lines(
        client: Client, workspace: tuple[Path, dict[str, str]]) -> None:
    root, ids = workspace
    events = root / "work/projects" / ids["proj"] / "runs" / ids["run"] / "events.jsonl"
    for n in range(3):
        append_event(events, envelope(ids["run"], "note", {"n": n}))
    with events.open("ab") as handle:
        handle.write(b"\n  \n{not json\n")
    append_event(events, envelope(ids["run"], "note", {"n": 3}))
    with events.open("ab") as handle:
        handle.write(b'{"torn":')  # a writer died mid-line
    append_event(events, envelope(ids["run"], "note", {"n": 4}))  # closes the torn line first
    params = {"workspace_dir": str(root), "project_id": ids["proj"], "run_id": ids["run"]}
    replay = client.call("run.replay", params)
    assert [e["payload"]["n"] for e in replay["events"]] == [0, 1, 2, 3, 4]
    assert [issue["raw"] for issue in replay["parse_issues"]] == ["{not json", '{"torn":']
    assert all(issue["ok"] is False and issue["error"] for issue in replay["parse_issues"])
    tail = client.call("run.replay", {**params, "tail": 2})
    assert [e["payload"]["n"] for e in tail["events"]] == [3, 4]


@pytest.mark.parametrize(("method", "extra", "message"), [
    ("run.create", {"project_id": "proj_none", "agent_id": "a", "provider": "p"},
     "Unknown project: proj_none"),
    ("run.create", {"project_id": "../../etc", "agent_id": "a", "provider": "p"},
     "project_id must be a name, not a path: '../../etc'"),
    ("run.create", {"project_id": "PROJ", "agent_id": "agent_none", "provider": "p"},
     "Unknown agent: agent_none"),
    ("run.replay", {"project_id": "PROJ", "run_id": "run_none"},
     "Unknown run: run_none (project PROJ)"),
    ("run.replay", {"project_id": "PROJ", "run_id": ".."},
     "run_id must be a name, not a path: '..'"),
])
def test_unknown_ids_and_paths_are_refused(client: Client, workspace: tuple[Path, dict[str, str]],
                                           method: str, extra: dict[str, str],
                                           message: str) -> None:
    root, ids = workspace
    params = {"workspace_dir": str(root),
              **{k: ids["proj"] if v == "PROJ" else v for k, v in extra.items()}}
    with pytest.raises(RpcFailure) as failure:
        client.call(method, params)
    assert failure.value.code == -32000
    assert failure.value.error["message"] == message.replace("PROJ", ids["proj"])
    assert failure.value.data["workspace_dir"] == str(root)


def test_a_directory_that_is_not_a_workspace_is_refused(client: Client, tmp_path: Path) -> None:
    with pytest.raises(RpcFailure) as failure:
        client.call("run.list", {"workspace_dir": str(tmp_path)})
    assert failure.value.code == -32000
    assert "Not an AgentCompany workspace" in failure.value.error["message"]
    with pytest.raises(RpcFailure) as bad:
        client.call("run.replay", {"workspace_dir": str(tmp_path), "project_id": "p",
                                   "run_id": "r", "tail": 0})
    assert bad.value.code == -32602 and [p["loc"] for p in bad.value.data] == [["tail"]]

"""`monitor.snapshot`, `inbox.snapshot`, `ui.snapshot`: the index policy (rebuild when asked
or missing, else sync unless told not to), result shapes, and the monitor's join of indexed
runs with live sessions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ralph.company.index import sync_index
from ralph.company.snapshots import monitor_snapshot
from tests.company.conftest import Client, RpcFailure
from tests.company.test_index import TS, add_run, append, events_of, line

Workspace = tuple[Path, dict[str, str]]
FLAGS = ("index_rebuilt", "index_synced")


def session(project_id: str, run_id: str, status: str = "running", **extra: Any
            ) -> dict[str, Any]:
    """A session.list row."""
    return {"session_ref": f"local_{run_id}", "project_id": project_id, "run_id": run_id,
            "status": status, "exit_code": None, "signal": None, "workspace_dir": "/w",
            "started_at_ms": 1000, **extra}


def test_index_policy(client: Client, workspace: Workspace) -> None:
    root, _ = workspace
    ws = str(root)
    for method in ("monitor.snapshot", "inbox.snapshot"):
        (root / ".local/index.sqlite").unlink(missing_ok=True)
        answers = [client.call(method, {"workspace_dir": ws, **extra})
                   for extra in ({}, {}, {"sync_index": False}, {"refresh_index": True},
                                 {"refresh_index": True, "sync_index": False})]
        flags = [(answer["index_rebuilt"], answer["index_synced"]) for answer in answers]
        assert flags == [(True, False), (False, True), (False, False), (True, False),
                         (True, False)]
    with pytest.raises(RpcFailure) as failure:
        client.call("monitor.snapshot", {"workspace_dir": ws, "limit": 5001})
    assert failure.value.code == -32602


def test_monitor_rows_of_indexed_runs(client: Client, workspace: Workspace) -> None:
    root, ids = workspace
    append(events_of(workspace), line(ids["run"], 1) + b"bad\n" + line(ids["run"], 3,
                                                                        "run.ended"))
    add_run(root, ids["proj"], "run_quiet", created_at="2026-03-01T00:00:00.000Z")
    result = client.call("monitor.snapshot", {"workspace_dir": str(root)})
    assert set(result) == {"workspace_dir", "generated_at", *FLAGS, "rows"}
    assert result["workspace_dir"] == str(root)
    quiet, mine = result["rows"]
    assert quiet == {"project_id": ids["proj"], "run_id": "run_quiet",
                     "created_at": "2026-03-01T00:00:00.000Z", "run_status": "running",
                     "provider": "codex", "agent_id": "agent_a", "context_pack_id": "ctx_a",
                     "parse_error_count": 0}
    assert mine["last_event"] == {"seq": 3, "type": "run.ended",
                                  "ts_wallclock": "2026-02-10T21:00:03.000Z",
                                  "actor": "system", "visibility": "org"}
    assert mine["parse_error_count"] == 1
    assert client.call("monitor.snapshot", {"workspace_dir": str(root),
                                            "project_id": "nope"})["rows"] == []


def test_monitor_joins_live_sessions(workspace: Workspace) -> None:
    root, ids = workspace
    pid = ids["proj"]
    add_run(root, pid, "run_new", created_at="2026-05-01T00:00:00.000Z")
    add_run(root, pid, "run_b", created_at="2026-04-01T00:00:00.000Z")
    add_run(root, pid, "run_a", created_at="2026-04-01T00:00:00.000Z")
    sessions = [session(pid, "run_unindexed", "ended", exit_code=0, ended_at_ms=2000),
                session(pid, ids["run"], "running"),  # the oldest run, live
                session(pid, "run_new", "failed", exit_code=1, error="boom", ended_at_ms=3),
                session(pid, ids["run"], "ended"),  # an older session of the same run
                session("proj_other", "run_elsewhere")]
    result = monitor_snapshot(root, sessions, project_id=pid, limit=4)
    assert [row["run_id"] for row in result["rows"]] == [
        ids["run"], "run_new", "run_a", "run_b"]  # running, newest, then run id; limit 4
    live = result["rows"][0]
    assert (live["live_status"], live["session_ref"], live["live_exit_code"],
            live["live_signal"], live["session_started_at_ms"]) == (
        "running", f"local_{ids['run']}", None, None, 1000)
    assert "live_error" not in live and "session_ended_at_ms" not in live
    failed = result["rows"][1]
    assert (failed["live_error"], failed["session_ended_at_ms"], failed["run_status"]) == (
        "boom", 3, "running")
    assert "session_ref" not in result["rows"][2]
    everything = monitor_snapshot(root, sessions, sync_index=False)["rows"]
    unindexed = next(row for row in everything if row["run_id"] == "run_unindexed")
    assert unindexed == {"project_id": pid, "run_id": "run_unindexed", "run_status": "ended",
                         "session_ref": "local_run_unindexed", "live_status": "ended",
                         "live_exit_code": 0, "live_signal": None,
                         "session_started_at_ms": 1000, "session_ended_at_ms": 2000,
                         "parse_error_count": 0}
    assert [row["run_id"] for row in everything] == [
        ids["run"], "run_elsewhere", "run_new", "run_a", "run_b", "run_unindexed"]
    # A live run older than the newest `limit` runs is still shown (running first).
    assert [row["run_id"] for row in monitor_snapshot(root, sessions, limit=1)["rows"]] == [
        ids["run"]]


def test_monitor_face_takes_the_planes_sessions(client: Client, workspace: Workspace) -> None:
    root, ids = workspace
    asked: list[str] = []

    def rows(workspace_dir: str) -> list[dict[str, Any]]:
        asked.append(workspace_dir)
        return [session(ids["proj"], ids["run"])]

    client.plane.session_rows = rows
    result = client.call("monitor.snapshot", {"workspace_dir": str(root)})
    assert asked == [str(root)]
    assert result["rows"][0]["live_status"] == "running"


def test_inbox_snapshot(client: Client, workspace: Workspace) -> None:
    root, ids = workspace
    append(events_of(workspace), b"bad\n")
    result = client.call("inbox.snapshot", {"workspace_dir": str(root)})
    assert set(result) == {"workspace_dir", "generated_at", *FLAGS, "pending",
                           "recent_decisions"}
    # The delta has its review; the milestone report waits for one.
    assert result["pending"] == [{
        "project_id": ids["proj"], "artifact_id": ids["report"],
        "artifact_type": "milestone_report", "title": "T", "visibility": "team",
        "produced_by": ids["agent"], "run_id": ids["run"], "created_at": TS,
        "parse_error_count": 1}]
    assert result["recent_decisions"] == [{
        "review_id": ids["rev"], "created_at": TS, "decision": "approved",
        "actor_id": "human", "actor_role": "human", "subject_kind": "memory_delta",
        "subject_artifact_id": ids["delta"], "project_id": ids["proj"], "notes": "",
        "artifact_type": "memory_delta", "run_id": ids["run"], "parse_error_count": 1}]
    other = client.call("inbox.snapshot", {"workspace_dir": str(root), "project_id": "nope"})
    assert (other["pending"], other["recent_decisions"]) == ([], [])
    limited = client.call("inbox.snapshot", {"workspace_dir": str(root), "pending_limit": 1,
                                             "decisions_limit": 1})
    assert (len(limited["pending"]), len(limited["recent_decisions"])) == (1, 1)


def test_ui_snapshot_refreshes_once(client: Client, workspace: Workspace) -> None:
    root, ids = workspace
    result = client.call("ui.snapshot", {"workspace_dir": str(root), "monitor_limit": 1})
    assert set(result) == {"workspace_dir", "generated_at", "monitor", "review_inbox"}
    assert [result[part][flag] for part in ("monitor", "review_inbox") for flag in FLAGS] == [
        True, False, True, False]
    assert len(result["monitor"]["rows"]) == 1
    assert result["review_inbox"]["pending"][0]["artifact_id"] == ids["report"]
    append(events_of(workspace), line(ids["run"], 1))
    again = client.call("ui.snapshot", {"workspace_dir": str(root)})
    assert [again["review_inbox"][flag] for flag in FLAGS] == [False, True]
    assert again["monitor"]["rows"][0]["last_event"]["seq"] == 1
    assert sync_index(root)["events_indexed"] == 0  # the ui snapshot indexed it already

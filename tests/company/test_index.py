"""The AgentCompany index: `index.*` methods, the file's schema (AgentCompany's), incremental
sync (appends, torn tails, truncation, replaced and rewritten files, vanished sources), a file
AgentCompany wrote, a damaged file, concurrent syncs, and `recent_events`."""

from __future__ import annotations

import importlib.util
import io
import logging
import sqlite3
import sys
import threading
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import orjson
import pytest

from ralph.company.files import write_yaml
from ralph.company.index import recent_events, sync_index
from tests.company.conftest import Client, RpcFailure

TS = "2026-02-10T20:58:31.123Z"
Workspace = tuple[Path, dict[str, str]]


# -- helpers (shared with test_snapshots) ------------------------------------------------------

def add_run(root: Path, project_id: str, run_id: str, *, created_at: str = TS,
            status: str = "running") -> Path:
    """A run (run.yaml and an empty events file); its events file."""
    run = root / "work/projects" / project_id / "runs" / run_id
    write_yaml(run / "run.yaml", {
        "schema_version": 1, "type": "run", "id": run_id, "project_id": project_id,
        "agent_id": "agent_a", "provider": "codex", "created_at": created_at,
        "status": status, "context_pack_id": "ctx_a",
        "events_relpath": f"runs/{run_id}/events.jsonl"})
    events = run / "events.jsonl"
    events.touch()
    return events


def event(run_id: str, n: int, type_: str = "provider.raw") -> dict[str, Any]:
    return {"schema_version": 1, "ts_wallclock": f"2026-02-10T21:00:{n:02d}.000Z",
            "run_id": run_id, "session_ref": f"local_{run_id}", "actor": "system",
            "visibility": "org", "type": type_, "payload": {"n": n}, "ts_monotonic_ms": 1000 + n}


def line(run_id: str, n: int, type_: str = "provider.raw") -> bytes:
    return orjson.dumps(event(run_id, n, type_)) + b"\n"


def append(path: Path, data: bytes) -> None:
    with path.open("ab") as handle:
        handle.write(data)


def events_of(ws: Workspace) -> Path:
    root, ids = ws
    return root / "work/projects" / ids["proj"] / "runs" / ids["run"] / "events.jsonl"


def seqs(client: Client, root: Path, **params: Any) -> list[tuple[int, str]]:
    found = client.call("index.list_events", {"workspace_dir": str(root), "order": "asc",
                                              **params})
    return [(row["seq"], row["type"]) for row in found]


def errors(client: Client, root: Path) -> list[tuple[int, str]]:
    found = client.call("index.list_event_parse_errors", {"workspace_dir": str(root)})
    return sorted((row["seq"], row["raw_line"]) for row in found)


# -- readers need the file ----------------------------------------------------------------------

READERS = ("index.stats", "index.list_runs", "index.list_events",
           "index.list_event_parse_errors", "index.list_reviews", "index.list_help_requests")


@pytest.mark.parametrize("method", READERS)
def test_readers_without_the_file(client: Client, workspace: Workspace, method: str) -> None:
    root, _ = workspace
    with pytest.raises(RpcFailure) as failure:
        client.call(method, {"workspace_dir": str(root)})
    path = root / ".local/index.sqlite"
    assert failure.value.code == -32000
    assert failure.value.error["message"] == (
        f"Index database not found: {path}. Run index.rebuild first.")
    assert failure.value.data["db_path"] == str(path)
    assert not path.exists()  # a reader never makes it


# -- schema: AgentCompany's tables, columns, keys and indexes -----------------------------------

ORIGINAL_COLUMNS = {
    "runs": ["project_id", "run_id", "created_at", "status", "provider", "agent_id",
             "context_pack_id", "events_relpath"],
    "events": ["project_id", "run_id", "seq", "type", "ts_wallclock", "ts_monotonic_ms",
               "actor", "session_ref", "visibility", "payload_json", "raw_json"],
    "event_parse_errors": ["project_id", "run_id", "seq", "error", "raw_line"],
    "artifacts": ["project_id", "artifact_id", "type", "title", "visibility", "produced_by",
                  "run_id", "context_pack_id", "created_at", "relpath"],
    "reviews": ["review_id", "created_at", "decision", "actor_id", "actor_role",
                "subject_kind", "subject_artifact_id", "project_id", "notes"],
    "help_requests": ["help_request_id", "created_at", "title", "visibility", "requester",
                      "target_manager", "project_id", "share_pack_id"],
}
ORIGINAL_KEYS = {"runs": ["project_id", "run_id"], "events": ["project_id", "run_id", "seq"],
                 "event_parse_errors": ["project_id", "run_id", "seq"],
                 "artifacts": ["project_id", "artifact_id"], "reviews": ["review_id"],
                 "help_requests": ["help_request_id"]}
ORIGINAL_INDEXES = {"idx_runs_created_at", "idx_runs_status", "idx_events_type",
                    "idx_events_wallclock", "idx_artifacts_type", "idx_artifacts_created_at",
                    "idx_artifacts_run_id", "idx_reviews_created_at", "idx_reviews_project_id",
                    "idx_help_requests_created_at", "idx_help_requests_target"}


def test_rebuild_writes_the_original_schema(client: Client, workspace: Workspace) -> None:
    root, ids = workspace
    append(events_of(workspace), line(ids["run"], 1) + b"not json\n\n" + line(ids["run"], 2))
    result = client.call("index.rebuild", {"workspace_dir": str(root)})
    assert result == {"db_path": str(root / ".local/index.sqlite"), "runs_indexed": 1,
                      "events_indexed": 2, "event_parse_errors": 1, "artifacts_indexed": 2,
                      "reviews_indexed": 1, "help_requests_indexed": 1}
    with sqlite3.connect(root / ".local/index.sqlite") as db:
        for table, columns in ORIGINAL_COLUMNS.items():
            info = db.execute(f"PRAGMA table_info({table})").fetchall()
            assert [col[1] for col in info] == columns
            assert [col[1] for col in sorted(info, key=lambda c: c[5]) if col[5]] == \
                ORIGINAL_KEYS[table]
        names = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE "
                                              "type = 'index' AND sql IS NOT NULL")}
        assert names >= ORIGINAL_INDEXES
    assert client.call("index.stats", {"workspace_dir": str(root)}) == {
        "runs": 1, "events": 2, "event_parse_errors": 1, "artifacts": 2, "reviews": 1,
        "help_requests": 1}


def test_rows_as_the_original_fills_them(client: Client, workspace: Workspace) -> None:
    root, ids = workspace
    typeless = b'{"payload": [1, "\xc3\xa9"], "ts_monotonic_ms": 12.9, "actor": 5}\n'
    append(events_of(workspace), line(ids["run"], 1) + b"   \n" + typeless + b"[1, 2]\n"
           + b"{bad\n")
    client.call("index.sync", {"workspace_dir": str(root)})
    rows = client.call("index.list_events", {"workspace_dir": str(root), "order": "asc"})
    first = next(row for row in rows if row["seq"] == 1)
    assert first == {
        "project_id": ids["proj"], "run_id": ids["run"], "seq": 1, "type": "provider.raw",
        "ts_wallclock": "2026-02-10T21:00:01.000Z", "ts_monotonic_ms": 1001, "actor": "system",
        "session_ref": f"local_{ids['run']}", "visibility": "org", "payload_json": '{"n":1}',
        "raw_json": line(ids["run"], 1).decode().rstrip("\n")}
    by_seq = {row["seq"]: row for row in rows}
    assert set(by_seq) == {1, 2, 3}  # the blank line has no seq; line 4 is an error
    assert (by_seq[2]["type"], by_seq[2]["ts_monotonic_ms"], by_seq[2]["actor"],
            by_seq[2]["payload_json"]) == ("unknown", 12, None, '[1,"é"]')
    assert (by_seq[3]["type"], by_seq[3]["payload_json"]) == ("unknown", "null")
    assert errors(client, root) == [(4, "{bad")]


def test_list_readers_filters_order_and_limits(client: Client, workspace: Workspace) -> None:
    root, ids = workspace
    other = add_run(root, ids["proj"], "run_other", created_at="2026-03-01T00:00:00.000Z",
                    status="ended")
    append(events_of(workspace), b"".join(line(ids["run"], n) for n in range(1, 6)))
    append(other, line("run_other", 10, "run.started") + b"oops\n")
    ws = str(root)
    client.call("index.sync", {"workspace_dir": ws})
    assert [r["run_id"] for r in client.call("index.list_runs", {"workspace_dir": ws})] == [
        "run_other", ids["run"]]
    assert client.call("index.list_runs", {"workspace_dir": ws, "status": "ended",
                                           "limit": 1})[0]["run_id"] == "run_other"
    assert set(client.call("index.list_runs", {"workspace_dir": ws})[0]) == {
        "project_id", "run_id", "created_at", "status", "provider", "agent_id",
        "context_pack_id"}
    newest = client.call("index.list_events", {"workspace_dir": ws, "limit": 2})
    assert [(r["run_id"], r["seq"]) for r in newest] == [("run_other", 1), (ids["run"], 5)]
    assert seqs(client, root, run_id=ids["run"], since_seq=3) == [(4, "provider.raw"),
                                                                 (5, "provider.raw")]
    assert seqs(client, root, type="run.started") == [(1, "run.started")]
    assert client.call("index.list_events", {"workspace_dir": ws, "project_id": "nope"}) == []
    assert client.call("index.list_event_parse_errors",
                       {"workspace_dir": ws, "run_id": "run_other"})[0]["seq"] == 2
    assert client.call("index.list_reviews", {"workspace_dir": ws, "decision": "denied"}) == []
    assert client.call("index.list_reviews", {"workspace_dir": ws})[0]["review_id"] == ids["rev"]
    helps = client.call("index.list_help_requests", {"workspace_dir": ws,
                                                     "target_manager": "agent_x"})
    assert helps[0] == {"help_request_id": ids["help"], "created_at": TS, "title": "Stuck",
                        "visibility": "managers", "requester": ids["agent"],
                        "target_manager": "agent_x", "project_id": None, "share_pack_id": None}
    for bad in (0, 5001, "9"):
        with pytest.raises(RpcFailure) as failure:
            client.call("index.list_events", {"workspace_dir": ws, "limit": bad})
        assert failure.value.code == -32602
    with pytest.raises(RpcFailure):
        client.call("index.list_events", {"workspace_dir": ws, "order": "up"})
    assert len(client.call("index.list_events", {"workspace_dir": ws, "limit": 5000})) == 6


# -- incremental sync ---------------------------------------------------------------------------

def test_sync_creates_then_indexes_only_appends(client: Client, workspace: Workspace) -> None:
    root, ids = workspace
    ws = {"workspace_dir": str(root)}
    append(events_of(workspace), line(ids["run"], 1))
    first = client.call("index.sync", ws)
    assert first["db_created"] is True and first["events_indexed"] == 1
    assert set(first) == {"db_path", "db_created", "runs_upserted", "runs_deleted",
                          "events_indexed", "events_deleted", "event_parse_errors_indexed",
                          "event_parse_errors_deleted", "artifacts_upserted",
                          "artifacts_deleted", "reviews_upserted", "reviews_deleted",
                          "help_requests_upserted", "help_requests_deleted"}
    again = client.call("index.sync", ws)
    assert (again["db_created"], again["events_indexed"], again["runs_upserted"]) == (
        False, 0, 1)
    append(events_of(workspace), b"\n" + line(ids["run"], 2) + b"junk\n")
    after = client.call("index.sync", ws)
    assert (after["events_indexed"], after["event_parse_errors_indexed"]) == (1, 1)
    assert seqs(client, root) == [(1, "provider.raw"), (2, "provider.raw")]
    assert errors(client, root) == [(3, "junk")]


def test_torn_tail_waits_until_complete(client: Client, workspace: Workspace) -> None:
    root, ids = workspace
    ws = {"workspace_dir": str(root)}
    whole = line(ids["run"], 2)
    append(events_of(workspace), line(ids["run"], 1) + whole[:20])
    assert client.call("index.sync", ws)["events_indexed"] == 1
    assert errors(client, root) == []  # never a stale parse error
    append(events_of(workspace), whole[20:])
    result = client.call("index.sync", ws)
    assert (result["events_indexed"], result["event_parse_errors_indexed"]) == (1, 0)
    assert seqs(client, root) == [(1, "provider.raw"), (2, "provider.raw")]
    # A torn line a crashed writer left is closed by the next append: one bad line.
    append(events_of(workspace), b'{"cut')
    append(events_of(workspace), b"\n" + line(ids["run"], 4))
    client.call("index.sync", ws)
    assert errors(client, root) == [(3, '{"cut')]
    assert seqs(client, root)[-1] == (4, "provider.raw")


def test_truncated_replaced_and_rewritten_files(client: Client, workspace: Workspace) -> None:
    root, ids = workspace
    ws = {"workspace_dir": str(root)}
    path = events_of(workspace)
    append(path, b"".join(line(ids["run"], n) for n in range(1, 5)) + b"bad\n")
    client.call("index.sync", ws)
    with path.open("r+b") as handle:  # truncated in place, then one line appended
        handle.truncate(len(line(ids["run"], 1)))
    append(path, line(ids["run"], 9, "run.ended"))
    result = client.call("index.sync", ws)
    assert (result["events_deleted"], result["event_parse_errors_deleted"]) == (4, 1)
    assert seqs(client, root) == [(1, "provider.raw"), (2, "run.ended")]
    assert errors(client, root) == []
    replacement = path.with_name("new.jsonl")  # replaced (rename), longer than before
    replacement.write_bytes(b"".join(line(ids["run"], n, "x.y") for n in range(1, 5)))
    replacement.replace(path)
    client.call("index.sync", ws)
    assert seqs(client, root) == [(n, "x.y") for n in range(1, 5)]
    data = path.read_bytes()  # rewritten in place: same inode, same size
    path.write_bytes(data.replace(b'"x.y"', b'"z.w"'))
    client.call("index.sync", ws)
    assert seqs(client, root) == [(n, "z.w") for n in range(1, 5)]
    path.unlink()  # gone: its events are gone from the index, the run stays
    client.call("index.sync", ws)
    assert client.call("index.stats", ws)["events"] == 0
    assert client.call("index.stats", ws)["runs"] == 1


def test_vanished_and_invalid_sources_are_deleted(client: Client, workspace: Workspace) -> None:
    root, ids = workspace
    ws = {"workspace_dir": str(root)}
    append(events_of(workspace), line(ids["run"], 1) + b"bad\n")
    client.call("index.sync", ws)
    (root / f"inbox/reviews/{ids['rev']}.yaml").write_text("type: review\n")  # invalid now
    (root / f"inbox/help_requests/{ids['help']}.md").unlink()
    (root / f"work/projects/{ids['proj']}/artifacts/{ids['report']}.md").unlink()
    run = events_of(workspace).parent
    for name in ("run.yaml", "events.jsonl"):
        (run / name).unlink()
    run.rmdir()
    result = client.call("index.sync", ws)
    assert {key: result[key] for key in ("runs_deleted", "events_deleted",
                                         "event_parse_errors_deleted", "artifacts_deleted",
                                         "reviews_deleted", "help_requests_deleted",
                                         "artifacts_upserted")} == {
        "runs_deleted": 1, "events_deleted": 1, "event_parse_errors_deleted": 1,
        "artifacts_deleted": 1, "reviews_deleted": 1, "help_requests_deleted": 1,
        "artifacts_upserted": 1}
    assert client.call("index.stats", ws) == {"runs": 0, "events": 0, "event_parse_errors": 0,
                                              "artifacts": 1, "reviews": 0, "help_requests": 0}


def test_changed_source_rows_are_updated(client: Client, workspace: Workspace) -> None:
    root, ids = workspace
    ws = {"workspace_dir": str(root)}
    client.call("index.sync", ws)
    add_run(root, ids["proj"], ids["run"], status="failed")  # run.yaml rewritten
    client.call("index.sync", ws)
    assert client.call("index.list_runs", ws)[0]["status"] == "failed"


# -- a file AgentCompany wrote ------------------------------------------------------------------

ORIGINAL_DDL = """
CREATE TABLE runs (project_id TEXT NOT NULL, run_id TEXT NOT NULL, created_at TEXT NOT NULL,
  status TEXT NOT NULL, provider TEXT NOT NULL, agent_id TEXT NOT NULL,
  context_pack_id TEXT NOT NULL, events_relpath TEXT NOT NULL,
  PRIMARY KEY (project_id, run_id));
CREATE INDEX idx_runs_created_at ON runs(created_at DESC);
CREATE INDEX idx_runs_status ON runs(status);
CREATE TABLE events (project_id TEXT NOT NULL, run_id TEXT NOT NULL, seq INTEGER NOT NULL,
  type TEXT NOT NULL, ts_wallclock TEXT, ts_monotonic_ms INTEGER, actor TEXT,
  session_ref TEXT, visibility TEXT, payload_json TEXT NOT NULL, raw_json TEXT NOT NULL,
  PRIMARY KEY (project_id, run_id, seq));
CREATE INDEX idx_events_type ON events(type);
CREATE INDEX idx_events_wallclock ON events(ts_wallclock DESC);
CREATE TABLE event_parse_errors (project_id TEXT NOT NULL, run_id TEXT NOT NULL,
  seq INTEGER NOT NULL, error TEXT NOT NULL, raw_line TEXT NOT NULL,
  PRIMARY KEY (project_id, run_id, seq));
CREATE TABLE artifacts (project_id TEXT NOT NULL, artifact_id TEXT NOT NULL,
  type TEXT NOT NULL, title TEXT, visibility TEXT, produced_by TEXT, run_id TEXT,
  context_pack_id TEXT, created_at TEXT, relpath TEXT NOT NULL,
  PRIMARY KEY (project_id, artifact_id));
CREATE TABLE reviews (review_id TEXT PRIMARY KEY, created_at TEXT NOT NULL,
  decision TEXT NOT NULL, actor_id TEXT NOT NULL, actor_role TEXT NOT NULL,
  subject_kind TEXT NOT NULL, subject_artifact_id TEXT NOT NULL, project_id TEXT NOT NULL,
  notes TEXT);
CREATE TABLE help_requests (help_request_id TEXT PRIMARY KEY, created_at TEXT NOT NULL,
  title TEXT NOT NULL, visibility TEXT NOT NULL, requester TEXT NOT NULL,
  target_manager TEXT NOT NULL, project_id TEXT, share_pack_id TEXT);
"""


def _original_index(root: Path, ids: dict[str, str], lines: list[bytes], *,
                    torn_error: bytes | None) -> None:
    """The index AgentCompany's sync writes for `lines` (and a half-written last line it
    indexed as a parse error), plus a run row for a run that no longer exists."""
    with sqlite3.connect(root / ".local/index.sqlite") as db:
        db.executescript(ORIGINAL_DDL)
        for pid, rid in ((ids["proj"], ids["run"]), (ids["proj"], "run_gone")):
            db.execute("INSERT INTO runs VALUES (?, ?, ?, 'running', 'codex', 'a', 'c', ?)",
                       (pid, rid, TS, f"runs/{rid}/events.jsonl"))
        for seq, raw in enumerate(lines, 1):
            value = orjson.loads(raw)
            db.execute("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (ids["proj"], ids["run"], seq, value["type"], value["ts_wallclock"],
                        value["ts_monotonic_ms"], value["actor"], value["session_ref"],
                        value["visibility"], orjson.dumps(value["payload"]).decode(),
                        raw.decode().rstrip("\n")))
        if torn_error is not None:
            db.execute("INSERT INTO event_parse_errors VALUES (?, ?, ?, ?, ?)",
                       (ids["proj"], ids["run"], len(lines) + 1, "Unexpected end of JSON input",
                        torn_error.decode()))


def test_sync_of_a_file_the_original_wrote(client: Client, workspace: Workspace) -> None:
    root, ids = workspace
    ws = {"workspace_dir": str(root)}
    first = [line(ids["run"], 1), line(ids["run"], 2)]
    third = line(ids["run"], 3)
    append(events_of(workspace), b"".join(first) + third[:15])
    _original_index(root, ids, first, torn_error=third[:15])
    append(events_of(workspace), third[15:] + line(ids["run"], 4))
    result = client.call("index.sync", ws)
    assert result["db_created"] is False
    assert (result["runs_deleted"], result["events_indexed"]) == (1, 2)
    assert result["event_parse_errors_deleted"] == 1  # the stale half-line error is redone
    assert seqs(client, root) == [(n, "provider.raw") for n in range(1, 5)]
    assert errors(client, root) == []
    assert client.call("index.stats", ws)["runs"] == 1
    append(events_of(workspace), line(ids["run"], 5))  # and incrementally from then on
    assert client.call("index.sync", ws)["events_indexed"] == 1


def test_original_file_of_a_truncated_log_restarts_the_run(client: Client,
                                                           workspace: Workspace) -> None:
    root, ids = workspace
    lines = [line(ids["run"], n) for n in range(1, 5)]
    _original_index(root, ids, lines, torn_error=None)
    append(events_of(workspace), line(ids["run"], 7, "run.ended"))  # one line: truncated
    result = client.call("index.sync", {"workspace_dir": str(root)})
    assert (result["events_deleted"], result["events_indexed"]) == (4, 1)
    assert seqs(client, root) == [(1, "run.ended")]


# -- damaged file, concurrency --------------------------------------------------------------------

def test_a_damaged_index_is_made_anew(client: Client, workspace: Workspace,
                                      caplog: pytest.LogCaptureFixture) -> None:
    root, ids = workspace
    append(events_of(workspace), line(ids["run"], 1))
    path = root / ".local/index.sqlite"
    path.write_bytes(b"this is not a database, it is a note" * 200)
    with caplog.at_level(logging.WARNING, logger="ralph.company.index"):
        stats = client.call("index.stats", {"workspace_dir": str(root)})  # a reader
    assert stats["events"] == 1
    assert "not a usable database" in caplog.text or "damaged" in caplog.text
    path.write_bytes(b"\x00garbage" * 100)
    result = client.call("index.sync", {"workspace_dir": str(root)})  # a writer
    assert (result["db_created"], result["events_indexed"]) == (True, 1)


def test_concurrent_syncs_index_each_line_once(workspace: Workspace) -> None:
    root, ids = workspace
    append(events_of(workspace), b"".join(line(ids["run"], n) for n in range(1, 301)))
    results: list[dict[str, Any]] = []
    failures: list[BaseException] = []

    def run() -> None:
        try:
            results.append(sync_index(root))
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert sum(r["events_indexed"] for r in results) == 300
    assert sum(r["db_created"] for r in results) == 1
    with sqlite3.connect(root / ".local/index.sqlite") as db:
        assert db.execute("SELECT COUNT(*), COUNT(DISTINCT seq) FROM events").fetchone() == (
            300, 300)


def test_not_a_workspace(client: Client, tmp_path: Path) -> None:
    with pytest.raises(RpcFailure) as failure:
        client.call("index.sync", {"workspace_dir": str(tmp_path)})
    assert failure.value.code == -32000
    assert not (tmp_path / ".local").exists()


# -- recent_events (subscription backfill) ---------------------------------------------------------

def test_recent_events_are_the_newest_matches_ascending(workspace: Workspace) -> None:
    root, ids = workspace
    other = add_run(root, ids["proj"], "run_b")
    append(events_of(workspace), b"".join(
        line(ids["run"], n, "run.started" if n % 5 == 0 else "provider.raw")
        for n in range(1, 21)))
    append(other, line("run_b", 30, "run.started") + b"garbage\n")
    found = recent_events(root, event_types=["run.started"], limit=3)  # syncs first
    assert [(r["run_id"], r["seq"]) for r in found] == [
        (ids["run"], 15), (ids["run"], 20), ("run_b", 1)]
    assert found[0]["event"] == event(ids["run"], 15, "run.started")
    assert found[0]["project_id"] == ids["proj"]
    mine = recent_events(root, run_id=ids["run"], limit=2)
    assert [r["seq"] for r in mine] == [19, 20]
    assert recent_events(root, project_id="nope", limit=5) == []
    assert recent_events(root, event_types=[], limit=5) == []


def test_bench_quick_mode_runs() -> None:
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "company_bench.py"
    spec = importlib.util.spec_from_file_location("company_bench", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules["company_bench"] = bench  # (its dataclasses look their module up)
    try:
        spec.loader.exec_module(bench)
        out = io.StringIO()
        with redirect_stdout(out):
            assert bench.main(["--quick"]) == 0
    finally:
        del sys.modules["company_bench"]
    table = out.getvalue()
    assert "| first index.sync (1,000 events) |" in table
    assert "monitor.snapshot (with its sync), p50" in table


def test_rows_another_writer_deleted_are_indexed_again(client: Client,
                                                      workspace: Workspace) -> None:
    """AgentCompany's own sync does not know Ralph's cursors: rows it deleted (a run it
    thought gone) come back at the next sync, though the file did not change."""
    root, ids = workspace
    path = events_of(workspace)
    append(path, line(ids["run"], 1) + line(ids["run"], 2))
    client.call("index.sync", {"workspace_dir": str(root)})
    with sqlite3.connect(root / ".local/index.sqlite") as conn:
        conn.execute("DELETE FROM events")
    client.call("index.sync", {"workspace_dir": str(root)})
    assert seqs(client, root) == [(1, "provider.raw"), (2, "provider.raw")]


def test_lines_javascript_reads_are_events(client: Client, workspace: Workspace) -> None:
    """JSON.parse takes a lone surrogate escape and 1e400; so does the index (orjson alone
    would call them parse errors)."""
    root, ids = workspace
    odd = dict(event(ids["run"], 1, "odd"), payload={"text": "\\ud800", "big": 1})
    raw = orjson.dumps(odd).replace(b'"\\\\ud800"', b'"\\ud800"').replace(b'"big":1',
                                                                       b'"big":1e400')
    append(events_of(workspace), raw + b"\n")
    client.call("index.rebuild", {"workspace_dir": str(root)})
    assert seqs(client, root) == [(1, "odd")] and errors(client, root) == []
    row = client.call("index.list_events", {"workspace_dir": str(root)})[0]
    assert orjson.loads(row["payload_json"]) == {"text": "\ufffd", "big": None}
    assert row["raw_json"] == raw.decode()


def test_a_busy_index_is_an_application_error(client: Client, workspace: Workspace,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    root, _ids = workspace
    client.call("index.rebuild", {"workspace_dir": str(root)})
    monkeypatch.setattr("ralph.company.index_db.BUSY_TIMEOUT_S", 0.05)
    holder = sqlite3.connect(root / ".local/index.sqlite", isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        with pytest.raises(RpcFailure) as failure:
            client.call("index.sync", {"workspace_dir": str(root)})
    finally:
        holder.close()
    assert failure.value.code == -32000
    assert failure.value.error["message"].startswith("Index database error: ")
    assert failure.value.data == {"workspace_dir": str(root)}

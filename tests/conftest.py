"""Shared fixtures: a store in a temp dir, and a check that no test leaves a process behind."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ralph.store import FileStore
from ralph.testing.pgserver import PostgresServer, create_database


def _children(pid: int) -> set[int]:
    """Live (non-zombie) direct children of `pid`, from /proc."""
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        state, ppid = fields[0], int(fields[1])
        if ppid == pid and state != "Z":
            found.add(int(entry))
    return found


@pytest.fixture(autouse=True)
def no_leaked_children() -> Iterator[None]:
    """Every test must stop every process it started."""
    before = _children(os.getpid())
    yield
    deadline = time.monotonic() + 5
    leaked = _children(os.getpid()) - before
    while leaked and time.monotonic() < deadline:
        time.sleep(0.05)
        leaked = _children(os.getpid()) - before
    assert not leaked, f"test left child processes running: {sorted(leaked)}"


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def store(store_dir: Path) -> Iterator[FileStore]:
    with FileStore(store_dir) as opened:
        yield opened


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A real PostgreSQL server for the session (each xdist worker has its own)."""
    with PostgresServer() as server:
        yield server


@pytest.fixture
def pg_url(postgres_server: PostgresServer) -> str:
    """A fresh, empty database on the session's server."""
    return create_database(postgres_server.url, f"t_{uuid.uuid4().hex[:16]}")


@pytest.fixture(params=["file", "postgresql"])
def store_location(request: pytest.FixtureRequest, tmp_path: Path,
                   postgres_server: PostgresServer) -> str:
    """Where a store of each backend is: the tests that take it run against both."""
    if request.param == "file":
        return str(tmp_path / "store")
    return create_database(postgres_server.url, f"t_{uuid.uuid4().hex[:16]}")

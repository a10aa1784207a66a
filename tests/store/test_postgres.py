"""What only the PostgreSQL store has: a server that restarts under it, connections that
cannot be made, the schema created by several processes at once, rules kept in the database.

The shared contract (append, read, subscribe, gc, copy, the CLI verbs) is in test_backends.py.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from ralph.store import Frame, Rule, Store, StoreError
from ralph.store.location import masked_url
from ralph.store.postgres import PostgresStore
from ralph.testing.pgserver import PostgresServer, create_database, free_port
from tests.store.helpers import start_python


@pytest.fixture
def own_server() -> Iterator[PostgresServer]:
    """A server of the test's own, which it restarts and kills."""
    with PostgresServer() as server:
        yield server


@pytest.fixture
def own_url(own_server: PostgresServer) -> str:
    return create_database(own_server.url, f"t_{uuid.uuid4().hex[:16]}")


def test_a_restarted_server_loses_no_append_and_subscribers_resume(
        own_server: PostgresServer, own_url: str) -> None:
    """Writers in three threads and a live subscriber, while the server restarts twice:
    every append returns once, the seqs stay gapless, the subscriber sees every frame."""
    per_writer = 120
    errors: list[BaseException] = []
    appended: list[Frame] = []
    lock = threading.Lock()

    def write(store: Store, name: str) -> None:
        try:
            for i in range(per_writer):
                frame = store.append("ralph.load", {"writer": name, "i": i})
                with lock:
                    appended.append(frame)
                time.sleep(0.005)
        except BaseException as exc:  # reported below
            errors.append(exc)

    async def run() -> list[Frame]:
        seen: list[Frame] = []
        with Store(own_url) as reader:
            async with reader.subscribe(topic="ralph.*") as frames:
                stores = [Store(own_url) for _ in range(3)]
                threads = [threading.Thread(target=write, args=(s, f"w{n}"))
                           for n, s in enumerate(stores)]
                for thread in threads:
                    thread.start()

                def faults() -> None:
                    time.sleep(0.4)
                    own_server.restart()
                    time.sleep(0.4)
                    own_server.kill()  # a crash, not a clean stop
                    own_server.start()

                fault = threading.Thread(target=faults)
                fault.start()
                async for frame in frames:
                    seen.append(frame)
                    if len(seen) == 3 * per_writer:
                        break
                fault.join()
                for thread in threads:
                    thread.join()
                for store in stores:
                    store.close()
        return seen

    seen = asyncio.run(asyncio.wait_for(run(), 180))
    assert not errors, errors
    assert len(appended) == 3 * per_writer
    with Store(own_url) as check:
        frames = list(check.read())
    assert [f.seq for f in frames] == list(range(1, 3 * per_writer + 1))
    assert sorted(f.seq for f in appended) == [f.seq for f in frames]
    for name in ("w0", "w1", "w2"):
        assert [f.meta["i"] for f in frames if f.meta["writer"] == name] == list(
            range(per_writer))
    assert [f.seq for f in seen] == [f.seq for f in frames]


def test_an_unreachable_server_is_one_clear_error() -> None:
    """Never reached: said at once (a typo is not a blip to wait out for 30 s)."""
    url = f"postgresql://ralph:s3cret@127.0.0.1:{free_port()}/ralph"
    with pytest.raises(StoreError) as caught:
        PostgresStore(url)
    message = str(caught.value)
    assert message.startswith("cannot open the store at postgresql://ralph:***@127.0.0.1:")
    assert "s3cret" not in message and "\n" not in message


def test_a_missing_database_or_role_is_said_at_once(pg_url: str) -> None:
    base = pg_url.rsplit("/", 1)[0]
    for url, words in ((base + "/no_such_db", "no_such_db"),
                       (pg_url.replace("postgres@", "nobody_here@"), "nobody_here")):
        with pytest.raises(StoreError, match=words) as caught:
            Store(url)
        assert str(caught.value).startswith("cannot open the store at")


def test_notes_list_reads_a_database_store(pg_url: str) -> None:
    """`ralph notes list` (answered without Typer) takes a URL for --store too."""
    with Store(pg_url) as store:
        store.append("ralph.demo.note", {"type": "learning"}, content="pg notes",
                     stream="sessions/demo")
    result = subprocess.run([sys.executable, "-m", "ralph", "notes", "list", "--json",
                             "--store", pg_url], capture_output=True, text=True, timeout=60,
                            check=False, stdin=subprocess.DEVNULL, start_new_session=True)
    assert result.returncode == 0, result.stderr
    assert [note["text"] for note in json.loads(result.stdout)] == ["pg notes"]


def test_a_password_is_never_shown(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS writer")
        conn.execute("CREATE ROLE writer LOGIN PASSWORD 'hunter2' SUPERUSER")
    url = pg_url.replace("postgres@", "writer:hunter2@")
    with Store(url) as store:
        store.append("t")
        assert "hunter2" not in str(store.stats())
        assert store.display_location == masked_url(url) and "***" in store.display_location
        assert store.location == url  # what an agent or worker is given to open it


def test_several_processes_create_the_schema_at_once(pg_url: str) -> None:
    code = """
        import sys
        from ralph.store import Store
        with Store(sys.argv[1]) as store:
            for i in range(20):
                store.append("t", {"w": sys.argv[2], "i": i})
    """
    children = [start_python(code, pg_url, str(n)) for n in range(6)]
    for child in children:
        _out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
    with Store(pg_url) as store:
        assert [f.seq for f in store.read()] == list(range(1, 121))


def test_retention_rules_kept_in_the_database(pg_url: str) -> None:
    with PostgresStore(pg_url) as store:
        for i in range(6):
            store.append("agent.output", {"i": i})
        store.set_retention("agent.*", "last:2")
        assert store.retention_rules() == [Rule.parse("agent.*=last:2")]
        assert store.gc().frames_removed == 4
        store.set_retention("agent.*", None)
        assert store.retention_rules() == []
        # A rule given to gc wins over a kept one for the same topic.
        store.set_retention("agent.output", "last:0")
        assert store.gc([Rule.parse("agent.output=last:1")]).frames_removed == 1


def test_an_append_that_fails_takes_no_seq(pg_url: str) -> None:
    """A failed transaction rolls its seq back: the next append is still gapless."""
    with PostgresStore(pg_url) as store:
        store.append("t")
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("ALTER TABLE ralph_frames ADD CONSTRAINT no_bad CHECK (topic <> 'bad')")
        with pytest.raises(Exception, match="no_bad"):
            store.append("bad")
        assert store.append("t").seq == 2

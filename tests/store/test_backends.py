"""The Store contract, run against both backends: the file store and PostgreSQL.

Every test here takes `store_location` (tests/conftest.py), which is parametrized: once a
directory, once a fresh PostgreSQL database. What only one backend has (stream files, torn
tails, LISTEN/NOTIFY and server restarts) is tested in that backend's own files.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ralph.store import (
    ContentNotFoundError,
    Draft,
    Frame,
    FrameNotFoundError,
    InvalidHashError,
    InvalidMetaError,
    InvalidQueryError,
    InvalidStreamError,
    InvalidTopicError,
    Rule,
    Store,
    StoreError,
)
from ralph.store.copy import copy_store
from ralph.store.location import is_database_url
from tests.store.helpers import start_python


@pytest.fixture
def opened(store_location: str) -> Iterator[Store]:
    with Store(store_location) as store:
        yield store


def test_the_location_picks_the_backend(opened: Store, store_location: str) -> None:
    expected = "PostgresStore" if is_database_url(store_location) else "FileStore"
    assert type(opened).__name__ == expected
    assert isinstance(opened, Store)
    assert opened.location == store_location


def test_append_returns_the_stored_frame(opened: Store) -> None:
    frame = opened.append("ralph.demo.note", {"type": "learning", "n": [1, 2]},
                          content="hello", stream="sessions/demo")
    assert frame.seq == 1 and len(frame.id) == 25 and frame.ts.endswith("Z")
    assert frame.topic == "ralph.demo.note" and frame.stream == "sessions/demo"
    assert frame.meta == {"type": "learning", "n": [1, 2]}
    assert frame.hash is not None and frame.hash.startswith("sha256-")
    assert opened.get(frame.id) == frame
    assert opened.cas_get(frame.hash) == b"hello"
    assert list(opened.read()) == [frame]
    assert opened.append("t").hash is None


def test_meta_keeps_its_key_order_and_unicode(opened: Store) -> None:
    meta = {"z": 1, "a": {"y": "ünïcödé ✓", "b": None}, "m": 1.5}
    frame = opened.append("t", meta)
    read = opened.get(frame.id)
    assert list(read.meta) == ["z", "a", "m"] and read.meta == meta
    assert json.dumps(read.meta) == json.dumps(meta)


def test_seq_is_gapless_and_ids_sort_by_time(opened: Store) -> None:
    frames = [opened.append("t", {"i": i}, stream=f"s{i % 3}") for i in range(50)]
    assert [f.seq for f in frames] == list(range(1, 51))
    assert [f.id for f in frames] == sorted(f.id for f in frames)
    assert [f.seq for f in opened.read()] == list(range(1, 51))
    assert opened.last_seq == 50


def test_append_many_takes_consecutive_seqs(opened: Store) -> None:
    opened.append("before")
    frames = opened.append_many([Draft("batch", {"i": i}, content=f"c{i % 2}",
                                       stream=f"s{i % 2}") for i in range(10)])
    assert [f.seq for f in frames] == list(range(2, 12))
    assert [opened.cas_get(f.hash) for f in frames if f.hash] == [b"c0", b"c1"] * 5
    assert opened.read(topic="batch") is not None
    assert list(opened.read(topic="batch")) == frames
    assert opened.append_many([]) == []
    assert opened.stats()["content_objects"] == 2


def test_read_filters(opened: Store) -> None:
    opened.append("ralph.auth.note", stream="a")
    opened.append("ralph.auth.iteration", stream="b")
    opened.append("ralph.authx.note", stream="a")
    opened.append("other", stream="b")
    opened.append("ralph.auth.note", stream="b")

    def seqs(**kwargs: object) -> list[int]:
        return [f.seq for f in opened.read(**kwargs)]  # type: ignore[arg-type]

    assert seqs() == [1, 2, 3, 4, 5]
    assert seqs(topic="ralph.auth.note") == [1, 5]
    assert seqs(topic="ralph.auth.*") == [1, 2, 5]
    assert seqs(topic="ralph.*") == [1, 2, 3, 5]
    assert seqs(topic="*") == [1, 2, 3, 4, 5]
    assert seqs(stream="b") == [2, 4, 5]
    assert seqs(topic="ralph.auth.*", stream="b") == [2, 5]
    assert seqs(after_seq=2) == [3, 4, 5]
    assert seqs(limit=2) == [1, 2]
    assert seqs(after_seq=1, limit=0) == []
    assert seqs(stream="nonexistent") == []
    assert [f.seq for f in opened.last("ralph.auth.*", 2)] == [2, 5]
    assert [f.seq for f in opened.last("other")] == [4]


def test_read_by_time(opened: Store) -> None:
    first = opened.append("t")
    time.sleep(0.01)
    second = opened.append("t")
    since = datetime.fromisoformat(second.ts.replace("Z", "+00:00"))
    assert [f.seq for f in opened.read(since=since)] == [second.seq]
    assert [f.seq for f in opened.read(until=second.ts)] == [first.seq]
    assert list(opened.read(since=since + timedelta(days=1))) == []
    assert [f.seq for f in opened.read(since=datetime(2000, 1, 1, tzinfo=UTC))] == [1, 2]


def test_reads_page_through_many_frames(opened: Store) -> None:
    opened.append_many([Draft("bulk", {"i": i}) for i in range(2500)])
    frames = list(opened.read(topic="bulk"))
    assert [f.meta["i"] for f in frames] == list(range(2500))
    assert [f.seq for f in opened.read(after_seq=2400, limit=50)] == list(range(2401, 2451))


def test_bad_input_is_refused_with_the_reason(opened: Store) -> None:
    with pytest.raises(InvalidTopicError, match="invalid topic"):
        opened.append("bad topic")
    with pytest.raises(InvalidStreamError):
        opened.append("t", stream="../escape")
    with pytest.raises(InvalidMetaError, match="JSON object"):
        opened.append("t", [1, 2])  # type: ignore[arg-type]
    with pytest.raises(InvalidMetaError, match="serializable"):
        opened.append("t", {"x": object()})
    with pytest.raises(InvalidHashError):
        opened.cas_get("md5-nope")
    with pytest.raises(ContentNotFoundError):
        opened.cas_get("sha256-" + "A" * 43 + "=")
    with pytest.raises(FrameNotFoundError):
        opened.get("0" * 25)
    with pytest.raises(FrameNotFoundError):
        opened.get("caf\u00e9")
    with pytest.raises(InvalidQueryError):
        list(opened.read(limit=-1))
    with pytest.raises(InvalidQueryError):
        opened.last("t", 0)
    with pytest.raises(InvalidQueryError):
        list(opened.read(since="yesterday"))
    assert opened.last_seq == 0  # nothing was appended by any of them


def test_a_reader_creates_nothing(store_location: str) -> None:
    with Store(store_location, create=False) as reader:
        assert not reader.exists
        assert list(reader.read()) == [] and reader.last_seq == 0
        assert reader.last("t") == [] and reader.errors() == []
        with pytest.raises(FrameNotFoundError):
            reader.get("0" * 25)
        assert reader.stats()["frames"] == 0
        with Store(store_location) as writer:
            writer.append("t", {"n": 1})
        assert reader.exists
        assert [f.meta for f in reader.read()] == [{"n": 1}]


def test_a_closed_store_refuses_work(store_location: str) -> None:
    store = Store(store_location)
    store.append("t")
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.append("t")


def test_stats_report_the_same_counts(opened: Store) -> None:
    opened.append("a", content="x", stream="s1")
    opened.append("b", content="x", stream="s2")
    opened.append("b", content="yy", stream="s2")
    stats = opened.stats()
    assert {k: stats[k] for k in ("last_seq", "frames", "streams", "topics", "parse_errors",
                                  "content_objects", "content_bytes")} == {
        "last_seq": 3, "frames": 3, "streams": 2, "topics": 2, "parse_errors": 0,
        "content_objects": 2, "content_bytes": 3}
    assert {"path", "durability", "stream_bytes", "index_bytes",
            "torn_tails_repaired"} <= set(stats)


def test_gc_applies_last_and_time_policies(opened: Store) -> None:
    for i in range(10):
        opened.append("agent.output", {"i": i}, content=f"line {i}")
    kept = opened.append("ralph.note", content="keep")
    dry = opened.gc([Rule.parse("agent.output=last:3")], dry_run=True)
    assert (dry.frames_removed, dry.content_removed, dry.dry_run) == (7, 7, True)
    assert opened.stats()["frames"] == 11
    report = opened.gc([Rule.parse("agent.output=last:3")])
    assert (report.frames_removed, report.content_removed) == (7, 7)
    assert report.bytes_freed >= dry.bytes_freed - 100  # the same frames, measured the same
    assert [f.meta["i"] for f in opened.read(topic="agent.output")] == [7, 8, 9]
    assert opened.get(kept.id) == kept and opened.cas_get(kept.hash or "") == b"keep"
    # Seqs removed by gc are never handed out again.
    assert opened.append("after").seq == 12
    time.sleep(0.02)
    assert opened.gc([Rule.parse("agent.*=time:1")]).frames_removed == 3
    assert opened.stats()["content_objects"] == 1


def test_appends_from_several_processes_stay_gapless(opened: Store,
                                                     store_location: str) -> None:
    code = """
        import sys
        from ralph.store import Store
        with Store(sys.argv[1]) as store:
            for i in range(150):
                store.append("w", {"writer": sys.argv[2], "i": i}, stream=f"s{sys.argv[2]}")
    """
    children = [start_python(code, store_location, str(n)) for n in range(4)]
    for child in children:
        _out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
    frames = list(opened.read())
    assert [f.seq for f in frames] == list(range(1, 601))
    assert len({f.id for f in frames}) == 600
    for n in range(4):  # each writer's frames in its own order
        assert [f.meta["i"] for f in frames if f.meta["writer"] == str(n)] == list(range(150))


def test_subscribe_replays_then_goes_live_with_no_gap(opened: Store,
                                                      store_location: str) -> None:
    for i in range(30):
        opened.append("ralph.x", {"i": i})

    async def follow() -> list[Frame]:
        got: list[Frame] = []
        writer = start_python("""
            import sys
            from ralph.store import Store
            with Store(sys.argv[1]) as store:
                for i in range(30, 230):
                    store.append("ralph.x" if i % 2 == 0 else "other", {"i": i})
        """, store_location)
        try:
            async with opened.subscribe(topic="ralph.*", after_seq=10) as frames:
                async for frame in frames:
                    got.append(frame)
                    if frame.meta["i"] == 228:
                        break
        finally:
            writer.communicate(timeout=120)
        return got

    got = asyncio.run(asyncio.wait_for(follow(), 120))
    assert [f.meta["i"] for f in got] == list(range(10, 30)) + list(range(30, 230, 2))
    seqs = [f.seq for f in got]
    assert seqs == sorted(set(seqs))


def test_a_lagging_subscriber_loses_nothing(store_location: str) -> None:
    async def follow() -> tuple[list[int], int]:
        with Store(store_location, max_lag=5) as store:
            lags = 0

            def lagged(_lag: object) -> None:
                nonlocal lags
                lags += 1

            got: list[int] = []
            async with store.subscribe(on_lag=lagged) as frames:
                store.append("t", {"i": 0})
                async for frame in frames:
                    got.append(frame.meta["i"])
                    if frame.meta["i"] == 0:
                        # Appends while this subscriber does not read: its buffer overflows.
                        await asyncio.to_thread(
                            store.append_many, [Draft("t", {"i": i}) for i in range(1, 200)])
                        for i in range(200, 260):
                            store.append("t", {"i": i})
                        await asyncio.sleep(0.3)
                    if frame.meta["i"] == 259:
                        break
            return got, lags

    got, _lags = asyncio.run(asyncio.wait_for(follow(), 60))
    assert got == list(range(260))


def test_copy_moves_every_frame_and_its_content(store_location: str, tmp_path: Path,
                                                pg_url: str) -> None:
    other = pg_url if not is_database_url(store_location) else str(tmp_path) + "/copy"
    with Store(store_location) as source:
        source.append("a", {"n": 1}, content="one", stream="s/1")
        source.append_many([Draft("b", {"n": i}, content=f"c{i}") for i in range(5)])
        source.append("c")
        expected = list(source.read())
    with Store(store_location, create=False) as source, Store(other) as target:
        report = copy_store(source, target)
        assert (report.frames, report.content_objects) == (7, 6)
        copied = list(target.read())
        assert [(f.id, f.seq, f.ts, f.topic, f.stream, f.meta, f.hash) for f in copied] == [
            (f.id, f.seq, f.ts, f.topic, f.stream, f.meta, f.hash) for f in expected]
        assert target.cas_get(expected[0].hash or "") == b"one"
        assert target.append("after").seq == 8
        with pytest.raises(StoreError, match="already holds"):
            copy_store(source, target)


def test_the_cli_verbs_work_on_the_store(store_location: str) -> None:
    def ralph(*args: str, stdin: str = "") -> str:
        result = subprocess.run([sys.executable, "-m", "ralph", *args, "--store", store_location],
                                input=stdin, capture_output=True, text=True, timeout=120,
                                check=False, start_new_session=True)
        assert result.returncode == 0, result.stderr
        return result.stdout

    frame = json.loads(ralph("store", "append", "ralph.cli.note", "--meta", '{"a": 1}',
                             stdin="body"))
    assert frame["seq"] == 1 and frame["meta"] == {"a": 1}
    with Store(store_location, create=False) as direct:  # in that store, nowhere else
        assert direct.get(frame["id"]).to_dict() == frame
    assert json.loads(ralph("store", "get", frame["id"]))["id"] == frame["id"]
    assert ralph("store", "cas", frame["hash"]) == "body"
    assert [json.loads(line)["seq"] for line in ralph("store", "cat").splitlines()] == [1]
    assert json.loads(ralph("store", "last", "ralph.cli.*"))["seq"] == 1
    assert json.loads(ralph("store", "stats"))["frames"] == 1
    assert ralph("store", "errors") == ""
    assert json.loads(ralph("store", "gc", "--policy", "ralph.cli.note=last:0"))[
        "frames_removed"] == 1


def _ralph(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ralph", *args], capture_output=True,
                          text=True, timeout=120, check=False, start_new_session=True,
                          stdin=subprocess.DEVNULL)


def test_ralph_store_copy_moves_a_store_to_the_other_backend(store_location: str,
                                                             tmp_path: Path,
                                                             pg_url: str) -> None:
    other = str(tmp_path / "copy") if is_database_url(store_location) else pg_url
    with Store(store_location) as source:
        source.append_many([Draft("ralph.x.note", {"i": i}, content=f"c{i}")
                            for i in range(1200)])
    result = _ralph("store", "copy", store_location, other)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["frames"] == 1200
    with Store(store_location) as source, Store(other, create=False) as target:
        assert [f.to_dict() for f in target.read()] == [f.to_dict() for f in source.read()]
    again = _ralph("store", "copy", store_location, other)
    assert again.returncode == 1
    assert again.stderr.count("\n") == 1 and "already holds frames" in again.stderr
    same = _ralph("store", "copy", store_location, store_location)
    assert same.returncode == 1 and "the same store" in same.stderr
    missing = _ralph("store", "copy", str(tmp_path / "nothing-here"), str(tmp_path / "new"))
    assert missing.returncode == 1 and "nothing to copy" in missing.stderr
    assert not (tmp_path / "nothing-here").exists() and not (tmp_path / "new").exists()

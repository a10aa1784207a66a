"""`Store(path, create=False)`: a reader never creates a store; a missing one reads as empty
and is opened once it appears."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ralph.store import FileStore, FrameNotFoundError, Store, StoreError


def test_a_missing_store_reads_as_empty_and_stays_missing(tmp_path: Path) -> None:
    path = tmp_path / "project" / ".ralph" / "store"
    with Store(path, create=False) as store:
        assert not store.exists
        assert list(store.read()) == []
        assert list(store.read(topic="a.*", stream="s", after_seq=3, limit=5)) == []
        assert store.last("t", 3) == []
        assert store.last_seq == 0
        with pytest.raises(FrameNotFoundError):
            store.get("0" * 25)
        assert store.errors() == []
        assert store.sync().frames == store.rebuild().frames == 0
        report = store.gc(dry_run=False)
        assert (report.frames_removed, report.content_removed) == (0, 0)
        store.flush()
        stats = store.stats()
        assert (stats["frames"], stats["last_seq"], stats["stream_bytes"],
                stats["index_bytes"]) == (0, 0, 0, 0)
    assert not (tmp_path / "project").exists()


def test_bad_queries_are_refused_even_when_the_store_is_missing(tmp_path: Path) -> None:
    with Store(tmp_path / "store", create=False) as store:
        with pytest.raises(ValueError, match="topic"):
            store.last("bad topic!")
        with pytest.raises(ValueError, match="stream"):
            list(store.read(stream="/bad"))
    assert not (tmp_path / "store").exists()


def test_the_first_append_creates_the_store(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with Store(path, create=False) as store:
        frame = store.append("t", {"n": 1}, content="hello")
        assert store.exists
        assert list(store.read()) == [frame]
        assert store.cas_get(frame.hash or "") == b"hello"
    with Store(path, create=False) as again:
        assert again.exists and again.get(frame.id) == frame


def test_a_store_created_by_another_writer_is_opened_when_it_appears(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with Store(path, create=False) as reader:
        assert reader.last_seq == 0
        with Store(path) as writer:  # as another process's first append would
            frame = writer.append("t", {"n": 1})
        assert reader.exists
        assert list(reader.read()) == [frame]


async def test_a_subscription_waits_for_a_missing_store(tmp_path: Path) -> None:
    """Frames appended through this Store arrive at once; a store created by another writer
    is found by the hub's look for it (once a second)."""
    path = tmp_path / "store"
    with Store(path, create=False) as reader:
        async with reader.subscribe() as frames:
            waiting = asyncio.ensure_future(frames.__anext__())
            await asyncio.sleep(0)  # let it start waiting
            assert not waiting.done() and not path.exists()

            def write_elsewhere() -> None:
                with Store(path) as writer:
                    writer.append("t", {"n": 1})

            await asyncio.to_thread(write_elsewhere)
            first = await asyncio.wait_for(waiting, 30)
            second = await asyncio.to_thread(reader.append, "t", {"n": 2})
            assert [first.meta, (await asyncio.wait_for(frames.__anext__(), 30))] == [
                {"n": 1}, second]


def test_a_closed_missing_store_refuses_use(tmp_path: Path) -> None:
    store = Store(tmp_path / "store", create=False)
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.append("t")
    with pytest.raises(StoreError, match="closed"):
        list(store.read())
    assert not (tmp_path / "store").exists()


def test_an_existing_store_opens_as_before(store: FileStore, store_dir: Path) -> None:
    frame = store.append("t", {"n": 1})
    with Store(store_dir, create=False) as reader:
        assert reader.exists and list(reader.read()) == [frame]

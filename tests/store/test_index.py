"""The index is a cache: incremental sync, parse errors, rebuild, repair of a lost index."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from ralph.store import FileStore
from ralph.store.frame import encode_frame, format_ts
from ralph.store.ids import IdGenerator
from ralph.store.index import WAL_KEEP_BYTES, Index


def _line(seq: int, topic: str = "t", stream: str = "s") -> bytes:
    frame_id, ms = IdGenerator().next()
    return encode_frame(frame_id, seq, format_ts(ms), topic, stream, b"{}", None)


def _snapshot(store: FileStore) -> tuple[list[dict[str, object]], list[tuple[str, int, str]]]:
    frames = [f.to_dict() for f in store.read()]
    errors = [(e.stream, e.byte_offset, e.error) for e in store.errors()]
    return frames, errors


def test_sync_reads_only_what_was_appended(store: FileStore, store_dir: Path) -> None:
    for i in range(10):
        store.append("t", {"i": i}, stream="a")
    assert store.sync().frames == 10  # appends are indexed by the next read or sync
    assert store.sync().frames == 0
    with FileStore(store_dir) as other:  # another writer, as another process would be
        for i in range(3):
            other.append("t", {"i": 10 + i}, stream="b")
    result = store.sync()
    assert (result.frames, result.errors, result.watermark) == (3, 0, 13)
    assert store.sync().frames == 0
    assert [f.meta["i"] for f in store.read()] == list(range(13))


def test_lines_that_are_not_frames_are_recorded_once(store: FileStore,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    store.append("t", {"n": 1}, stream="a")
    path = store.path / "streams" / "a.jsonl"
    offset = path.stat().st_size
    with path.open("ab") as handle:
        handle.write(b"this is not json\n")
        handle.write(b'{"valid json": "but not a frame"}\n')
    store.append("t", {"n": 2}, stream="a")
    with caplog.at_level(logging.WARNING, logger="ralph.store"):
        frames = list(store.read())
    assert [f.meta["n"] for f in frames] == [1, 2]
    errors = store.errors()
    assert [(e.stream, e.byte_offset) for e in errors] == [("a", offset), ("a", offset + 17)]
    assert errors[0].excerpt == "this is not json" and "not JSON" in errors[0].error
    assert "id" in errors[1].error
    assert any("not a frame" in r.getMessage() for r in caplog.records)
    store.sync()
    store.rebuild()
    assert len(store.errors()) == 2  # recorded once, and again after a rebuild


def test_a_duplicated_frame_is_reported_not_dropped(store: FileStore) -> None:
    store.append("t", stream="a")
    line = (store.path / "streams" / "a.jsonl").read_bytes()
    (store.path / "streams" / "copy.jsonl").write_bytes(
        line.replace(b'"stream":"a"', b'"stream":"copy"'))
    store.sync()
    errors = store.errors()
    assert len(errors) == 1 and errors[0].stream == "copy"
    assert "duplicate" in errors[0].error
    assert len(list(store.read())) == 1


def test_rebuild_recreates_the_same_index(store: FileStore) -> None:
    for i in range(300):
        store.append(f"topic.{i % 7}", {"i": i}, content=f"c{i % 5}", stream=f"s/{i % 4}")
    with (store.path / "streams" / "s" / "1.jsonl").open("ab") as handle:
        handle.write(b"junk\n")
    before = _snapshot(store)
    progress: list[tuple[int, int]] = []
    result = store.rebuild(lambda done, total: progress.append((done, total)))
    assert result.frames == 300 and result.errors == 1 and result.watermark == 300
    assert _snapshot(store) == before
    assert progress and progress[-1][0] == progress[-1][1]


def test_deleted_index_is_rebuilt_with_a_warning(store_dir: Path,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    with FileStore(store_dir) as store:
        for i in range(20):
            store.append("t", {"i": i})
        before = _snapshot(store)
        for name in os.listdir(store_dir):
            if name.startswith("index.sqlite"):
                (store_dir / name).unlink()
        with caplog.at_level(logging.WARNING, logger="ralph.store"):
            store.append("t", {"i": 20})  # the open store notices on its next read
            after = _snapshot(store)
        assert after[0][:20] == before[0] and len(after[0]) == 21
        assert any("index was deleted" in r.getMessage() for r in caplog.records)
    caplog.clear()
    for name in os.listdir(store_dir):
        if name.startswith("index.sqlite"):
            (store_dir / name).unlink()
    with caplog.at_level(logging.WARNING, logger="ralph.store"), FileStore(store_dir) as store:
        assert len(list(store.read())) == 21
    assert any("index is missing" in r.getMessage() for r in caplog.records)


def test_corrupt_index_is_rebuilt_with_a_warning(store_dir: Path,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    with FileStore(store_dir) as store:
        for i in range(20):
            store.append("t", {"i": i}, content=str(i))
        before = _snapshot(store)
    for name in os.listdir(store_dir):
        if name.startswith("index.sqlite"):
            (store_dir / name).unlink()
    (store_dir / "index.sqlite").write_bytes(b"this is not a database" * 100)
    with caplog.at_level(logging.WARNING, logger="ralph.store"), FileStore(store_dir) as store:
        assert _snapshot(store) == before
    assert any("corrupt" in r.getMessage() for r in caplog.records)


def test_a_deleted_stream_file_leaves_the_index(store: FileStore,
                                                caplog: pytest.LogCaptureFixture) -> None:
    store.append("t", stream="keep")
    store.append("t", stream="gone")
    assert len(list(store.read())) == 2
    (store.path / "streams" / "gone.jsonl").unlink()
    with caplog.at_level(logging.WARNING, logger="ralph.store"):
        store.sync()
    assert [f.stream for f in store.read()] == ["keep"]
    assert any("gone" in r.getMessage() for r in caplog.records)


def test_a_partial_last_line_waits_for_its_newline(tmp_path: Path) -> None:
    streams = tmp_path / "streams"
    streams.mkdir()
    path = streams / "s.jsonl"
    first, second = _line(1), _line(2)
    path.write_bytes(first + second[:30])
    index = Index(tmp_path / "index.sqlite", streams)
    index.open()
    assert index.sync().watermark == 1
    with path.open("ab") as handle:
        handle.write(second[30:])
    result = index.sync()
    assert (result.frames, result.watermark) == (1, 2)
    assert index.errors() == []
    index.close()


def test_reads_stop_at_the_watermark(tmp_path: Path) -> None:
    """Frame 3 indexed while frame 2 is not yet on disk: readers must not see 3 before 2."""
    streams = tmp_path / "streams"
    streams.mkdir()
    (streams / "a.jsonl").write_bytes(_line(1, stream="a"))
    (streams / "b.jsonl").write_bytes(_line(3, stream="b"))
    index = Index(tmp_path / "index.sqlite", streams)
    index.open()
    result = index.sync()
    assert (result.watermark, result.max_seq) == (1, 3)
    assert [f.seq for f in index.page(upto=result.watermark)] == [1]
    with (streams / "a.jsonl").open("ab") as handle:
        handle.write(_line(2, stream="a"))
    assert index.sync().watermark == 3
    assert index.sync(settle_upto=5).watermark == 5  # holes confirmed under the lock
    index.close()


def test_a_store_settles_a_permanent_hole(store: FileStore) -> None:
    """A hole that no file will ever fill (a line removed by hand) does not stall readers."""
    for i in range(3):
        store.append("t", {"i": i}, stream=f"s{i}")
    (store.path / "streams" / "s1.jsonl").unlink()
    store.append("t", {"i": 3}, stream="s3")
    assert [f.meta["i"] for f in store.read()] == [0, 2, 3]
    assert store.last_seq == 4


def test_a_large_sync_gives_its_wal_back(store_dir: Path) -> None:
    """A first sync of many frames writes a WAL as large as what it indexed; it is truncated
    after the sync rather than kept as a second copy of the index."""
    with FileStore(store_dir, durability="never", sync_on_open=False) as writer:
        for i in range(30_000):
            writer.append("t", {"i": i, "pad": "p" * 100}, stream=f"s{i % 3}")
    with FileStore(store_dir) as reader:  # syncs on open
        assert reader.last_seq == 30_000
        wal = store_dir / "index.sqlite-wal"
        assert (store_dir / "index.sqlite").stat().st_size > WAL_KEEP_BYTES
        assert not wal.exists() or wal.stat().st_size <= WAL_KEEP_BYTES

"""The index keeps small metas only: large ones are read back from the stream files.

Every way of reading a frame (get, read, last, subscriptions, `ralph store cat`) must give
back exactly the frame that was appended, whichever of the two places its meta came from.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ralph.store import FileStore, Frame, Store, StoreError
from ralph.store import index as index_module
from ralph.store.frame import encode_frame, format_ts
from ralph.store.ids import IdGenerator
from ralph.store.index import META_INLINE_BYTES, SCHEMA_VERSION
from ralph.store.retention import _rewrite_stream
from ralph.store.streams import LineReader, StaleOffsetError
from tests.cli.helpers import run_ralph


def large_meta(i: int, size: int = 50_000) -> dict[str, Any]:
    """A meta far above the index's limit, with text that needs escaping in JSON."""
    return {"kind": "text", "content": f'"quoted" {i}\n' + "é" * size, "i": i}


def index_metas(store_dir: Path) -> dict[int, str | None]:
    with sqlite3.connect(store_dir / "index.sqlite") as conn:
        return dict(conn.execute("SELECT seq, meta FROM frames"))


def append_mixed(store: FileStore) -> list[Frame]:
    """Small and large frames, in two streams, some with content."""
    frames = []
    for i in range(6):
        stream = f"runs/r{i % 2}"
        frames.append(store.append("agent.output", large_meta(i), stream=stream))
        frames.append(store.append("agent.usage", {"i": i}, content=f"c{i}", stream=stream))
    return frames


def test_large_metas_stay_out_of_the_index_and_read_back_identically(store: FileStore,
                                                                     store_dir: Path) -> None:
    appended = append_mixed(store)
    assert [f.to_dict() for f in store.read()] == [f.to_dict() for f in appended]
    metas = index_metas(store_dir)
    for frame in appended:
        inline = metas[frame.seq]
        if frame.topic == "agent.output":
            assert inline is None
        else:
            assert inline is not None and json.loads(inline) == frame.meta
    assert max(len(m) for m in metas.values() if m is not None) <= META_INLINE_BYTES
    for frame in appended:
        assert store.get(frame.id) == frame
    assert store.last("agent.output", 2) == appended[-4::2]
    assert list(store.read(stream="runs/r1", after_seq=3, limit=3)) == [
        f for f in appended if f.stream == "runs/r1" and f.seq > 3][:3]


def test_the_limit_is_on_the_meta_as_json(store: FileStore, store_dir: Path) -> None:
    """A meta of exactly META_INLINE_BYTES stays in the index; one byte more does not."""
    overhead = len(b'{"t":""}')
    at_limit = store.append("t", {"t": "x" * (META_INLINE_BYTES - overhead)})
    above = store.append("t", {"t": "x" * (META_INLINE_BYTES - overhead + 1)})
    store.sync()
    metas = index_metas(store_dir)
    assert metas[at_limit.seq] is not None and metas[above.seq] is None
    assert list(store.read()) == [at_limit, above]


def test_small_frames_are_read_without_touching_the_stream_files(
        store: FileStore, monkeypatch: pytest.MonkeyPatch) -> None:
    small = [store.append("t", {"i": i}) for i in range(50)]
    store.append("big", large_meta(0))

    class NoReads(LineReader):
        def __init__(self, root: Path) -> None:
            raise AssertionError("a stream file was read for small frames")

    monkeypatch.setattr(index_module, "LineReader", NoReads)
    assert list(store.read(topic="t")) == small
    assert store.get(small[3].id) == small[3]
    with pytest.raises(AssertionError, match="stream file was read"):
        store.last("big")


async def test_subscriptions_replay_and_deliver_large_frames_identically(store: FileStore) -> None:
    before = append_mixed(store)
    got: list[Frame] = []
    async with store.subscribe() as frames:
        async for frame in frames:
            got.append(frame)
            if len(got) == len(before):
                break  # replayed from the index: now one appended while live
        live = await asyncio.to_thread(store.append, "agent.output", large_meta(99),
                                       stream="runs/r0")
        got.append(await asyncio.wait_for(frames.__anext__(), 30))
    assert got == [*before, live]


def test_store_cat_and_get_print_large_frames_whole(store: FileStore, store_dir: Path) -> None:
    appended = append_mixed(store)
    store.flush()
    cat = run_ralph("store", "cat", "--store", str(store_dir))
    assert cat.code == 0, cat.err
    assert [json.loads(line) for line in cat.out.splitlines()] == [
        f.to_dict() for f in appended]
    got = run_ralph("store", "get", appended[0].id, "--store", str(store_dir))
    assert json.loads(got.out) == appended[0].to_dict()


def test_a_stream_rewritten_behind_the_index_is_read_after_catching_up(
        store: FileStore, store_dir: Path) -> None:
    """What a gc in another process does between a reader's query and its read of the line:
    the offsets the index holds no longer point at the frames."""
    doomed = store.append("gone", {"pad": "x" * 5000}, stream="s")
    kept = [store.append("agent.output", large_meta(i), stream="s") for i in range(3)]
    assert list(store.read()) == [doomed, *kept]  # indexed at their first offsets
    _rewrite_stream(store_dir / "streams" / "s.jsonl", {doomed.seq})
    assert [store.get(f.id) for f in kept] == kept
    assert list(store.read(topic="agent.output")) == kept


def test_a_stream_that_no_longer_matches_its_index_is_one_clear_error(
        store: FileStore, store_dir: Path) -> None:
    """Lines moved within a file of the same size and inode: no sync can notice; the read
    says what is wrong and what fixes it instead of returning another frame's meta."""
    first = store.append("agent.output", large_meta(1, 2000), stream="s")
    second = store.append("agent.output", large_meta(2, 2000), stream="s")
    assert list(store.read()) == [first, second]
    path = store_dir / "streams" / "s.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    with path.open("r+b") as handle:  # same inode, same size: the lines swapped
        handle.write(lines[1] + lines[0])
    with pytest.raises(StoreError, match="store rebuild"):
        store.get(first.id)
    store.rebuild()
    assert store.get(first.id) == first


def test_line_reader_reads_lines_longer_than_its_first_read(tmp_path: Path) -> None:
    streams = tmp_path / "streams"
    streams.mkdir()
    ids = IdGenerator()
    lines = []
    for seq, size in enumerate((10, 16_000, 16_384, 100_000, 3), start=1):
        frame_id, ms = ids.next()
        meta_json = json.dumps({"t": "y" * size}).encode()
        lines.append((frame_id, seq, encode_frame(frame_id, seq, format_ts(ms), "t", "s",
                                                  meta_json, None)))
    (streams / "s.jsonl").write_bytes(b"".join(line for _, _, line in lines))
    reader = LineReader(streams)
    try:
        offset = 0
        for frame_id, seq, line in lines:
            meta = reader.meta("s", offset, seq, frame_id)
            assert meta == json.loads(line)["meta"]
            offset += len(line)
        with pytest.raises(StaleOffsetError):
            reader.meta("s", 0, 2, lines[1][0])  # another frame's line is there
        with pytest.raises(StaleOffsetError):
            reader.meta("s", offset, 9, "x" * 25)  # past the end
        with pytest.raises(StaleOffsetError):
            reader.meta("other", 0, 1, lines[0][0])  # no such file
    finally:
        reader.close()


_V1_TABLES = """
CREATE TABLE frames (seq INTEGER PRIMARY KEY, id TEXT NOT NULL, ts TEXT NOT NULL,
    topic TEXT NOT NULL, stream TEXT NOT NULL, meta TEXT NOT NULL, hash TEXT,
    byte_offset INTEGER NOT NULL);
CREATE TABLE streams (name TEXT PRIMARY KEY, byte_offset INTEGER NOT NULL,
    ino INTEGER NOT NULL);
CREATE TABLE event_parse_errors (id INTEGER PRIMARY KEY, stream TEXT NOT NULL,
    byte_offset INTEGER NOT NULL, excerpt TEXT NOT NULL, error TEXT NOT NULL,
    recorded_at TEXT NOT NULL, UNIQUE (stream, byte_offset));
CREATE TABLE index_state (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE UNIQUE INDEX frames_id ON frames (id);
"""


def test_an_index_of_the_first_schema_is_rebuilt(store_dir: Path,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    """An index written by an earlier Ralph (schema 1: every meta in the table, NOT NULL)
    is replaced by a current one built from the stream files, with a warning."""
    with FileStore(store_dir) as store:
        appended = append_mixed(store)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{store_dir / 'index.sqlite'}{suffix}").unlink(missing_ok=True)
    with sqlite3.connect(store_dir / "index.sqlite") as conn:
        conn.executescript(_V1_TABLES)
        for frame in appended:  # as schema 1 held them: the whole meta in the table
            conn.execute("INSERT INTO frames VALUES (?, ?, ?, ?, ?, ?, ?, 0)",
                         (frame.seq, frame.id, frame.ts, frame.topic, frame.stream,
                          json.dumps(frame.meta), frame.hash))
        conn.execute("INSERT INTO index_state VALUES ('watermark', ?)", (appended[-1].seq,))
        conn.execute("PRAGMA user_version=1")
    conn.close()
    with caplog.at_level(logging.WARNING, logger="ralph.store"), Store(store_dir) as store:
        assert list(store.read()) == appended
        assert store.get(appended[0].id) == appended[0]
        more = store.append("agent.output", large_meta(7))
        assert store.last("agent.output") == [more]
    assert any("schema 1" in r.getMessage() and "rebuilding" in r.getMessage()
               for r in caplog.records)
    with sqlite3.connect(store_dir / "index.sqlite") as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("SELECT COUNT(*) FROM frames WHERE meta IS NULL").fetchone()[0] == 7
    conn.close()

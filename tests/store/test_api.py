"""The store's API: append, get, last, read (every filter), cas_get, stats, and bad input."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ralph.store import (
    ContentCorruptError,
    ContentNotFoundError,
    FileStore,
    Frame,
    FrameNotFoundError,
    InvalidHashError,
    InvalidMetaError,
    InvalidQueryError,
    InvalidStreamError,
    InvalidTopicError,
    Store,
    StoreError,
    StoreNotWritableError,
)
from tests.store.helpers import stream_lines


def test_append_returns_the_stored_frame(store: FileStore) -> None:
    frame = store.append("ralph.demo.note", {"type": "learning"}, content="hello",
                         stream="sessions/demo")
    assert frame.seq == 1 and len(frame.id) == 25 and frame.ts.endswith("Z")
    assert frame.topic == "ralph.demo.note" and frame.stream == "sessions/demo"
    assert frame.meta == {"type": "learning"}
    assert frame.hash is not None and frame.hash.startswith("sha256-")
    assert store.get(frame.id) == frame
    assert store.cas_get(frame.hash) == b"hello"
    line = (store.path / "streams" / "sessions" / "demo.jsonl").read_bytes()
    assert orjson.loads(line) == frame.to_dict()
    assert frame.to_json() == line.rstrip(b"\n")


def test_seq_is_gapless_and_ids_sort_by_time(store: FileStore) -> None:
    frames = [store.append("t", {"i": i}, stream=f"s{i % 3}") for i in range(50)]
    assert [f.seq for f in frames] == list(range(1, 51))
    assert [f.id for f in frames] == sorted(f.id for f in frames)
    assert [f.seq for f in store.read()] == list(range(1, 51))


def test_content_is_stored_once(store: FileStore) -> None:
    a = store.append("t", content=b"same")
    b = store.append("t", content="same")
    assert a.hash == b.hash
    assert len(list((store.path / "cas" / "sha256").rglob("*"))) == 2  # one dir, one blob
    assert store.append("t").hash is None


def test_read_filters(store: FileStore) -> None:
    store.append("ralph.auth.note", stream="a")
    store.append("ralph.auth.iteration", stream="b")
    store.append("ralph.authx.note", stream="a")
    store.append("other", stream="b")
    store.append("ralph.auth.note", stream="b")

    def seqs(**kwargs: object) -> list[int]:
        return [f.seq for f in store.read(**kwargs)]  # type: ignore[arg-type]

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


def test_read_pages_through_many_frames(store: FileStore) -> None:
    for i in range(2500):
        store.append("bulk", {"i": i})
    assert [f.meta["i"] for f in store.read(topic="bulk")] == list(range(2500))
    assert len(list(store.read(limit=1500))) == 1500
    assert [f.seq for f in store.read(after_seq=2000, limit=1000)] == list(range(2001, 2501))


def test_read_by_time(store: FileStore) -> None:
    first = store.append("t")
    middle = store.append("t")
    while store.append("t").ts == middle.ts:  # make sure a later millisecond exists
        pass
    last = store.last("t")[0]
    assert [f.seq for f in store.read(since=last.ts)] == [
        f.seq for f in store.read() if f.ts >= last.ts]
    assert first.seq in [f.seq for f in store.read(until=last.ts)]
    assert last.seq not in [f.seq for f in store.read(until=last.ts)]
    later = datetime.now(UTC) + timedelta(hours=1)
    assert list(store.read(since=later)) == []
    assert len(list(store.read(until=later))) == last.seq
    with pytest.raises(InvalidQueryError):
        store.read(since="not a time")


def test_last(store: FileStore) -> None:
    for i in range(5):
        store.append("a.x", {"i": i})
        store.append("a.y", {"i": i})
    assert [f.meta["i"] for f in store.last("a.x")] == [4]
    assert [f.meta["i"] for f in store.last("a.x", 3)] == [2, 3, 4]
    assert [f.topic for f in store.last("a.*", 2)] == ["a.x", "a.y"]
    assert store.last("nothing.here") == []
    with pytest.raises(InvalidQueryError):
        store.last("a.x", 0)


def test_bad_input_raises_typed_errors_and_loses_nothing(store: FileStore, tmp_path: Path) -> None:
    kept = store.append("kept", {"a": 1}, content="keep me")
    with pytest.raises(InvalidTopicError):
        store.append("1bad")
    with pytest.raises(InvalidTopicError):
        store.append("a..b")
    with pytest.raises(InvalidStreamError):
        store.append("t", stream="../escape")
    with pytest.raises(InvalidMetaError):
        store.append("t", [1, 2])  # type: ignore[arg-type]
    with pytest.raises(FrameNotFoundError):
        store.get("0" * 25)
    with pytest.raises(FrameNotFoundError):
        store.get("not-an-id")
    with pytest.raises(InvalidHashError):
        store.cas_get("sha256-nope")
    with pytest.raises(ContentNotFoundError):
        store.cas_get("sha256-" + "A" * 43 + "=")
    with pytest.raises(InvalidTopicError):
        list(store.read(topic="bad topic"))
    with pytest.raises(InvalidStreamError):
        store.read(stream="/abs")
    for error in (InvalidTopicError, InvalidMetaError, FrameNotFoundError, InvalidHashError,
                  ContentNotFoundError, StoreNotWritableError):
        assert issubclass(error, StoreError)
    assert [f.to_dict() for f in store.read()] == [kept.to_dict()]
    assert store.cas_get(kept.hash or "") == b"keep me"
    assert [f.get("seq") for f in stream_lines(store.path)] == [1]


def test_corrupt_content_is_detected(store: FileStore) -> None:
    frame = store.append("t", content="original")
    assert frame.hash is not None
    path = store._cas.path_for(frame.hash)
    path.write_bytes(b"tampered")
    with pytest.raises(ContentCorruptError):
        store.cas_get(frame.hash)


def test_store_directory_that_cannot_be_created(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreNotWritableError, match="cannot create the store"):
        Store(blocker / "store")


def test_bad_settings(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="durability"):
        Store(tmp_path / "s", durability="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_lag"):
        Store(tmp_path / "s", max_lag=0)


@pytest.mark.parametrize("durability", ["always", "batch", "never"])
def test_every_durability_mode_persists(tmp_path: Path, durability: str) -> None:
    with Store(tmp_path / "s", durability=durability) as store:  # type: ignore[arg-type]
        for i in range(20):
            store.append("t", {"i": i}, content=f"c{i}")
    with Store(tmp_path / "s") as store:
        assert [f.meta["i"] for f in store.read()] == list(range(20))
        assert store.stats()["content_objects"] == 20


def test_stats(store: FileStore) -> None:
    store.append("a", content="xyz", stream="s1")
    store.append("b", stream="s2")
    stats = store.stats()
    assert stats["frames"] == 2 and stats["streams"] == 2 and stats["topics"] == 2
    assert stats["last_seq"] == 2 and stats["content_objects"] == 1
    assert stats["content_bytes"] == 3 and stats["parse_errors"] == 0
    assert stats["stream_bytes"] == sum(
        p.stat().st_size for p in (store.path / "streams").rglob("*.jsonl"))


def test_closed_store_refuses_appends(store_dir: Path) -> None:
    store = Store(store_dir)
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.append("t")
    with pytest.raises(StoreError, match="closed"):
        list(store.read())


def test_store_files_are_where_the_docs_say(store: FileStore) -> None:
    store.append("t", content="c", stream="runs/run_1")
    names = sorted(os.listdir(store.path))
    assert {"streams", "cas", "head", "index.sqlite"} <= set(names)
    assert (store.path / "streams" / "runs" / "run_1.jsonl").is_file()


# -- property-based round trip -------------------------------------------------------------

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=12,
)
_topics = st.from_regex(r"[A-Za-z_][A-Za-z0-9_-]{0,8}(\.[A-Za-z0-9_-]{1,8}){0,3}",
                        fullmatch=True)
_streams = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,8}(/[A-Za-z0-9_][A-Za-z0-9_.-]{0,8})?",
                         fullmatch=True)
_appends = st.lists(st.tuples(_topics, st.dictionaries(st.text(max_size=8), _json_values,
                                                       max_size=4),
                              st.none() | st.binary(max_size=64), _streams),
                    min_size=1, max_size=12)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(appends=_appends)
def test_round_trip(tmp_path_factory: pytest.TempPathFactory,
                    appends: list[tuple[str, dict[str, object], bytes | None, str]]) -> None:
    path = tmp_path_factory.mktemp("roundtrip")
    with Store(path) as store:
        written: list[Frame] = [store.append(topic, meta, content, stream)
                                for topic, meta, content, stream in appends]
        assert [f.seq for f in written] == list(range(1, len(appends) + 1))
        assert list(store.read()) == written
        for frame, (topic, meta, content, stream) in zip(written, appends, strict=True):
            assert (frame.topic, frame.meta, frame.stream) == (topic, meta, stream)
            assert store.get(frame.id) == frame
            if content is None:
                assert frame.hash is None
            else:
                assert frame.hash is not None and store.cas_get(frame.hash) == content
            assert list(store.read(topic=topic)) == [f for f in written if f.topic == topic]
            assert list(store.read(stream=stream)) == [f for f in written if f.stream == stream]
    with Store(path) as reopened:  # and the same after a rebuild from the stream files
        reopened.rebuild()
        assert list(reopened.read()) == written

"""Failure modes found in review: gc dying halfway, fork, a frame missing only its newline,
duplicate ids in a rebuild, seqs removed by gc, files vanishing under a sync, huge bounds,
and a subscription whose store keeps failing."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from ralph.store import FileStore, InvalidContentError, InvalidQueryError, Rule, Store, StoreError
from ralph.store import retention as retention_module
from ralph.store import subscribe as subscribe_module
from ralph.store.index import Index
from tests.store.helpers import stream_lines


def test_appends_after_a_gc_that_died_halfway_are_not_lost(
        store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Store(store_dir) as store, Store(store_dir) as other:
        for i in range(6):
            store.append("t", {"i": i}, stream=f"s{i % 2}")
        other.append("t", {"i": "other"}, stream="s0")  # `other` caches its descriptors
        real_rewrite = retention_module._rewrite_stream
        calls = []

        def fail_second(path: Path, seqs: set[int]) -> int:
            calls.append(path)
            if len(calls) == 2:
                raise StoreError("simulated failure on the second stream")
            return real_rewrite(path, seqs)

        monkeypatch.setattr(retention_module, "_rewrite_stream", fail_second)
        with pytest.raises(StoreError, match="simulated"):
            store.gc([Rule.parse("t=last:2")])
        monkeypatch.undo()
        a = store.append("t", {"i": "after-a"}, stream="s0")
        b = other.append("t", {"i": "after-b"}, stream="s0")
    on_disk = {line["seq"] for line in stream_lines(store_dir)}
    assert {a.seq, b.seq} <= on_disk
    with Store(store_dir) as fresh:
        seqs = [f.seq for f in fresh.read()]
        assert a.seq in seqs and b.seq in seqs and len(seqs) == len(set(seqs))


def test_a_store_refuses_to_work_across_fork(store: FileStore) -> None:
    store.append("t")
    pid = os.fork()
    if pid == 0:  # the child: every use must fail, and nothing may touch the parent's lock
        code = 1
        try:
            store.append("child")
        except StoreError as exc:
            code = 0 if "fork" in str(exc) else 2
        except BaseException:
            code = 3
        store.close()
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert store.append("parent").seq == 2
    assert [f.topic for f in store.read()] == ["t", "parent"]


def test_a_frame_missing_only_its_newline_counts_as_written(store_dir: Path) -> None:
    with Store(store_dir) as store:
        store.append("t", {"n": 1}, stream="a")
        store.append("t", {"n": 2}, stream="a")
    path = store_dir / "streams" / "a.jsonl"
    path.write_bytes(path.read_bytes()[:-1])  # the writer died before its final newline
    with Store(store_dir) as store:
        assert store.append("t", {"n": 3}, stream="a").seq == 3
        assert [f.meta["n"] for f in store.read()] == [1, 2, 3]
        assert store.errors() == []


def test_rebuild_sets_aside_a_duplicated_id(store: FileStore) -> None:
    store.append("t", stream="a")
    line = json.loads((store.path / "streams" / "a.jsonl").read_bytes())
    line.update(seq=99, stream="b")
    (store.path / "streams" / "b.jsonl").write_bytes(json.dumps(line).encode() + b"\n")
    store.sync()
    assert ["duplicate" in e.error for e in store.errors()] == [True]
    result = store.rebuild()
    assert result.frames == 1 and result.errors == 1
    for name in os.listdir(store.path):
        if name.startswith("index.sqlite"):
            (store.path / name).unlink()
    with Store(store.path) as reopened:
        assert len(list(reopened.read())) == 1
        assert len(reopened.errors()) == 1


def test_seqs_removed_by_gc_are_not_handed_out_after_a_recount(store_dir: Path) -> None:
    with Store(store_dir) as store:
        store.append("keep", stream="a")
        for _ in range(3):
            store.append("drop", stream="b")
        store.gc([Rule.parse("drop=last:0")])
    head = store_dir / "head"
    body = json.loads(head.read_bytes())
    body["boot"] = "before-a-reboot"
    head.write_bytes(json.dumps(body).encode().ljust(1023) + b"\n")
    with Store(store_dir) as store:
        frame = store.append("new", stream="a")
        assert frame.seq == 5
        assert [f.seq for f in store.read(after_seq=4)] == [5]


def test_a_stream_file_vanishing_under_a_sync_is_skipped(
        store: FileStore, monkeypatch: pytest.MonkeyPatch) -> None:
    store.append("t", stream="a")
    real_pending = Index._pending

    def with_a_ghost(self: Index, conn: object) -> list[tuple[str, Path, int, int, int]]:
        work = real_pending(self, conn)  # type: ignore[arg-type]
        return [("ghost", store.path / "streams" / "ghost.jsonl", 10, 1, 0), *work]

    monkeypatch.setattr(Index, "_pending", with_a_ghost)
    store.append("t", stream="a")
    assert [f.seq for f in store.read()] == [1, 2]


def test_bounds_too_large_for_the_index_are_bad_queries(store: FileStore) -> None:
    store.append("t")
    for call in (lambda: store.read(after_seq=2**63), lambda: store.read(limit=2**64),
                 lambda: store.last("t", 2**63), lambda: store.read(after_seq=-1),
                 lambda: store.subscribe(after_seq=2**70)):
        with pytest.raises(InvalidQueryError):
            call()


async def test_a_subscription_ends_with_the_error_when_the_store_keeps_failing(
        store: FileStore, monkeypatch: pytest.MonkeyPatch) -> None:
    store.append("t")
    monkeypatch.setattr(subscribe_module, "_MAX_FAILURES", 2)
    async with store.subscribe() as sub:
        assert (await anext(sub)).seq == 1

        def broken() -> int:
            raise StoreError("the index is locked")

        monkeypatch.setattr(store, "refresh", broken)
        store.append("t")
        async with asyncio.timeout(20):
            with pytest.raises(StoreError, match="locked"):
                await anext(sub)


def test_a_huge_seq_in_a_stream_file_is_a_parse_error(store_dir: Path) -> None:
    """A line claiming a seq beyond SQLite's INTEGER is recorded and skipped, not a crash."""
    with Store(store_dir) as store:
        first = store.append("a.b", stream="x")
    line = {"id": "03hag3jahbmwxelg8kfxunk5z", "seq": 2**64 - 1, "ts": first.ts,
            "topic": "a.b", "stream": "x", "meta": {}, "hash": None}
    with (store_dir / "streams" / "x.jsonl").open("ab") as handle:
        handle.write(json.dumps(line).encode() + b"\n")
    with Store(store_dir) as store:
        assert [f.seq for f in store.read()] == [1]
        assert [e.error for e in store.errors()] == [
            "seq is not an integer from 1 to 9223372036854775807"]
        assert store.append("a.b", stream="x").seq == 2
        store.rebuild()
        assert [f.seq for f in store.read()] == [1, 2]


def test_a_partial_line_the_head_does_not_know_is_closed_before_an_append(
        store_dir: Path) -> None:
    """A stream file copied while it was written ends mid-line, and the head names another
    stream: the next append to it must start on a fresh line, and be readable."""
    with Store(store_dir) as store:
        store.append("a.b", stream="x")
        store.append("a.b", stream="y")
    with (store_dir / "streams" / "x.jsonl").open("ab") as handle:
        handle.write(b'{"id":"03hag')
    with Store(store_dir) as store:
        frame = store.append("a.b", {"n": 3}, stream="x")
        assert store.get(frame.id).meta == {"n": 3}
        assert [f.seq for f in store.read()] == [1, 2, 3]
        assert [e.excerpt for e in store.errors()] == ['{"id":"03hag']


def test_text_content_without_a_utf8_form_is_refused(store: FileStore) -> None:
    with pytest.raises(InvalidContentError, match="surrogates"):
        store.append("a.b", content="bad \ud800")
    assert list(store.read()) == []


def test_a_stray_file_in_the_content_store_is_ignored(store: FileStore, store_dir: Path) -> None:
    frame = store.append("a.b", content=b"kept")
    (store_dir / "cas" / "sha256" / ".DS_Store").write_bytes(b"junk")
    assert store.stats()["content_objects"] == 1
    assert store.gc([Rule.parse("a.b=last:1")]).content_removed == 0
    assert frame.hash is not None and store.cas_get(frame.hash) == b"kept"

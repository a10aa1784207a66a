"""The writer keeps a bounded number of stream files open: a process appending to thousands
of streams over its life (a server of agent sessions, a stream each) keeps few descriptors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ralph.store import Store
from ralph.store.writer import MAX_OPEN_STREAMS


def open_stream_files(store_dir: Path) -> int:
    streams = str(store_dir / "streams")
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith(streams):
                count += 1
        except OSError:
            continue
    return count


@pytest.mark.parametrize("durability", ["never", "batch", "always"])
def test_many_streams_keep_few_files_open_and_lose_nothing(tmp_path: Path,
                                                          durability: str) -> None:
    store_dir = tmp_path / "store"
    streams = [f"sessions/s{n:04d}" for n in range(3 * MAX_OPEN_STREAMS)]
    with Store(store_dir, durability=durability) as store:  # type: ignore[arg-type]
        for round_ in range(2):  # the second round reopens files closed in the first
            for stream in streams:
                store.append("t.x", {"round": round_}, stream=stream)
                # With durability `batch` the group commit also holds duplicates of the open
                # ones while it syncs them: bounded all the same.
                assert open_stream_files(store_dir) <= 2 * MAX_OPEN_STREAMS
        store.append("t.x", {"round": 2}, stream=streams[-1])  # the most recent stays open
        store.flush()
        assert open_stream_files(store_dir) <= MAX_OPEN_STREAMS
    assert open_stream_files(store_dir) == 0
    with Store(store_dir) as store:
        for stream in streams:
            rounds = [frame.meta["round"] for frame in store.read(stream=stream)]
            assert rounds == ([0, 1, 2] if stream == streams[-1] else [0, 1])
        assert store.last_seq == 2 * len(streams) + 1


def test_a_stream_closed_with_unsynced_writes_is_synced_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[str] = []
    real = os.fdatasync

    def spy(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fdatasync", spy)
    store_dir = tmp_path / "store"
    # A group commit an hour away: only the eviction can have synced the first stream.
    with Store(store_dir, durability="batch", batch_interval_ms=3_600_000) as store:
        for n in range(MAX_OPEN_STREAMS + 1):
            store.append("t.x", {"n": n}, stream=f"sessions/s{n:04d}")
        first = str(store_dir / "streams" / "sessions" / "s0000.jsonl")
        assert synced == [first]  # the least recently used, closed to make room

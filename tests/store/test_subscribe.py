"""subscribe(): replay from the index, then live frames, with no gap and no duplicate."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from ralph.store import FileStore, Frame, Lag, Store, Subscription
from tests.store.helpers import kill_group, start_python


async def _take(sub: Subscription, count: int, timeout: float = 30) -> list[Frame]:
    frames: list[Frame] = []
    async with asyncio.timeout(timeout):
        async for frame in sub:
            frames.append(frame)
            if len(frames) == count:
                break
    return frames


async def test_replay_then_live(store: FileStore) -> None:
    for i in range(5):
        store.append("t", {"i": i})
    async with store.subscribe() as sub:
        assert [f.seq for f in await _take(sub, 5)] == [1, 2, 3, 4, 5]
        for i in range(5, 8):
            store.append("t", {"i": i})
        assert [f.meta["i"] for f in await _take(sub, 3)] == [5, 6, 7]


async def test_after_seq_and_filters(store: FileStore) -> None:
    for i in range(6):
        store.append("ralph.a.note" if i % 2 else "ralph.b.iteration", {"i": i},
                     stream=f"s{i % 3}")
    async with store.subscribe(after_seq=3) as sub:
        assert [f.seq for f in await _take(sub, 3)] == [4, 5, 6]
    async with store.subscribe(topic="ralph.a.*") as sub:
        assert [f.meta["i"] for f in await _take(sub, 3)] == [1, 3, 5]
        store.append("ralph.b.iteration", {"i": 6})
        store.append("ralph.a.note", {"i": 7})
        assert [f.meta["i"] for f in await _take(sub, 1)] == [7]
    async with store.subscribe(stream="s0") as sub:
        assert [f.meta["i"] for f in await _take(sub, 2)] == [0, 3]


async def test_boundary_with_a_concurrent_writer_thread(store: FileStore) -> None:
    total = 3000
    for i in range(500):
        store.append("t", {"i": i}, stream=f"s{i % 3}")
    started = threading.Event()

    def write() -> None:
        for i in range(500, total):
            store.append("t", {"i": i}, stream=f"s{i % 3}")
            if i == 600:
                started.set()

    writer = threading.Thread(target=write)
    writer.start()
    await asyncio.to_thread(started.wait, 30)
    try:
        async with store.subscribe() as sub:  # starts while the writer is mid-way
            frames = await _take(sub, total)
    finally:
        await asyncio.to_thread(writer.join, 60)
    assert [f.seq for f in frames] == list(range(1, total + 1))
    assert [f.meta["i"] for f in frames] == list(range(total))


_WRITER = """
import sys, time
from ralph.store import Store
path, count = sys.argv[1], int(sys.argv[2])
with Store(path, durability="never") as store:
    for i in range(count):
        store.append("x.w", {"i": i}, stream="w%d" % (i % 4))
        if i % 100 == 0:
            time.sleep(0.005)
"""


async def test_frames_from_another_process(store: FileStore) -> None:
    for i in range(100):
        store.append("x.here", {"i": i})
    proc = start_python(_WRITER, str(store.path), "2000")
    try:
        async with store.subscribe(topic="x.*", after_seq=50) as sub:
            frames = await _take(sub, 2050, timeout=60)
    finally:
        await asyncio.to_thread(kill_group, proc)
    assert [f.seq for f in frames] == list(range(51, 2101))
    assert [f.meta["i"] for f in frames if f.topic == "x.w"] == list(range(2000))


async def test_two_stores_in_two_processes_live_only(store: FileStore) -> None:
    """A subscriber that starts at the current end sees only what comes after."""
    store.append("old")
    async with store.subscribe(after_seq=store.last_seq) as sub:
        proc = start_python(_WRITER, str(store.path), "50")
        try:
            frames = await _take(sub, 50)
        finally:
            await asyncio.to_thread(kill_group, proc)
    assert [f.meta["i"] for f in frames] == list(range(50))


async def test_a_slow_subscriber_is_told_and_resumes_from_the_index(store_dir: Path) -> None:
    lags: list[Lag] = []
    with Store(store_dir, max_lag=20) as store:
        async with store.subscribe(on_lag=lags.append) as sub:
            first = store.append("t", {"i": 0})
            assert (await _take(sub, 1))[0] == first  # live now
            for i in range(1, 500):
                store.append("t", {"i": i})
                if i % 50 == 0:
                    await asyncio.sleep(0.01)  # let the hub push while nobody reads
            frames = await _take(sub, 499)
        assert [f.meta["i"] for f in frames] == list(range(1, 500))
        assert lags and sub.lags == len(lags)
        assert all(lag.dropped <= 20 for lag in lags)


async def test_closing_ends_iteration(store: FileStore) -> None:
    sub = store.subscribe()
    store.append("t")
    assert len(await _take(sub, 1)) == 1

    async def close_soon() -> None:
        await asyncio.sleep(0.05)
        sub.close()

    closer = asyncio.create_task(close_soon())
    async with asyncio.timeout(10):
        rest = [f async for f in sub]
    await closer
    assert rest == []


async def test_closing_the_store_ends_its_subscriptions(store_dir: Path) -> None:
    store = Store(store_dir)
    sub = store.subscribe()
    store.append("t")
    assert len(await _take(sub, 1)) == 1
    waiter = asyncio.create_task(_take(sub, 1))
    await asyncio.sleep(0.05)
    store.close()
    async with asyncio.timeout(10):
        assert await waiter == []


async def test_subscriptions_of_one_loop_share_a_hub(store: FileStore) -> None:
    store.append("t")
    async with store.subscribe() as a, store.subscribe() as b:
        await _take(a, 1)
        await _take(b, 1)
        assert len(store._hubs) == 1
    assert store._hubs == {}

"""The iteration history (ralph.loop.history): pages newest first keyed by store seq, equal to
the whole history read at once whatever the density of other frames, stable while frames
are appended, bounded work for a deep page, and a total kept up to date."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ralph.loop.history import MAX_LIMIT, TOPIC, IterationHistory, iteration_page, newest_before
from ralph.store import Frame, Rule, Store


class Counting:
    """A store that counts the frames its reads fetch (a read with a limit fetches at most
    that many; the read is taken whole here, so the count is what was fetched)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.frames = 0

    @property
    def last_seq(self) -> int:
        return self.store.last_seq

    def last(self, topic: str, n: int = 1) -> list[Frame]:
        found = self.store.last(topic, n)
        self.frames += len(found)
        return found

    def read(self, **query: Any) -> Iterator[Frame]:
        found = list(self.store.read(**query))
        self.frames += len(found)
        return iter(found)


def record(store: Store, iteration: int, noise: int, *, run: str = "run_1") -> Frame:
    """One iteration's frames: started, `noise` agent outputs, finished (returned)."""
    stream = f"runs/{run}"
    store.append("iteration.started", {"run_id": run, "iteration": iteration}, stream=stream)
    for _ in range(noise):
        store.append("agent.output", {"run_id": run, "iteration": iteration, "kind": "text",
                                      "content": "x"}, stream=stream)
    return store.append(TOPIC, {"run_id": run, "iteration": iteration, "agent": "fake"},
                        stream=stream)


def fill(store: Store, noises: list[int]) -> list[Frame]:
    """Iterations with these many noise frames each (and a session's frames between some);
    their finished frames, oldest first."""
    finished = []
    for number, noise in enumerate(noises, 1):
        if number % 7 == 0:
            store.append("session.started", {}, stream="sessions/ses_1")
        finished.append(record(store, number, noise))
    return finished


def walk(history: IterationHistory, limit: int) -> list[list[int]]:
    """Every page's seqs, following next_before from the newest."""
    pages: list[list[int]] = []
    before: int | None = None
    while True:
        page = history.page(before, limit)
        pages.append([frame.seq for frame in page.frames])
        if page.next_before is None:
            return pages
        assert page.next_before == page.frames[-1].seq
        before = page.next_before
        assert len(pages) < 10_000


@pytest.fixture
def fast_store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "store", durability="never") as opened:
        yield opened


@pytest.mark.parametrize("shape", ["none", "random", "gap", "dense_after_gap"])
@pytest.mark.parametrize("limit", [1, 3, 50])
def test_pages_are_the_history_newest_first(fast_store: Store, shape: str,
                                            limit: int) -> None:
    rng = random.Random(f"{shape}-{limit}")
    noises = {"none": [0] * 120,
              "random": [rng.randrange(0, 40) for _ in range(120)],
              "gap": [0] * 60 + [5000] + [0] * 59,
              "dense_after_gap": [3000] + [0] * 150}[shape]
    finished = fill(fast_store, noises)
    history = IterationHistory(fast_store)
    pages = walk(history, limit)
    assert [seq for page in pages for seq in page] == [f.seq for f in reversed(finished)]
    assert all(len(page) == limit for page in pages[:-1]) and 1 <= len(pages[-1]) <= limit
    assert history.page(limit=limit).total == len(finished)


def test_an_empty_or_missing_store(tmp_path: Path) -> None:
    with Store(tmp_path / "none", create=False) as missing:
        page = iteration_page(missing)
        assert (page.frames, page.next_before, page.total) == ([], None, 0)
        assert iteration_page(missing, before=5).frames == []
    assert not (tmp_path / "none").exists()


def test_bounds_and_limits(fast_store: Store) -> None:
    finished = fill(fast_store, [2] * 10)
    history = IterationHistory(fast_store)
    assert [f.seq for f in history.page(before=finished[3].seq, limit=10).frames] == [
        f.seq for f in reversed(finished[:3])]
    assert history.page(before=finished[3].seq + 1, limit=1).frames == [finished[3]]
    assert history.page(before=10**9, limit=2).frames == finished[:-3:-1]
    for before in (0, 1):
        assert history.page(before=before).frames == []
    page = history.page(limit=10)
    assert len(page.frames) == 10 and page.next_before is None  # exactly all: no next page
    for bad in (0, MAX_LIMIT + 1):
        with pytest.raises(ValueError):
            history.page(limit=bad)
    with pytest.raises(ValueError):
        history.page(before=-1)


def test_paging_on_while_iterations_are_recorded(fast_store: Store) -> None:
    finished = fill(fast_store, [3] * 20)
    history = IterationHistory(fast_store)
    first = history.page(limit=8)
    assert first.total == 20
    later = [record(fast_store, 20 + n, 2, run="run_2") for n in range(1, 6)]
    second = history.page(first.next_before, 8)
    third = history.page(second.next_before, 8)
    seen = [f.seq for page in (first, second, third) for f in page.frames]
    assert seen == [f.seq for f in reversed(finished)] and third.next_before is None
    assert third.total == 25  # the total counts the new ones
    assert [f.seq for f in history.page(limit=5).frames] == [f.seq for f in reversed(later)]


def test_a_deep_page_of_ten_thousand_iterations_is_bounded_work(fast_store: Store) -> None:
    rng = random.Random(7)
    finished = fill(fast_store, [rng.choice((0, 1, 2, 30)) for _ in range(10_000)])
    counting = Counting(fast_store)
    history = IterationHistory(counting)  # type: ignore[arg-type]
    history.total()  # counted once (every frame's index entry)...
    assert counting.frames == 10_000 + 1
    counting.frames = 0
    assert history.total() == 10_000  # ...then only what came since
    assert counting.frames <= 2
    for before_index in (9_999, 5_000, 120, 3):
        counting.frames = 0
        before = finished[before_index].seq
        got = newest_before(counting, TOPIC, before, 51)  # type: ignore[arg-type]
        assert [f.seq for f in got] == [f.seq for f in finished[before_index - 1::-1][:51]]
        assert counting.frames <= 20 * 51, (before_index, counting.frames)
    counting.frames = 0
    page = history.page(limit=50)
    assert len(page.frames) == 50 and page.total == 10_000
    assert counting.frames <= 51 + 2 + 1


def test_the_total_is_counted_again_when_old_iterations_are_collected(
        fast_store: Store) -> None:
    fill(fast_store, [1] * 12)
    history = IterationHistory(fast_store)
    assert history.total() == 12
    fast_store.gc([Rule.parse(f"{TOPIC}=last:5")])
    assert history.total() == 5
    assert len(history.page(limit=50).frames) == 5

"""A topic range (`ralph.*`) is read topic by topic when its frames are few, by seq
otherwise: both give the same frames in the same order, page after page."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ralph.store import Store, index


@pytest.mark.parametrize("few", [0, 1_000_000])
def test_a_topic_range_reads_the_same_whichever_way(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    few: int) -> None:
    rng = random.Random(5)
    topics = ["ralph.a.note", "ralph.b.note", "ralph.b.other", "agent.output", "ralphx.y",
              "ralph.c"]
    with Store(tmp_path / "store") as store:
        written = [store.append(rng.choice(topics), {"n": n}).seq for n in range(700)]
        assert len(written) == 700
        monkeypatch.setattr(index, "_FEW", few)
        for pattern in ("ralph.*", "ralph.b.*", "agent.*", "nothing.*"):
            value = pattern[:-1]
            expected = [f.seq for f in store.read() if f.topic.startswith(value)]
            assert [f.seq for f in store.read(topic=pattern)] == expected
            assert [f.seq for f in store.read(topic=pattern, after_seq=300)] == [
                s for s in expected if s > 300]
            assert [f.seq for f in store.read(topic=pattern, limit=7)] == expected[:7]
            if expected:
                assert [f.seq for f in store.last(pattern, 5)] == expected[-5:]

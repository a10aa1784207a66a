"""Retention policies and gc: only what a policy names goes; the rest stays readable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ralph.store import FileStore, InvalidPolicyError, Policy, Rule, Store
from ralph.store.frame import parse_ts_ms
from ralph.store.retention import collect_garbage, load_rules, rule_for
from tests.store.helpers import stream_lines


def test_policy_and_rule_parsing() -> None:
    assert Policy.parse("last:3") == Policy("last", 3)
    assert Policy.parse("time:60000") == Policy("time", 60000)
    assert str(Policy.parse("last:0")) == "last:0"
    for bad in ("forever", "last:", "last:x", "time:-1", "size:3", "", "last:\u00b2",
                "last:\u0663", "last:9223372036854775808", "time:99999999999999999999"):
        with pytest.raises(InvalidPolicyError):
            Policy.parse(bad)
    assert Rule.parse("agent.output=last:10") == Rule("agent.output", Policy("last", 10))
    for bad in ("agent.output", "1bad=last:1", "a.*.b=last:1"):
        with pytest.raises(InvalidPolicyError):
            Rule.parse(bad)


def test_the_most_specific_rule_wins() -> None:
    rules = [Rule.parse("*=last:100"), Rule.parse("ralph.*=last:50"),
             Rule.parse("ralph.x.note=last:5")]
    assert rule_for("ralph.x.note", rules) == rules[2]
    assert rule_for("ralph.y.note", rules) == rules[1]
    assert rule_for("other", rules) == rules[0]
    assert rule_for("other", rules[1:]) is None


def test_last_n_keeps_the_newest_frames_of_each_topic(store: FileStore) -> None:
    for i in range(10):
        store.append("agent.output", {"i": i}, content=f"out {i}", stream=f"s{i % 2}")
        store.append("keep.me", {"i": i}, stream=f"s{i % 2}")
    report = store.gc([Rule.parse("agent.output=last:3")])
    assert report.frames_removed == 7 and report.streams_rewritten == 2
    assert report.content_removed == 7 and report.bytes_freed > 0 and not report.dry_run
    assert [f.meta["i"] for f in store.read(topic="agent.output")] == [7, 8, 9]
    assert [f.meta["i"] for f in store.read(topic="keep.me")] == list(range(10))
    for frame in store.read(topic="agent.output"):
        assert store.cas_get(frame.hash or "") == f"out {frame.meta['i']}".encode()
    assert len(stream_lines(store.path)) == 13
    nxt = store.append("after.gc")
    assert nxt.seq == 21  # seq goes on; the removed seqs are not reused
    assert store.get(nxt.id) == nxt


def test_time_policy(store: FileStore) -> None:
    frames = [store.append("ephemeral", {"i": i}) for i in range(5)]
    cutoff = parse_ts_ms(frames[-1].ts)
    report = collect_garbage(store, [Rule.parse("ephemeral=time:1000")], now_ms=cutoff + 500)
    assert report.frames_removed == 0
    report = collect_garbage(store, [Rule.parse("ephemeral=time:1000")],
                             now_ms=cutoff + 1_000_000)
    assert report.frames_removed == 5
    assert list(store.read()) == []


def test_dry_run_changes_nothing(store: FileStore) -> None:
    for i in range(6):
        store.append("t", {"i": i}, content=f"c{i}")
    before = [f.to_dict() for f in store.read()]
    report = store.gc([Rule.parse("t=last:2")], dry_run=True)
    assert (report.frames_removed, report.content_removed, report.dry_run) == (4, 4, True)
    assert [f.to_dict() for f in store.read()] == before
    assert store.stats()["content_objects"] == 6


def test_rules_from_retention_json(store: FileStore) -> None:
    for i in range(4):
        store.append("ralph.s.iteration", {"i": i})
    (store.path / "retention.json").write_text(json.dumps({"ralph.*": "last:1"}))
    assert load_rules(store.path) == [Rule.parse("ralph.*=last:1")]
    assert store.gc().frames_removed == 3
    (store.path / "retention.json").write_text("[1]")
    with pytest.raises(InvalidPolicyError):
        store.gc()
    (store.path / "retention.json").write_text("{nope")
    with pytest.raises(InvalidPolicyError):
        store.gc()


def test_gc_keeps_lines_that_are_not_frames_and_orphan_content_goes(store: FileStore) -> None:
    store.append("t", {"i": 0}, stream="a")
    with (store.path / "streams" / "a.jsonl").open("ab") as handle:
        handle.write(b"not a frame\n")
    store.append("t", {"i": 1}, stream="a")
    orphan = store._cas.put(b"nobody refers to me")
    report = store.gc([Rule.parse("t=last:1")])
    assert report.frames_removed == 1 and report.content_removed == 1
    assert not store._cas.exists(orphan)
    assert b"not a frame\n" in (store.path / "streams" / "a.jsonl").read_bytes()
    assert [e.excerpt for e in store.errors()] == ["not a frame"]
    assert [f.meta["i"] for f in store.read()] == [1]


def test_a_stream_emptied_by_gc_is_removed(store: FileStore) -> None:
    store.append("gone", stream="only")
    store.append("stay", stream="other")
    store.gc([Rule.parse("gone=last:0")])
    assert not (store.path / "streams" / "only.jsonl").exists()
    assert [f.topic for f in store.read()] == ["stay"]
    assert store.append("gone", stream="only").seq == 3


def test_other_processes_see_a_consistent_store_after_gc(store_dir: Path) -> None:
    with Store(store_dir) as writer, Store(store_dir) as reader:
        for i in range(20):
            writer.append("t", {"i": i}, stream="s")
        assert len(list(reader.read())) == 20
        writer.gc([Rule.parse("t=last:5")])
        assert [f.meta["i"] for f in reader.read()] == list(range(15, 20))
        reader.append("t", {"i": 20}, stream="s")  # the reader's cached descriptors were reset
        assert [f.meta["i"] for f in writer.read()] == list(range(15, 21))
    assert [line["seq"] for line in stream_lines(store_dir)] == list(range(16, 22))

"""gc --dry-run reports the bytes a real gc would free: stream lines and content alike."""

from __future__ import annotations

from pathlib import Path

from ralph.store import FileStore, Rule, Store


def disk_bytes(store_dir: Path) -> int:
    return sum(p.stat().st_size for sub in ("streams", "cas")
               for p in (store_dir / sub).rglob("*") if p.is_file())


def test_the_dry_run_counts_what_gc_frees(store: FileStore) -> None:
    for i in range(3):  # the oldest: this stream goes as a whole
        store.append("agent.output", {"i": i}, stream="only-expired")
    for i in range(8):
        store.append("agent.output", {"i": i}, content=f"output {i} " * 20, stream=f"s{i % 2}")
        store.append("keep.me", {"i": i}, stream=f"s{i % 2}")
    rules = [Rule.parse("agent.output=last:2")]
    before = disk_bytes(store.path)
    planned = store.gc(rules, dry_run=True)
    assert disk_bytes(store.path) == before  # nothing removed
    assert planned.bytes_freed > planned.content_removed * 100  # lines and content
    done = store.gc(rules)
    assert (done.frames_removed, done.streams_rewritten, done.content_removed) == (
        planned.frames_removed, planned.streams_rewritten, planned.content_removed)
    assert planned.bytes_freed == done.bytes_freed == before - disk_bytes(store.path)
    assert not (store.path / "streams" / "only-expired.jsonl").exists()


def test_lines_that_are_not_frames_stay_and_a_last_one_gets_its_newline(store_dir: Path) -> None:
    with Store(store_dir) as store:
        for i in range(4):
            store.append("t", {"i": i})
    stream = store_dir / "streams" / "default.jsonl"
    with stream.open("ab") as handle:
        handle.write(b"not a frame, no newline")
    with Store(store_dir) as store:
        planned = store.gc([Rule.parse("t=last:1")], dry_run=True)
        size = stream.stat().st_size
        done = store.gc([Rule.parse("t=last:1")])
    assert planned.frames_removed == done.frames_removed == 3
    assert planned.bytes_freed == done.bytes_freed == size - stream.stat().st_size
    assert stream.read_bytes().endswith(b"not a frame, no newline\n")


def test_nothing_to_free(store: FileStore) -> None:
    store.append("t", {}, content="kept")
    report = store.gc([Rule.parse("t=last:5")], dry_run=True)
    assert (report.frames_removed, report.bytes_freed, report.dry_run) == (0, 0, True)

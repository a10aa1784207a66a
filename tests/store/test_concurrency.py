"""Several writers at once, and writers killed mid-append: nothing lost, nothing interleaved."""

from __future__ import annotations

import json
import logging
import random
import signal
import threading
import time
from pathlib import Path

import pytest

from ralph.store import FileStore, Store
from tests.store.helpers import kill_group, run_python, start_python, stream_lines

_WRITER = """
import sys
from ralph.store import Store
path, name, count, streams = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
with Store(path, durability="never") as store:
    for i in range(count):
        store.append("w." + name, {"writer": name, "i": i}, stream="s%d" % (i % streams))
"""


def test_processes_appending_at_once_lose_and_interleave_nothing(store_dir: Path) -> None:
    Store(store_dir).close()
    writers, count = 4, 1500
    procs = [start_python(_WRITER, str(store_dir), f"p{n}", str(count), str(n + 1))
             for n in range(writers)]
    for proc in procs:
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    lines = stream_lines(store_dir)
    assert len(lines) == writers * count  # every line on disk parses: nothing interleaved
    with Store(store_dir) as store:
        frames = list(store.read())
        assert [f.seq for f in frames] == list(range(1, writers * count + 1))
        assert store.errors() == []
        for n in range(writers):
            mine = [f.meta["i"] for f in frames if f.meta["writer"] == f"p{n}"]
            assert mine == list(range(count))
        assert len({f.id for f in frames}) == len(frames)


def test_threads_share_one_store(store: FileStore) -> None:
    def work(name: str) -> None:
        for i in range(400):
            store.append("t", {"thread": name, "i": i}, stream=f"s{i % 2}")

    threads = [threading.Thread(target=work, args=(f"t{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    frames = list(store.read())
    assert [f.seq for f in frames] == list(range(1, 1601))
    assert len(stream_lines(store.path)) == 1600


_BIG_WRITER = """
import sys
from ralph.store import Store
path = sys.argv[1]
big = "x" * (1024 * 1024)
with Store(path, durability="never") as store:
    print("ready", flush=True)
    i = 0
    while True:
        store.append("big", {"i": i, "pad": big if i % 2 else ""}, stream="s%d" % (i % 3))
        i += 1
"""


def _check_every_complete_frame_is_readable(store_dir: Path) -> int:
    """Reopen; compare the index with the stream files; return how many torn lines exist."""
    on_disk = stream_lines(store_dir)
    with Store(store_dir) as store:
        frames = list(store.read())
        seqs = [f.seq for f in frames]
        assert seqs == list(range(1, len(seqs) + 1)), "seq has a gap or a duplicate"
        assert sorted(line["seq"] for line in on_disk) == seqs
        torn = 0
        for path in (store_dir / "streams").rglob("*.jsonl"):
            data = path.read_bytes()
            assert data == b"" or data.endswith(b"\n"), "a torn tail was left open"
            for line in data.split(b"\n")[:-1]:
                try:
                    json.loads(line)
                except ValueError:
                    torn += 1
        assert len(store.errors()) == torn
        return torn


def test_writer_killed_in_a_loop(store_dir: Path) -> None:
    """SIGKILL a writer of large frames at random moments: a kill inside write() tears a line.

    Rounds go on until a torn line has been seen and handled (a kill lands mid-write about
    every other round), with a bound so that the test always ends.
    """
    Store(store_dir).close()
    rng = random.Random(7)
    torn = rounds = 0
    while rounds < 6 or (torn == 0 and rounds < 40):
        rounds += 1
        proc = start_python(_BIG_WRITER, str(store_dir))
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.02, 0.08))
        kill_group(proc, signal.SIGKILL)
        torn = _check_every_complete_frame_is_readable(store_dir)
    assert torn >= 1, f"no kill landed mid-write in {rounds} rounds"
    with Store(store_dir) as store:
        before = store.last_seq
        frame = store.append("after", {"ok": True})
        assert frame.seq == before + 1


def _cut_last_frame(store_dir: Path, stream: str, keep: int) -> bytes:
    path = store_dir / "streams" / f"{stream}.jsonl"
    data = path.read_bytes()
    start = data.rstrip(b"\n").rfind(b"\n") + 1
    path.write_bytes(data[: start + keep])
    return data[start:]


def test_torn_tail_is_detected_on_open_recorded_and_closed(store_dir: Path) -> None:
    with Store(store_dir) as store:
        for i in range(5):
            store.append("t", {"i": i}, stream="a")
        store.append("t", {"i": 5, "pad": "y" * 300}, stream="b")
    # Simulate a writer killed mid-line: the head says frame 6 is pending in b; half is there.
    cut = _cut_last_frame(store_dir, "b", 40)
    with Store(store_dir) as store:
        assert store.last_seq == 5
        errors = store.errors()
        assert len(errors) == 1 and errors[0].stream == "b" and errors[0].byte_offset == 0
        assert errors[0].excerpt == cut[:40].decode()
        assert [f.seq for f in store.read()] == [1, 2, 3, 4, 5]
        frame = store.append("t", {"i": "next"}, stream="b")
        assert frame.seq == 6  # the torn frame's seq was never committed: no gap
    raw = (store_dir / "streams" / "b.jsonl").read_bytes()
    assert raw.startswith(cut[:40] + b"\n")  # the next frame starts on a fresh line
    with Store(store_dir) as store:
        assert [f.seq for f in store.read()] == [1, 2, 3, 4, 5, 6]
        assert len(store.errors()) == 1


def test_torn_tail_without_a_head_is_found_by_a_full_scan(store_dir: Path) -> None:
    with Store(store_dir) as store:
        for i in range(4):
            store.append("t", {"i": i}, stream=f"s{i % 2}")
    (store_dir / "head").unlink()
    with (store_dir / "streams" / "s0.jsonl").open("ab") as handle:
        handle.write(b'{"id":"torn')
    with Store(store_dir) as store:
        assert store.last_seq == 4
        assert [e.excerpt for e in store.errors()] == ['{"id":"torn']
        assert store.append("t").seq == 5


def test_head_from_another_boot_is_not_trusted(store_dir: Path) -> None:
    with Store(store_dir) as store:
        for _ in range(3):
            store.append("t")
    head = store_dir / "head"
    body = json.loads(head.read_bytes())
    body.update(seq=99, boot="another-boot")
    head.write_bytes(json.dumps(body).encode().ljust(1023) + b"\n")
    with Store(store_dir) as store:
        assert store.append("t").seq == 4


def test_a_failed_intent_does_not_leave_a_gap(store_dir: Path) -> None:
    with Store(store_dir) as store:
        store.append("t", stream="a")
        store.append("t", stream="a")
    # A writer recorded its intent for frame 3 and died before writing any of it.
    cut = _cut_last_frame(store_dir, "a", 0)
    assert b'"seq":2' in cut
    with Store(store_dir) as store:
        assert store.last_seq == 1
        assert store.append("t", stream="a").seq == 2
        assert store.errors() == []


def test_another_process_sees_appends_made_here(store: FileStore) -> None:
    store.append("x", {"n": 1})
    store.flush()
    result = run_python("""
        import sys
        from ralph.store import Store
        with Store(sys.argv[1]) as store:
            print([f.meta["n"] for f in store.read()])
            store.append("x", {"n": 2})
    """, str(store.path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[1]"
    assert [f.meta["n"] for f in store.read()] == [1, 2]
    assert store.append("x", {"n": 3}).seq == 3


def test_bytes_written_behind_the_last_frame_without_the_lock(
        store_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    with Store(store_dir) as store:
        store.append("t", stream="a")
    with (store_dir / "streams" / "a.jsonl").open("ab") as handle:
        handle.write(b"junk written by hand\n")
    with caplog.at_level(logging.WARNING, logger="ralph.store"), Store(store_dir) as store:
        assert store.append("t", stream="a").seq == 2
        assert [e.excerpt for e in store.errors()] == ["junk written by hand"]
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "shorter" not in messages and "recounting" not in messages


def test_a_head_pointing_at_something_else_is_recounted(
        store_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    with Store(store_dir) as store:
        for _ in range(3):
            store.append("t", stream="a")
    path = store_dir / "streams" / "a.jsonl"
    lines = path.read_bytes().split(b"\n")
    path.write_bytes(b"\n".join([lines[0], lines[2], lines[1], b""]))  # reordered by hand
    with caplog.at_level(logging.WARNING, logger="ralph.store"), Store(store_dir) as store:
        assert store.append("t", stream="a").seq == 4
    assert any("does not hold frame 3" in r.getMessage() for r in caplog.records)

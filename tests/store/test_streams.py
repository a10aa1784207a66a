"""Stream files: paths, listing, and finding the last seq from a file's tail."""

from __future__ import annotations

from pathlib import Path

import orjson

from ralph.store.frame import encode_frame, format_ts
from ralph.store.ids import IdGenerator
from ralph.store.streams import last_seq_in, list_streams, stream_path

_ids = IdGenerator()


def _line(seq: int, pad: int = 0) -> bytes:
    frame_id, ms = _ids.next()
    return encode_frame(frame_id, seq, format_ts(ms), "t", "s", orjson.dumps({"p": "x" * pad}),
                        None)


def test_paths_and_listing(tmp_path: Path) -> None:
    for name in ("default", "runs/run_1", "runs/run_2", "sessions/a/b"):
        path = stream_path(tmp_path, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
    (tmp_path / ".hidden.jsonl").write_bytes(b"")
    (tmp_path / "runs" / "notes.txt").write_bytes(b"")
    assert [name for name, _ in list_streams(tmp_path)] == [
        "default", "runs/run_1", "runs/run_2", "sessions/a/b"]
    assert list(list_streams(tmp_path / "missing")) == []


def test_last_seq_in_a_tail(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"")
    assert last_seq_in(path, "s") is None
    path.write_bytes(_line(1) + _line(2))
    assert last_seq_in(path, "s") == 2
    path.write_bytes(_line(1) + _line(2) + b'{"torn')  # a torn tail is passed over
    assert last_seq_in(path, "s") == 2
    path.write_bytes(_line(1) + b"junk\n")  # so is a line that is not a frame
    assert last_seq_in(path, "s") == 1
    path.write_bytes(b"junk\n" + b"more junk\n")
    assert last_seq_in(path, "s") is None


def test_last_seq_across_chunks(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    big = _line(2, pad=200_000)  # longer than a tail chunk
    path.write_bytes(_line(1) + big + b"x" * 150_000)  # and a torn tail longer than a chunk
    assert last_seq_in(path, "s") == 2
    path.write_bytes(_line(1, pad=100_000) + b"junk\n" * 30_000)
    assert last_seq_in(path, "s") == 1

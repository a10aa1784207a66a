"""A write that fails (disk full) raises StoreFullError and leaves nothing half-written."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from ralph.store import FileStore, Store, StoreFullError, StoreWriteError
from ralph.store import cas as cas_module
from tests.store.helpers import stream_lines


def test_disk_full_mid_line_is_rolled_back(store: FileStore,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    store.append("t", {"i": 0}, stream="s")
    real_write = os.write

    def half_then_full(fd: int, data: bytes) -> int:
        if not real_write(fd, bytes(data[: len(data) // 2])):
            return 0
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_full)  # the short write, then the error
    with pytest.raises(StoreFullError, match="disk full"):
        store.append("t", {"i": 1}, stream="s")
    monkeypatch.undo()
    raw = (store.path / "streams" / "s.jsonl").read_bytes()
    assert raw.count(b"\n") == 1 and raw.endswith(b"\n")  # the half line was cut off
    assert [f.meta["i"] for f in store.read()] == [0]
    assert store.errors() == []
    assert store.append("t", {"i": 2}, stream="s").seq == 2  # no gap
    with Store(store.path) as reopened:
        assert [f.seq for f in reopened.read()] == [1, 2]


def test_a_real_enospc_from_dev_full(store: FileStore) -> None:
    store.append("t", {"ok": True}, stream="fine")
    full = store.path / "streams" / "full.jsonl"
    full.symlink_to("/dev/full")
    with pytest.raises(StoreFullError):
        store.append("t", {"lost": True}, stream="full")
    assert [f.meta for f in store.read()] == [{"ok": True}]
    full.unlink()
    assert store.append("t", {"ok": 2}, stream="fine").seq == 2
    assert [line["seq"] for line in stream_lines(store.path)] == [1, 2]


def test_content_write_failure_appends_nothing(store: FileStore,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    def no_space(fd: int, data: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cas_module, "write_all", no_space)
    with pytest.raises(StoreFullError, match="content"):
        store.append("t", content="big")
    monkeypatch.undo()
    assert list(store.read()) == []
    assert list((store.path / "cas" / "tmp").iterdir()) == []
    assert store.append("t", content="ok").seq == 1


def test_other_io_errors_are_store_errors(store: FileStore,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(fd: int, data: bytes) -> int:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "write", broken)
    with pytest.raises(StoreWriteError, match="I/O error"):
        store.append("t")


def test_unwritable_stream_directory(store: FileStore) -> None:
    (store.path / "streams" / "blocked").write_text("a file where a directory should be")
    with pytest.raises(Exception, match="cannot write stream blocked/x") as info:
        store.append("t", stream="blocked/x")
    assert type(info.value).__name__ == "StoreNotWritableError"
    assert store.append("t").seq == 1


def test_store_dir_on_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    with pytest.raises(Exception, match="cannot create the store") as info:
        Store(tmp_path / "f")
    assert type(info.value).__name__ == "StoreNotWritableError"


def test_a_short_write_is_finished(store: FileStore, monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = os.write
    calls = []

    def short_first(fd: int, data: bytes) -> int:
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data[:10]))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", short_first)
    frame = store.append("t", {"x": 1}, stream="s")
    monkeypatch.undo()
    assert len(calls) == 2
    assert store.get(frame.id) == frame
    assert len(stream_lines(store.path)) == 1

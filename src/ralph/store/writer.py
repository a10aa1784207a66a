"""The append path: a store-wide lock, a gapless seq, one complete line per frame.

Appends from any number of processes are serialised by `flock` on the head file. The head
records the last seq handed out; before writing frame K to stream T at offset O, a writer
records the intent (K, T, O) in the head, then writes the line. The next writer can therefore
tell, from the head alone, whether frame K reached its stream: if the line at O in T is frame
K it was committed, if T ends at O it never began, and if T holds part of a line the writer
died mid-line (a torn tail), which is closed with a newline so the next frame starts on a fresh
line and the torn bytes are recorded as a parse error by the index. In the common case the head
still holds the bytes this process wrote last, and none of that checking is needed.

The head also carries the boot id: after a reboot (a power loss may have dropped frames that
were never fsynced) the head is not trusted and the last seq is recomputed from the tails of
every stream file.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import orjson

from ralph.store.cas import ContentStore
from ralph.store.errors import StoreError
from ralph.store.frame import LineError, decode_line, encode_frame, format_ts
from ralph.store.fsio import write_all, write_error
from ralph.store.ids import IdGenerator
from ralph.store.streams import ends_torn, last_seq_in, list_streams, stream_path

log = logging.getLogger("ralph.store")

Durability = Literal["always", "batch", "never"]
DURABILITY_MODES: tuple[Durability, ...] = ("always", "batch", "never")
HEAD_SIZE = 1024
_HEAD_VERSION = 1


def _read_boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


BOOT_ID = _read_boot_id()


@dataclass(frozen=True)
class Head:
    """The decoded head: `seq` is the last seq handed out; `pending` its unconfirmed place."""

    seq: int
    gen: int
    boot: str
    pending: tuple[str, int] | None

    def encode(self) -> bytes:
        body: dict[str, object] = {"v": _HEAD_VERSION, "seq": self.seq, "gen": self.gen,
                                   "boot": self.boot}
        if self.pending is not None:
            body["stream"], body["offset"] = self.pending
        raw = orjson.dumps(body)
        return raw + b" " * (HEAD_SIZE - 1 - len(raw)) + b"\n"

    @classmethod
    def decode(cls, raw: bytes) -> Head | None:
        try:
            body = orjson.loads(raw)
            if body.get("v") != _HEAD_VERSION:
                return None
            pending = (str(body["stream"]), int(body["offset"])) if "stream" in body else None
            return cls(int(body["seq"]), int(body["gen"]), str(body["boot"]), pending)
        except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError):
            return None


_PENDING_HEAD = b'{"v":%d,"seq":%%d,"gen":%%d,"boot":"%s","stream":"%%s","offset":%%d}' % (
    _HEAD_VERSION, BOOT_ID.encode())


def _pending_head(seq: int, gen: int, stream: str, offset: int) -> bytes:
    """Head.encode() for a pending frame, formatted directly (the append path's version)."""
    return (_PENDING_HEAD % (seq, gen, stream.encode(), offset)).ljust(HEAD_SIZE - 1) + b"\n"


@dataclass(frozen=True)
class Appended:
    """What the writer hands back: the frame's fields, already on disk."""

    id: str
    seq: int
    ts: str
    stream: str
    offset: int


class Writer:
    """Owns the head file, the cached stream descriptors and the group-commit thread."""

    def __init__(self, root: Path, cas: ContentStore, durability: Durability,
                 batch_interval_ms: int) -> None:
        self.root = root
        self.streams_root = root / "streams"
        self.head_path = root / "head"
        self.durability = durability
        self.batch_interval = batch_interval_ms / 1000
        self.repairs = 0  # torn tails closed by this writer, for stats and tests
        self._cas = cas
        self._mutex = threading.Lock()
        self._ids = IdGenerator()
        try:
            self._head_fd = os.open(self.head_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise write_error(exc, f"store head {self.head_path}") from None
        self._known_head: bytes | None = None  # head bytes this process wrote or verified
        self._last_seq = 0
        self._gen = 0
        self._fds: dict[str, int] = {}
        self._sizes: dict[str, int] = {}  # valid only while the head still holds _known_head
        self._dirty: set[str] = set()
        self._flush_wanted = threading.Event()
        self._closing = threading.Event()
        self._closed = False
        self._flusher: threading.Thread | None = None

    # -- locking ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the store-wide append lock (threads of this process and other processes)."""
        with self._mutex:
            if self._closed:
                raise StoreError("the store is closed")
            fcntl.flock(self._head_fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(self._head_fd, fcntl.LOCK_UN)

    def recover(self) -> int:
        """Check the head (closing a torn tail if a writer died); return the last seq."""
        with self.locked():
            self._verify_head()
            return self._last_seq

    def verify_locked(self) -> int:
        """The last committed seq; the caller holds `locked()`."""
        self._verify_head()
        return self._last_seq

    def settle(self) -> tuple[int, bytes]:
        """(last committed seq, head bytes) once no append is in flight: every frame up to that
        seq is complete on disk when this returns."""
        with self.locked():
            self._verify_head()
            return self._last_seq, os.pread(self._head_fd, HEAD_SIZE, 0)

    def peek_head(self) -> bytes:
        """The head's current bytes, read without the lock (a cheap 'did anything change')."""
        if self._closed:  # the descriptor number may already belong to another file
            raise StoreError("the store is closed")
        return os.pread(self._head_fd, HEAD_SIZE, 0)

    # -- the append ------------------------------------------------------------------------

    def append(self, topic: str, stream: str, meta_json: bytes, hash_: str | None,
               content: bytes | None) -> Appended:
        # The hot path: the lock is taken inline rather than through locked(), and the head
        # is formatted directly; both save a measurable share of an append.
        with self._mutex:
            if self._closed:
                raise StoreError("the store is closed")
            fcntl.flock(self._head_fd, fcntl.LOCK_EX)
            try:
                self._verify_head()
                if hash_ is not None and content is not None:
                    self._cas.ensure(hash_, content)
                fd, offset = self._open_stream(stream)
                seq = self._last_seq + 1
                id_str, ms = self._ids.next()
                ts = format_ts(ms)
                line = encode_frame(id_str, seq, ts, topic, stream, meta_json, hash_)
                head = _pending_head(seq, self._gen, stream, offset)
                self._known_head = None  # until both writes are done, trust nothing cached
                try:
                    os.pwrite(self._head_fd, head, 0)
                    write_all(fd, line)
                except OSError as exc:
                    self._undo(fd, stream, offset)
                    raise write_error(exc, f"stream {stream}") from None
                self._known_head = head
                self._last_seq = seq
                self._sizes[stream] = offset + len(line)
            finally:
                fcntl.flock(self._head_fd, fcntl.LOCK_UN)
            if self.durability == "always":
                self._sync_fd(fd, stream)
            elif self.durability == "batch":
                self._dirty.add(stream)
                if not self._flush_wanted.is_set():
                    self._schedule_flush()
        return Appended(id_str, seq, ts, stream, offset)

    def _undo(self, fd: int, stream: str, offset: int) -> None:
        """Cut a half-written line off again, so nothing half-written is ever read."""
        self._sizes.pop(stream, None)
        try:
            tail = os.pread(fd, os.fstat(fd).st_size - offset, offset)
            if tail and b"\n" not in tail:
                os.ftruncate(fd, offset)
        except (OSError, ValueError):
            # The bytes stay; the next writer finds a torn tail and closes it.
            log.warning("could not cut a half-written frame off stream %s", stream)

    def _sync_fd(self, fd: int, stream: str) -> None:
        try:
            os.fdatasync(fd)
        except OSError as exc:
            raise write_error(exc, f"stream {stream} (fsync)") from None

    def _open_stream(self, stream: str) -> tuple[int, int]:
        fd = self._fds.get(stream)
        if fd is None:
            path = stream_path(self.streams_root, stream)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            except OSError as exc:
                raise write_error(exc, f"stream {stream}") from None
            self._fds[stream] = fd
        size = self._sizes.get(stream)
        if size is None:
            size = os.fstat(fd).st_size
            self._sizes[stream] = size
        return fd, size

    # -- verifying the head ------------------------------------------------------------------

    def _verify_head(self) -> None:
        """Bring _last_seq up to date with the head; called with the lock held."""
        raw = os.pread(self._head_fd, HEAD_SIZE, 0)
        if raw == self._known_head:
            return
        self._sizes.clear()
        head = Head.decode(raw)
        if head is None or head.boot != BOOT_ID:
            if raw.strip():
                log.warning("store head is stale or unreadable; recounting from the stream files")
            self._full_scan(head.gen if head else 0)
            return
        if head.gen != self._gen:
            self._close_fds()
            self._gen = head.gen
        if head.pending is None:
            self._last_seq = head.seq
            self._known_head = raw
            return
        stream, offset = head.pending
        outcome = self._check_pending(stream, offset, head.seq)
        if outcome == "lost":
            log.warning("stream %s is shorter than the store head says; recounting", stream)
            self._full_scan(head.gen)
            return
        if outcome == "mismatch":
            log.warning("stream %s does not hold frame %d where the store head says; "
                        "recounting", stream, head.seq)
            self._full_scan(head.gen)
            return
        self._last_seq = head.seq if outcome == "committed" else head.seq - 1
        if outcome == "torn":
            self._write_committed_head(bump=True)
        elif outcome == "absent":
            self._write_committed_head(bump=False)
        else:
            self._known_head = raw

    def _check_pending(self, stream: str, offset: int, seq: int) -> str:
        """What became of frame `seq`, meant for `offset` in `stream`.

        committed: it is there; absent: nothing was written; torn: part of it was (the
        line is closed now); lost: the file ends before `offset`; mismatch: something else
        is there. The last two mean the head cannot be trusted.
        """
        path = stream_path(self.streams_root, stream)
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND)
        except FileNotFoundError:
            return "absent" if offset == 0 else "lost"
        try:
            size = os.fstat(fd).st_size
            if size < offset:
                return "lost"
            if size == offset:
                return "absent"
            data = os.pread(fd, size - offset, offset)
            end = data.find(b"\n")
            if end < 0:
                self._close_torn(fd, stream, offset)
                return "torn"
            try:
                line_seq = decode_line(data[:end], stream)[1]
            except LineError:
                line_seq = None
            if line_seq != seq:
                return "mismatch"
            if not data.endswith(b"\n"):  # bytes written after it without the lock, torn
                self._close_torn(fd, stream, size)
            return "committed"
        finally:
            os.close(fd)

    def _close_torn(self, fd: int, stream: str, offset: int) -> None:
        log.warning("stream %s ends in a torn line at byte %d (a writer died mid-line); "
                    "closing it so the next frame starts on a fresh line", stream, offset)
        os.write(fd, b"\n")
        self.repairs += 1

    def _full_scan(self, gen: int) -> None:
        """Recompute the last seq from every stream's tail, closing torn tails on the way."""
        self._close_fds()
        last = 0
        for stream, path in list_streams(self.streams_root):
            fd = os.open(path, os.O_RDWR | os.O_APPEND)
            try:
                size = os.fstat(fd).st_size
                if ends_torn(fd, size):
                    self._close_torn(fd, stream, size)
            finally:
                os.close(fd)
            found = last_seq_in(path, stream)
            if found is not None:
                last = max(last, found)
        self._last_seq = last
        self._gen = gen
        self._write_committed_head(bump=True)

    def _write_committed_head(self, *, bump: bool) -> None:
        """Record the verified state, so that other processes need not verify it again.

        Bumping the generation also tells every process to drop its cached descriptors and
        every index to look at the stream files again.
        """
        if bump:
            self._gen += 1
        head = Head(self._last_seq, self._gen, BOOT_ID, None).encode()
        self._known_head = None
        os.pwrite(self._head_fd, head, 0)
        self._known_head = head

    def bump_generation(self) -> None:
        """Called (with the lock held) after stream files were rewritten in place by gc."""
        self._close_fds()
        self._sizes.clear()
        self._write_committed_head(bump=True)

    # -- durability -------------------------------------------------------------------------

    def _schedule_flush(self) -> None:
        if self._flusher is None:
            self._flusher = threading.Thread(target=self._flush_loop, name="ralph-store-fsync",
                                             daemon=True)
            self._flusher.start()
        self._flush_wanted.set()

    def _flush_loop(self) -> None:
        """Group commit: at most one fsync per stream every batch interval."""
        while True:
            self._flush_wanted.wait()
            if self._closed:
                return
            self._flush_wanted.clear()
            self._closing.wait(self.batch_interval)
            with self._mutex:
                if self._closed:
                    return
                fds = [os.dup(self._fds[s]) for s in self._dirty if s in self._fds]
                self._dirty.clear()
                blobs, self._cas.pending = self._cas.pending, []
            # fsync outside the mutex (on duplicates, which stay valid even if the writer
            # closes its descriptors meanwhile), so that appends go on during the commit.
            _sync_and_close(fds)
            with contextlib.suppress(OSError):
                self._cas.sync_paths(blobs)

    def _flush_locked(self) -> None:
        _sync_and_close([os.dup(self._fds[s]) for s in self._dirty if s in self._fds])
        self._dirty.clear()
        with contextlib.suppress(OSError):
            self._cas.sync_pending()

    def flush(self) -> None:
        """fsync everything written so far (any durability)."""
        with self._mutex:
            self._flush_locked()

    def _close_fds(self) -> None:
        if self.durability != "never":
            self._flush_locked()
        for fd in self._fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds.clear()
        self._sizes.clear()

    def close(self) -> None:
        with self._mutex:
            if self._closed:
                return
            if self.durability != "never":
                self._flush_locked()
            self._closed = True
            self._closing.set()
            self._flush_wanted.set()
            for fd in self._fds.values():
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._fds.clear()
            os.close(self._head_fd)
        if self._flusher is not None:
            self._flusher.join(timeout=5)


def _sync_and_close(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.fdatasync(fd)
        os.close(fd)

"""The append path: a store-wide lock, a gapless seq, one complete line per frame.

Appends from any number of threads and processes are serialised by `flock` on the head file
(see head.py for its format). Before writing frame K to stream T at offset O, a writer records
the intent (K, T, O) in the head, then writes the line. The next writer can therefore tell,
from the head alone, whether frame K reached its stream: if the line at O in T is frame K it
was committed; if T ends at O it never began; if T holds part of a line the writer died
mid-line (a torn tail), which is closed with a newline so the next frame starts on a fresh
line and the torn bytes are recorded as a parse error by the index. In the common case the
head still holds the bytes this process wrote last, and none of that checking is needed.

After a reboot (a power loss may have dropped frames that were never fsynced) or when the
head does not match the files, the last seq is recounted from the tails of every stream file,
never going below the seq floor that gc records.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NamedTuple

from ralph.store.cas import ContentStore
from ralph.store.errors import StoreError
from ralph.store.frame import LineError, decode_line, encode_frame, format_ts
from ralph.store.fsio import fsync_dir, write_all, write_error
from ralph.store.groupcommit import GroupCommit, dup_for_sync, sync_and_close
from ralph.store.head import BOOT_ID, HEAD_SIZE, Head, pending_head, read_seq_floor
from ralph.store.streams import ends_torn, last_seq_in, list_streams, stream_path

if TYPE_CHECKING:
    from ralph.store.ids import IdGenerator

log = logging.getLogger("ralph.store")

Durability = Literal["always", "batch", "never"]
DURABILITY_MODES: tuple[Durability, ...] = ("always", "batch", "never")
Outcome = Literal["committed", "absent", "torn", "lost", "mismatch"]


class Appended(NamedTuple):
    """What the writer hands back: the frame's fields, already on disk."""

    id: str
    seq: int
    ts: str
    stream: str
    offset: int


# Stream files kept open for appending, the least recently used closed past this: a process
# appending to many streams over its life (a server running thousands of agent sessions,
# one stream each) must not run out of file descriptors.
MAX_OPEN_STREAMS = 64


class Writer:
    """Owns the head file, the cached stream descriptors and the group commit."""

    def __init__(self, root: Path, cas: ContentStore, durability: Durability,
                 batch_interval_ms: int) -> None:
        self.root = root
        self.streams_root = root / "streams"
        self.durability = durability
        self.repairs = 0  # torn tails closed by this writer, for stats and tests
        self._cas = cas
        self._mutex = threading.Lock()
        # Made by the first append: building the id encoder's tables is a tenth of the start
        # of a command that only reads (`ralph notes list`, `ralph log`).
        self._ids: IdGenerator | None = None
        self._pid = os.getpid()
        try:
            self._head_fd = os.open(root / "head", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise write_error(exc, f"the store head in {root}") from None
        self._known_head: bytes | None = None  # head bytes this process wrote or verified
        self._last_seq = 0
        self._gen = 0
        self._fds: dict[str, int] = {}  # least recently appended to first
        self._sizes: dict[str, int] = {}  # valid only while the head still holds _known_head
        self._dirty: set[str] = set()
        self._closed = False
        self._commit = GroupCommit(batch_interval_ms / 1000, self._mutex, self._collect_dirty)

    # -- locking ---------------------------------------------------------------------------

    def _check_usable(self) -> None:
        if self._closed:
            raise StoreError("the store is closed")
        if os.getpid() != self._pid:
            # flock belongs to the open file description, which a forked child shares: both
            # processes would "hold" the lock at once.
            raise StoreError("a Store cannot be used across fork(); open a new one in the child")

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the store-wide append lock (threads of this process and other processes)."""
        with self._mutex:
            self._check_usable()
            fcntl.flock(self._head_fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(self._head_fd, fcntl.LOCK_UN)

    def verify_locked(self) -> int:
        """The last committed seq, every frame up to it complete on disk; hold `locked()`."""
        try:
            self._verify_head()
        except OSError as exc:
            raise write_error(exc, "the store head") from None
        return self._last_seq

    def settle(self) -> tuple[int, bytes]:
        """(last committed seq, head bytes) once no append is in flight. Also the recovery on
        open: a torn tail left by a writer that died is closed here."""
        with self.locked():
            return self.verify_locked(), os.pread(self._head_fd, HEAD_SIZE, 0)

    def peek_head(self) -> bytes:
        """The head's current bytes, read without the lock (a cheap 'did anything change')."""
        self._check_usable()  # a closed descriptor's number may belong to another file now
        return os.pread(self._head_fd, HEAD_SIZE, 0)

    # -- the append ------------------------------------------------------------------------

    def _new_ids(self) -> IdGenerator:
        from ralph.store.ids import IdGenerator  # noqa: PLC0415 - see __init__

        self._ids = IdGenerator()
        return self._ids

    def append(self, topic: str, stream: str, meta_json: bytes, hash_: str | None,
               content: bytes | None, stamp: tuple[str, str] | None = None) -> Appended:
        """Append one frame; `stamp` (id, ts) keeps a copied frame's own instead of new ones."""
        # The hot path: the lock is taken inline rather than through locked(), and the head
        # is formatted directly; both save a measurable share of an append.
        with self._mutex:
            self._check_usable()
            fcntl.flock(self._head_fd, fcntl.LOCK_EX)
            try:
                self.verify_locked()
                if hash_ is not None and content is not None:
                    self._cas.ensure(hash_, content)
                fd, offset = self._open_stream(stream)
                seq = self._last_seq + 1
                if stamp is None:
                    id_str, ms = (self._ids or self._new_ids()).next()
                    ts = format_ts(ms)
                else:
                    id_str, ts = stamp
                line = encode_frame(id_str, seq, ts, topic, stream, meta_json, hash_)
                head = pending_head(seq, self._gen, stream, offset)
                self._known_head = None  # until both writes are done, trust nothing cached
                try:
                    os.pwrite(self._head_fd, head, 0)
                    written = os.write(fd, line)
                    if written != len(line):  # a short write: finish it, or raise
                        write_all(fd, line[written:])
                except OSError as exc:
                    self._undo(fd, stream, offset)
                    raise write_error(exc, f"stream {stream}") from None
                self._known_head = head
                self._last_seq = seq
                self._sizes[stream] = offset + len(line)
            finally:
                fcntl.flock(self._head_fd, fcntl.LOCK_UN)
            if self.durability == "always":
                try:
                    os.fdatasync(fd)
                except OSError as exc:
                    raise write_error(exc, f"stream {stream} (fsync)") from None
            elif self.durability == "batch" and stream not in self._dirty:
                # A dirty stream is already due for the next group commit.
                self._dirty.add(stream)
                self._commit.request()
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

    def _open_stream(self, stream: str) -> tuple[int, int]:
        fd = self._fds.get(stream)
        if fd is None:
            path = stream_path(self.streams_root, stream)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
                if self.durability == "always":  # the file's name must survive a power loss
                    fsync_dir(path.parent)
            except OSError as exc:
                raise write_error(exc, f"stream {stream}") from None
            if len(self._fds) >= MAX_OPEN_STREAMS:
                self._retire_oldest()
            self._fds[stream] = fd
        elif next(reversed(self._fds)) != stream:  # now the most recently used
            del self._fds[stream]
            self._fds[stream] = fd
        size = self._sizes.get(stream)
        if size is None:
            size = os.fstat(fd).st_size
            # A partial last line the head does not account for (a stream file copied or
            # restored while it was being written): close it, or this frame would be glued
            # onto it. Checked only when the size is not known, so not on the hot path.
            if ends_torn(fd, size):
                self._close_torn(fd, stream, size)
                size += 1
            self._sizes[stream] = size
        return fd, size

    def _retire_oldest(self) -> None:
        """Close the least recently used stream file. One with writes not yet synced (batch
        durability) is synced first, here: `flush()` and `close()` then still cover every
        write. This costs an fsync only when more than MAX_OPEN_STREAMS streams are written
        in turn, within one group-commit interval."""
        oldest = next(iter(self._fds))
        fd = self._fds.pop(oldest)
        self._sizes.pop(oldest, None)
        if oldest in self._dirty:
            self._dirty.discard(oldest)
            with contextlib.suppress(OSError):  # as the group commit: a failed fsync is
                os.fdatasync(fd)  # not the append's failure
        with contextlib.suppress(OSError):
            os.close(fd)

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
        elif outcome == "mismatch":
            log.warning("stream %s does not hold frame %d where the store head says; "
                        "recounting", stream, head.seq)
            self._full_scan(head.gen)
        elif outcome == "committed":
            self._last_seq = head.seq
            self._known_head = raw
        else:
            self._last_seq = head.seq - 1
            self._write_committed_head(bump=outcome == "torn")

    def _check_pending(self, stream: str, offset: int, seq: int) -> Outcome:
        """What became of frame `seq`, meant for `offset` in `stream`.

        committed: it is there (a writer that died before its final newline counts, once the
        newline is added); absent: nothing was written; torn: part of it was (the line is
        closed now); lost: the file ends before `offset`; mismatch: something else is there.
        The last two mean the head cannot be trusted.
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
            line = data if end < 0 else data[:end]
            try:
                line_seq: int | None = decode_line(line, stream)[1]
            except LineError:
                line_seq = None
            if end < 0:
                self._close_torn(fd, stream, offset)
                return "committed" if line_seq == seq else "torn"
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
        """Recount the last seq from every stream's tail, closing torn tails on the way."""
        self._close_fds()
        last = read_seq_floor(self.root)
        for stream, path in list_streams(self.streams_root):
            try:
                fd = os.open(path, os.O_RDWR | os.O_APPEND)
            except FileNotFoundError:
                continue
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

        Bumping the generation also tells every process to drop its cached descriptors.
        """
        if bump:
            self._gen += 1
        head = Head(self._last_seq, self._gen, BOOT_ID, None).encode()
        self._known_head = None
        os.pwrite(self._head_fd, head, 0)
        self._known_head = head

    def bump_generation(self) -> None:
        """With the lock held, before stream files are rewritten in place (gc): every process,
        this one included, reopens its stream descriptors at its next append."""
        self._close_fds()
        try:
            self._write_committed_head(bump=True)
        except OSError as exc:
            raise write_error(exc, "the store head") from None

    # -- durability -------------------------------------------------------------------------

    def _collect_dirty(self) -> tuple[list[int], Callable[[], None]]:
        """Called by the group commit under the mutex: what to fsync now."""
        if self._closed:
            return [], lambda: None
        fds = dup_for_sync([self._fds[s] for s in self._dirty if s in self._fds])
        self._dirty.clear()
        blobs, self._cas.pending = self._cas.pending, []
        return fds, lambda: self._cas.sync_paths(blobs)

    def _flush_locked(self) -> None:
        fds, sync_content = self._collect_dirty()
        with contextlib.suppress(OSError):
            sync_content()
        sync_and_close(fds)

    def flush(self) -> None:
        """fsync everything written so far (any durability)."""
        with self._mutex:
            self._check_usable()
            self._dirty.update(self._fds)
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
            if os.getpid() == self._pid:  # a forked child must not touch the parent's files
                self._close_fds()
                os.close(self._head_fd)
            self._closed = True
        self._commit.stop()

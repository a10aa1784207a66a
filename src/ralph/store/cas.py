"""The content store: blobs addressed by sha256, written once and atomically, verified on read."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

from ralph.store.errors import ContentCorruptError, ContentNotFoundError, StoreError
from ralph.store.frame import digest_from_sri, sri_from_digest
from ralph.store.fsio import fsync_dir, write_all, write_error


class ContentStore:
    """`<root>/sha256/<2 hex>/<62 hex>`; temp files in `<root>/tmp` are renamed into place.

    `sync_writes` fsyncs each blob before its rename (durability `always`); otherwise the
    caller collects `pending` paths and syncs them in its group commit.
    """

    def __init__(self, root: Path, *, sync_writes: bool) -> None:
        self.root = root
        self.sync_writes = sync_writes
        self.pending: list[Path] = []
        self._tmp = root / "tmp"

    def path_for(self, hash_: str) -> Path:
        hexdigest = digest_from_sri(hash_).hex()
        return self.root / "sha256" / hexdigest[:2] / hexdigest[2:]

    def put(self, content: bytes) -> str:
        """Store `content` (once) and return its SRI hash."""
        hash_ = sri_from_digest(hashlib.sha256(content).digest())
        path = self.path_for(hash_)
        try:
            if path.stat().st_size == len(content):
                return hash_
        except FileNotFoundError:
            pass
        self._write(path, content)
        return hash_

    def ensure(self, hash_: str, content: bytes) -> None:
        """Rewrite a blob that vanished (a concurrent gc) between put and its frame's append."""
        path = self.path_for(hash_)
        if not path.exists():
            self._write(path, content)

    def _write(self, path: Path, content: bytes) -> None:
        # os.urandom: secrets.token_hex's bytes without importing secrets (start-up time).
        tmp = self._tmp / f"{path.name[:16]}.{os.getpid()}.{os.urandom(4).hex()}"
        try:
            self._tmp.mkdir(parents=True, exist_ok=True)
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                write_all(fd, content)
                if self.sync_writes:
                    os.fsync(fd)
            finally:
                os.close(fd)
            tmp.replace(path)
            if self.sync_writes:
                fsync_dir(path.parent)
            else:
                self.pending.append(path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise write_error(exc, "content") from None

    def sync_pending(self) -> None:
        """fsync the blobs written since the last call (the group commit of durability `batch`)."""
        paths, self.pending = self.pending, []
        self.sync_paths(paths)

    @staticmethod
    def sync_paths(paths: list[Path]) -> None:
        dirs: set[Path] = set()
        for path in paths:
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            dirs.add(path.parent)
        for directory in dirs:
            fsync_dir(directory)

    def get(self, hash_: str) -> bytes:
        """The content named by `hash_`, checked against it."""
        path = self.path_for(hash_)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise ContentNotFoundError(f"no content with hash {hash_}") from None
        except OSError as exc:
            raise StoreError(f"cannot read content {hash_}: {exc.strerror}") from None
        if sri_from_digest(hashlib.sha256(data).digest()) != hash_:
            raise ContentCorruptError(f"content {hash_} is corrupt: its bytes no longer match")
        return data

    def exists(self, hash_: str) -> bool:
        return self.path_for(hash_).exists()

    def remove(self, hash_: str) -> int:
        """Delete a blob; returns the bytes freed (0 if it was not there)."""
        path = self.path_for(hash_)
        try:
            size = path.stat().st_size
            path.unlink()
        except FileNotFoundError:
            return 0
        return size

    def hashes(self) -> Iterator[tuple[str, int]]:
        """Every stored blob as (hash, size)."""
        base = self.root / "sha256"
        if not base.is_dir():
            return
        for sub in sorted(base.iterdir()):
            if not sub.is_dir():  # a stray file (an editor's or a file manager's) is no blob
                continue
            for blob in sorted(sub.iterdir()):
                try:
                    digest = bytes.fromhex(sub.name + blob.name)
                except ValueError:
                    continue
                try:
                    size = blob.stat().st_size
                except FileNotFoundError:  # removed meanwhile (a concurrent gc)
                    continue
                if len(digest) == 32:
                    yield sri_from_digest(digest), size

"""Knowing whether a tracker file changed since it was last read, without reading it.

A file's signature (inode, size, mtime) changes with every write, except for a write that
keeps the size and lands within the filesystem's timestamp granularity of the previous one.
So a version read soon after it was written is "racy" (as git calls it): until it is older
than that granularity, a matching signature is confirmed by comparing the content. Older
versions are trusted on their signature: the file is then neither read nor parsed again.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from ralph.tracker.errors import TrackerError
from ralph.tracker.fileio import read_text

# Timestamp granularity assumed for the racy window: Linux filesystems stamp files with a
# coarse clock (a few ms); filesystems with whole-second stamps (FAT: 2 s) get 2 s.
FINE_GRANULARITY_NS = 100_000_000
COARSE_GRANULARITY_NS = 2_000_000_000

Signature = tuple[int, int, int, int]  # (device, inode, size, mtime_ns)


@dataclass(frozen=True)
class Version:
    """One version of the file as read: its text and what identifies it on disk."""

    text: str
    signature: Signature
    racy: bool  # written too recently for its signature alone to vouch for its content


def signature_of(st: os.stat_result) -> Signature:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def is_racy(mtime_ns: int, now_ns: int) -> bool:
    granularity = (COARSE_GRANULARITY_NS if mtime_ns % 1_000_000_000 == 0
                   else FINE_GRANULARITY_NS)
    return now_ns - mtime_ns < granularity


def stat_file(path: Path) -> os.stat_result:
    try:
        st = path.stat()
    except FileNotFoundError:
        raise TrackerError(f"{path}: no such file") from None
    except OSError as exc:
        raise TrackerError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise TrackerError(f"{path}: is not a file")
    return st


class FileCache:
    """The last version of one file; `current()` says whether it still is the file's.

    `reads` counts the times the file's content was read (tests count them, not time).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.version: Version | None = None
        self.reads = 0

    def current(self) -> tuple[Version, bool]:
        """The file's version now, and whether it differs from the one cached before."""
        now = time.time_ns()
        st = stat_file(self.path)
        signature = signature_of(st)
        cached = self.version
        if cached is not None and cached.signature == signature and not cached.racy:
            return cached, False
        text = self._read()
        # The stat was taken before the read: if the file changed in between, the next call
        # sees a new signature or (racy) compares the content again.
        version = Version(text, signature, is_racy(st.st_mtime_ns, now))
        self.version = version
        return version, cached is None or cached.text != text

    def text(self) -> str:
        """The text of the version last read, else of the file now (not kept: the version
        kept is always the one the tracker parsed last)."""
        return self.version.text if self.version is not None else self._read()

    def remember(self, text: str) -> None:
        """`text` was just written to the file by this process."""
        now = time.time_ns()
        try:
            st = self.path.stat()
        except OSError:
            self.version = None
            return
        self.version = Version(text, signature_of(st), is_racy(st.st_mtime_ns, now))

    def _read(self) -> str:
        self.reads += 1
        return read_text(self.path)

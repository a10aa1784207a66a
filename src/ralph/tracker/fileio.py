"""Reading and writing tracker files, with OS and encoding failures turned into TrackerError."""

from __future__ import annotations

from pathlib import Path

from ralph.fsutil import atomic_write_text
from ralph.tracker.errors import TrackerError

BOM = "\ufeff"


def read_text(path: Path) -> str:
    """The file's text exactly as stored (line endings and a BOM included)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise TrackerError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise TrackerError(f"{path}: is a directory, not a tracker file") from None
    except OSError as exc:
        raise TrackerError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return decode(path, data)


def decode(path: Path, data: bytes) -> str:
    """The file's bytes as text; TrackerError naming the line of the first invalid byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise TrackerError(f"{path}:{line}: not valid UTF-8 text") from None


def write_text(path: Path, text: str) -> None:
    """Replace the file atomically, so an agent or editor reading it never sees half a file."""
    try:
        atomic_write_text(path, text)
    except OSError as exc:
        raise TrackerError(f"{path}: cannot write: {exc.strerror or exc}") from None

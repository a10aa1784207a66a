"""A snapshot of a session's files, taken before and after a role runs.

Two snapshots are what the side-effect checks compare: which files exist, whether their
bytes changed (size and SHA-256), and the text of the session's Markdown files (progress
markers, tasks, reports are read from it). Paths are POSIX paths relative to the session
directory; the instructions file beside it is `../<SESSION_ID>.instructions.md`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from ralph.workflow.errors import WorkflowError
from ralph.workflow.session_dir import SESSIONS_DIR, SessionDir

_CHUNK = 1 << 20


@dataclass(frozen=True)
class FileState:
    """A file's size and content hash."""

    size: int
    sha256: str


@dataclass(frozen=True)
class Snapshot:
    """The session's files at one moment (see the module docstring for the keys)."""

    session: SessionDir
    files: Mapping[str, FileState] = field(default_factory=dict)
    dirs: frozenset[str] = frozenset()
    texts: Mapping[str, str] = field(default_factory=dict)

    @property
    def instructions_key(self) -> str:
        """The instructions file's key: `../<SESSION_ID>.instructions.md`."""
        return f"../{self.session.instructions_name}"

    def exists(self, key: str) -> bool:
        """Whether a file or directory `key` exists."""
        return key in self.files or key in self.dirs

    def text(self, key: str) -> str | None:
        """The text of a top-level Markdown file of the session, None if absent or not
        UTF-8."""
        return self.texts.get(key)

    def key_for(self, claimed: str) -> str | None:
        """The key of a path a role named, or None if it is not a file of this session.

        Accepted: relative to the session directory (`plan.md`), relative to the project
        root (`.ralph-sessions/<id>/plan.md`), absolute, and for the instructions file also
        its bare name or `.ralph-sessions/<id>.instructions.md`.
        """
        text = claimed.strip().strip("`").replace("\\", "/")
        if not text:
            return None
        sessions = PurePosixPath(self.session.root.as_posix()) / SESSIONS_DIR
        path = PurePosixPath(text)
        if path.is_absolute():
            try:
                path = path.relative_to(sessions)
            except ValueError:
                return None
            text = path.as_posix()
        else:
            text = posixpath.normpath(text)
            if not text.startswith(f"{SESSIONS_DIR}/"):
                text = f"{self.session.session_id}/{text}"
            else:
                text = text[len(SESSIONS_DIR) + 1:]
        # `text` is now relative to .ralph-sessions/.
        text = posixpath.normpath(text)
        if text in (self.session.instructions_name,
                    f"{self.session.session_id}/{self.session.instructions_name}"):
            return self.instructions_key
        prefix = f"{self.session.session_id}/"
        if not text.startswith(prefix) or text == prefix.rstrip("/"):
            return None
        return text[len(prefix):]

    def to_json(self) -> dict[str, Any]:
        """The snapshot as JSON (recorded with a role call, so that a call run again after
        a crash is checked against the files as they were before its first run)."""
        return {"files": {key: [state.size, state.sha256] for key, state in self.files.items()},
                "dirs": sorted(self.dirs), "texts": dict(self.texts)}

    @classmethod
    def from_json(cls, session: SessionDir, data: Mapping[str, Any]) -> Snapshot:
        """A snapshot `to_json` wrote; WorkflowError if it is not one."""
        try:
            files = {str(key): FileState(int(size), str(sha))
                     for key, (size, sha) in dict(data["files"]).items()}
            return cls(session, files, frozenset(str(d) for d in data["dirs"]),
                       {str(key): str(text) for key, text in dict(data["texts"]).items()})
        except (KeyError, TypeError, ValueError) as exc:
            raise WorkflowError(f"a recorded snapshot of {session.session_path} cannot be "
                                f"read: {exc}") from None


def snapshot(session: SessionDir) -> Snapshot:
    """The session directory's files (recursively, symlinks not followed) and the
    instructions file beside it, as they are now."""
    files: dict[str, FileState] = {}
    dirs: set[str] = set()
    texts: dict[str, str] = {}
    base = session.path
    if base.is_dir():
        for folder, subdirs, names in os.walk(base):
            relative = Path(folder).relative_to(base)
            for name in subdirs:
                dirs.add((relative / name).as_posix())
            for name in names:
                key = (relative / name).as_posix()
                state, data = _read(Path(folder) / name)
                if state is None:
                    continue
                files[key] = state
                if data is not None and relative == Path() and name.endswith(".md"):
                    with contextlib.suppress(UnicodeDecodeError):
                        texts[key] = data.decode("utf-8")
    state, _ = _read(session.instructions)
    if state is not None:
        files[f"../{session.instructions_name}"] = state
    return Snapshot(session, files, frozenset(dirs), texts)


def _read(path: Path) -> tuple[FileState | None, bytes | None]:
    """A regular file's state, and its bytes when it is small enough to keep as text."""
    try:
        if not path.is_file() or path.is_symlink():
            return None, None
        digest = hashlib.sha256()
        size = 0
        kept = bytearray()
        with path.open("rb") as handle:
            while chunk := handle.read(_CHUNK):
                digest.update(chunk)
                size += len(chunk)
                if size <= 8 * _CHUNK:
                    kept += chunk
    except OSError:
        return None, None
    return FileState(size, digest.hexdigest()), bytes(kept) if size <= 8 * _CHUNK else None

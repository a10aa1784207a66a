"""Confinement: which paths a client may read. A path is taken relative to the repository's
root, every symlink along it resolved, and refused unless it stays inside the root and out of
`.git` (any component named `.git`, in any case, before or after resolving)."""

from __future__ import annotations

import os
from pathlib import Path

from ralph.repo.errors import FileNotFound

__all__ = ["GIT_DIR", "MAX_PATH_BYTES", "RALPH_DIR", "confine", "display_path", "is_git_name",
           "real_root"]

GIT_DIR = ".git"
RALPH_DIR = ".ralph"
MAX_PATH_BYTES = 4096  # PATH_MAX: a longer path cannot be opened anyway


def is_git_name(component: str) -> bool:
    """`.git` in any case (`.GIT` is git's directory on a case-insensitive file system)."""
    return component.casefold() == GIT_DIR


def real_root(root: Path) -> str:
    """The root with every symlink resolved: what confined paths are compared with."""
    return os.path.realpath(root)


def confine(root: Path, path: str) -> str:
    """The repository-relative path (`/`-separated) that `path` names once every symlink
    along it is resolved; "" for the root itself. FileNotFound when `path` is empty, holds a
    NUL, is absolute or too long, has a `.git` component, or leads out of the root (`..`, a
    symlink anywhere along it). Nothing is opened: the caller opens without following
    symlinks (see `ralph.repo.files`) so that a symlink swapped in meanwhile is refused."""
    if not path:
        raise FileNotFound(path, "empty path")
    if "\0" in path:
        raise FileNotFound(path, "NUL in the path")
    try:
        encoded = os.fsencode(path)
    except UnicodeError:
        raise FileNotFound(path, "not a file name") from None
    if len(encoded) > MAX_PATH_BYTES:
        raise FileNotFound(path, "path too long")
    if path.startswith("/"):
        raise FileNotFound(path, "absolute path")
    if any(is_git_name(part) for part in path.split("/")):
        raise FileNotFound(path, "inside .git")
    base = real_root(root)
    try:
        full = os.path.realpath(Path(base, path))
    except (OSError, ValueError):
        raise FileNotFound(path, "cannot be resolved") from None
    if full == base:
        return ""
    prefix = base if base.endswith("/") else base + "/"
    if not full.startswith(prefix):
        raise FileNotFound(path, "outside the repository")
    relative = full[len(prefix):]
    if any(is_git_name(part) for part in relative.split("/")):
        raise FileNotFound(path, "inside .git")
    return relative


def display_path(path: str) -> str:
    """`path` as JSON can carry it: bytes that are not UTF-8 (kept by os.fsdecode as lone
    surrogates) shown as U+FFFD."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        pass
    else:
        return path
    try:
        return path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:  # surrogates that are not escaped bytes
        return path.encode("utf-8", "replace").decode("utf-8")

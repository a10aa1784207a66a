"""The repository watcher of `ralph serve`: changes to the work tree and to git's status,
recorded in the store (stream `repo`) so that the remote API's `event/file_changed` and
`event/git_status_changed` are projections of it (ralph.remote.repo_events) and a client
that reconnects catches up by seq.

It watches the project's root with watchfiles (inotify; polling where that cannot be had).
Each batch of changes (watchfiles' debounce) is merged per path (`ralph.repo.merge_kinds`),
stripped of `.ralph/` (Ralph's own state: the store's appends would wake it for ever),
`.git/` and what git ignores (`git check-ignore`, one call per 1,000 paths), and recorded as
`repo.file_changed` frames {path, change, [old_path]}, at most `MAX_CHANGES` per batch (the
rest are logged, not recorded). A rename is recognised when the new path is the inode that a
path deleted in the same batch was last seen with (the watcher remembers the inodes of the
paths it has seen change); others come as deleted and created. After each batch, and when
git's index, HEAD or refs change, git's status is computed again and recorded as
`repo.git_status_changed` {branch, staged, unstaged, untracked} when it differs from the last
one (the state at start-up is remembered, not recorded). Git failing is logged, never fatal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
from collections import OrderedDict
from collections.abc import Iterable, Set
from pathlib import Path
from typing import Any

import watchfiles

from ralph.git import Git, GitError
from ralph.repo import (
    FILE_CHANGED,
    GIT_DIR,
    RALPH_DIR,
    REPO_STREAM,
    STATUS_CHANGED,
    FileChange,
    GitStatus,
    RepoGitError,
    check_ignored,
    git_status,
    merge_kinds,
)
from ralph.repo.changes import Kind
from ralph.store import Frame, Store

log = logging.getLogger("ralph.remote")

__all__ = ["MAX_CHANGES", "MAX_STATUS_PATHS", "RepoWatcher", "watch_repository"]

MAX_CHANGES = 500
"""File changes recorded per batch; the others are only counted in a warning."""
MAX_STATUS_PATHS = 1000
"""Paths per list of a recorded status (`truncated: true` when one is longer)."""
IGNORE_CHUNK = 1000
"""Paths per `git check-ignore` call."""
REMEMBERED_INODES = 10_000
GIT_TIMEOUT_S = 30
POLL_DELAY_MS = 1000
_KINDS: dict[watchfiles.Change, Kind] = {
    watchfiles.Change.added: "added",
    watchfiles.Change.modified: "modified",
    watchfiles.Change.deleted: "deleted",
}


async def watch_repository(root: Path, store: Store, *, debounce_ms: int = 100) -> None:
    """Record the changes of the repository at `root` in `store` until cancelled."""
    watcher = RepoWatcher(root, store)
    await watcher.start()
    await watcher.run(debounce_ms=debounce_ms)


def is_git_trigger(relative: str) -> bool:
    """Whether a change to `relative` (a path inside .git/) may change git's status: the
    index, HEAD, a ref."""
    inner = relative.split("/", 1)[1] if "/" in relative else ""
    return inner in ("index", "HEAD", "packed-refs") or inner.startswith("refs/")


class RepoWatcher:
    """The watcher's state: the last status, the inodes of paths seen. `handle` takes one
    batch of watchfiles' changes (tests call it directly)."""

    def __init__(self, root: Path, store: Store, *, git: Git | None = None,
                 max_changes: int = MAX_CHANGES) -> None:
        self.root = Path(os.path.realpath(root))
        self._prefix = str(self.root).rstrip("/") + "/"
        self.store = store
        self.git = git or Git(self.root, timeout_s=GIT_TIMEOUT_S)
        self.max_changes = max_changes
        self.status: GitStatus | None = None
        self._inodes: OrderedDict[str, tuple[int, int]] = OrderedDict()
        self._failures: dict[str, str] = {}  # what failed -> how, logged once until it works

    async def start(self) -> None:
        """Remember the status at start-up (nothing is recorded for it)."""
        self.status = await self._status()

    async def run(self, *, debounce_ms: int = 100) -> None:
        """Watch until cancelled (or until neither inotify nor polling can watch the root:
        then the watcher logs it and ends)."""
        for polling in (False, True):
            try:
                await self._watch(debounce_ms, polling)
            except (OSError, RuntimeError) as exc:
                if polling:
                    log.error("the repository watcher stops: cannot watch %s (%s)",
                              self.root, exc)
                else:
                    log.warning("cannot watch %s for changes (%s); polling it instead",
                                self.root, exc)
            else:
                return

    async def _watch(self, debounce_ms: int, polling: bool) -> None:
        batches = watchfiles.awatch(
            self.root, watch_filter=self.wanted, debounce=debounce_ms,
            step=max(1, min(50, debounce_ms)), force_polling=polling,
            poll_delay_ms=POLL_DELAY_MS, ignore_permission_denied=True)
        async with contextlib.aclosing(batches):
            async for batch in batches:
                try:
                    await self.handle(batch)
                except Exception as exc:  # a store or git failure must not end the watcher
                    message = f"could not record a change: {exc!r}"
                    if self._failures.get("record") != message:  # once, not every batch
                        log.exception("repository watcher: %s", message)
                    self._failures["record"] = message
                else:
                    self._failures.pop("record", None)

    def relative(self, path: str) -> str | None:
        """`path` (absolute, as watchfiles gives it) relative to the root; None for the
        root itself or a path elsewhere."""
        return path[len(self._prefix):] if path.startswith(self._prefix) else None

    def wanted(self, change: watchfiles.Change, path: str) -> bool:
        """watchfiles' filter: nothing of `.ralph/`, of `.git/` only what may change git's
        status."""
        relative = self.relative(path)
        if not relative:
            return False
        top = relative.split("/", 1)[0]
        if top == GIT_DIR:
            return is_git_trigger(relative)
        return top != RALPH_DIR

    async def handle(self, batch: Iterable[tuple[watchfiles.Change, str]]) -> list[Frame]:
        """Record one batch: its file changes, then git's status if it changed. The frames
        appended."""
        kinds: dict[str, set[Kind]] = {}
        git_changed = False
        for change, path in batch:
            relative = self.relative(path)
            if not relative:
                continue
            top = relative.split("/", 1)[0]
            if top == GIT_DIR:
                git_changed = git_changed or is_git_trigger(relative)
            elif top != RALPH_DIR:
                kinds.setdefault(relative, set()).add(_KINDS.get(change, "modified"))
        metas: list[tuple[str, dict[str, Any]]] = []
        if kinds:
            metas += [(FILE_CHANGED, change.meta()) for change in await self._changes(kinds)]
        if kinds or git_changed:
            status = await self._status()
            if status is not None and status != self.status:
                self.status = status
                metas.append((STATUS_CHANGED, status.payload(limit=MAX_STATUS_PATHS)))
        if not metas:
            return []
        return await asyncio.to_thread(self._append, metas)

    def _append(self, metas: list[tuple[str, dict[str, Any]]]) -> list[Frame]:
        return [self.store.append(topic, meta, stream=REPO_STREAM) for topic, meta in metas]

    async def _changes(self, kinds: dict[str, set[Kind]]) -> list[FileChange]:
        """The batch's changes to record: merged per path, ignored paths left out, renames
        paired, at most `max_changes`."""
        paths = sorted(kinds)
        found: list[tuple[FileChange, tuple[int, int] | None]] = []
        checked = 0
        while checked < len(paths) and len(found) <= self.max_changes:
            chunk = paths[checked:checked + IGNORE_CHUNK]
            checked += len(chunk)
            ignored = await self._ignored(chunk)
            found += [item for path in chunk if path not in ignored
                      for item in [self._classify(path, kinds[path])] if item is not None]
        changes = self._pair_renames(found)
        total = len(changes) + len(paths) - checked  # (unchecked paths: not all are changes)
        if total > self.max_changes:
            log.warning("%d changes in the repository at once: the first %d recorded, the "
                        "others not", total, self.max_changes)
        return changes[:self.max_changes]

    def _classify(self, path: str, kinds: Set[Kind]
                  ) -> tuple[FileChange, tuple[int, int] | None] | None:
        """The path's change and its inode (None: gone); None when there is nothing to tell
        (a directory's own modification: its files tell what changed)."""
        try:
            st = os.lstat(self._prefix + path)
        except OSError:
            st = None
        change = merge_kinds(kinds, st is not None)
        if change == "modified" and st is not None and stat.S_ISDIR(st.st_mode):
            return None
        inode = (st.st_dev, st.st_ino) if st is not None and change != "deleted" else None
        return FileChange(path, change), inode

    def _pair_renames(self, found: list[tuple[FileChange, tuple[int, int] | None]]
                      ) -> list[FileChange]:
        """Each created path with the inode a deleted path was last seen with: that path
        renamed. Remembers the inodes seen, forgets those of deleted paths."""
        gone: dict[tuple[int, int], str] = {}
        for change, _ in found:
            if change.change == "deleted":
                inode = self._inodes.pop(change.path, None)
                if inode is not None:
                    gone[inode] = change.path
        renamed: dict[str, str] = {}  # new path -> old path
        for change, inode in found:
            if change.change == "created" and inode is not None and inode in gone:
                renamed[change.path] = gone.pop(inode)
        originals = set(renamed.values())
        changes: list[FileChange] = []
        for change, inode in found:
            if change.path in originals:
                continue
            old_path = renamed.get(change.path)
            changes.append(change if old_path is None
                           else FileChange(change.path, "renamed", old_path=old_path))
            if inode is not None:
                self._remember(change.path, inode)
        return changes

    def _remember(self, path: str, inode: tuple[int, int]) -> None:
        self._inodes[path] = inode
        self._inodes.move_to_end(path)
        while len(self._inodes) > REMEMBERED_INODES:
            self._inodes.popitem(last=False)

    async def _ignored(self, paths: list[str]) -> set[str]:
        try:
            ignored = await check_ignored(self.git, paths)
        except GitError as exc:
            self._failed("ignored", f"cannot ask git which changed paths it ignores: {exc}")
            return set()
        self._failures.pop("ignored", None)
        return ignored

    async def _status(self) -> GitStatus | None:
        try:
            status = await git_status(self.root, git=self.git)
        except RepoGitError as exc:
            self._failed("status", f"cannot read git's status: {exc}")
            return None
        self._failures.pop("status", None)
        return status

    def _failed(self, what: str, message: str) -> None:
        if self._failures.get(what) != message:
            log.warning("repository watcher: %s", message)
        self._failures[what] = message

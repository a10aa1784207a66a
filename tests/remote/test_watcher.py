"""The repository watcher (ralph.remote.watcher) on real repositories, with a real store:
file changes and git status changes recorded as frames, what it leaves out (`.ralph/`,
`.git/`, ignored files), batches merged and bounded, git failures survived; and
ralph.remote.repo_events, the frames as the remote API's events.

Waits poll the store with generous timeouts: nothing here depends on how fast the watcher is
(the tests pass with the CPU loaded)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from watchfiles import Change

from ralph.remote.repo_events import repo_events
from ralph.remote.watcher import MAX_CHANGES, RepoWatcher, watch_repository
from ralph.repo import FILE_CHANGED, REPO_STREAM, STATUS_CHANGED, FileChange, merge_kinds
from ralph.store import Frame, Store
from tests.git.helpers import git, write
from tests.repo.helpers import isolate_git, make_repo

TIMEOUT = 60.0


@pytest.fixture(autouse=True)
def _isolated_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_git(tmp_path, monkeypatch)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


@pytest.fixture
def repo_store(repo: Path) -> Iterator[Store]:
    """The project's own store, in .ralph/ (inside the watched tree, as `ralph serve` has it)."""
    with Store(repo / ".ralph" / "store") as store:
        yield store


class Watching:
    """A running watcher and the frames it recorded."""

    def __init__(self, root: Path, store: Store) -> None:
        self.root = root
        self.store = store
        self.probes = 0

    def frames(self) -> list[Frame]:
        return list(self.store.read(stream=REPO_STREAM))

    def changes(self) -> list[dict[str, Any]]:
        return [frame.meta for frame in self.frames() if frame.topic == FILE_CHANGED]

    def statuses(self) -> list[dict[str, Any]]:
        return [frame.meta for frame in self.frames() if frame.topic == STATUS_CHANGED]

    async def until(self, found: Callable[[], bool], what: str,
                    poke: Callable[[], None] | None = None) -> None:
        deadline = time.monotonic() + TIMEOUT
        poked = 0.0
        while not found():
            assert time.monotonic() < deadline, f"not recorded: {what}; frames: " \
                f"{[(f.topic, f.meta) for f in self.frames()]}"
            if poke is not None and time.monotonic() - poked > 0.3:
                poke()
                poked = time.monotonic()
            await asyncio.sleep(0.05)

    async def change(self, path: str, change: str, **more: str) -> None:
        want = {"path": path, "change": change, **more}
        await self.until(lambda: want in self.changes(), f"{want}")

    async def status(self, branch: str | None = None, **lists: list[str]) -> dict[str, Any]:
        """The first status recorded on `branch` with these lists (each compared sorted)."""
        def matching() -> dict[str, Any] | None:
            for status in self.statuses():
                if all(sorted(status[k]) == sorted(v) for k, v in lists.items()) and (
                        branch is None or status["branch"] == branch):
                    return status
            return None
        await self.until(lambda: matching() is not None, f"a status on {branch} with {lists}")
        found = matching()
        assert found is not None
        return found

    async def live(self) -> str:
        """Once the watcher is watching (a file written until its change is recorded): the
        probe's name."""
        self.probes += 1
        name = f"probe-{self.probes}.txt"

        def poke() -> None:
            (self.root / name).write_text(str(time.monotonic()))

        await self.until(lambda: any(c["path"] == name for c in self.changes()),
                         f"the probe {name}", poke)
        return name


@contextlib.asynccontextmanager
async def watching(root: Path, store: Store, **options: Any) -> AsyncIterator[Watching]:
    task = asyncio.create_task(watch_repository(root, store, **options))
    try:
        watch = Watching(root, store)
        yield watch
        assert not task.done(), task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, TIMEOUT)


async def test_created_modified_deleted_and_the_status(repo: Path, repo_store: Store) -> None:
    async with watching(repo, repo_store, debounce_ms=50) as watch:
        probe = await watch.live()
        write(repo, "new.txt", "new\n")
        await watch.change("new.txt", "created")
        await watch.status("main", untracked=[probe, "new.txt"])
        write(repo, "tracked.txt", "changed\n")
        await watch.change("tracked.txt", "modified")
        await watch.status(unstaged=["tracked.txt"], untracked=[probe, "new.txt"])
        (repo / "new.txt").unlink()
        await watch.change("new.txt", "deleted")
        status = await watch.status(unstaged=["tracked.txt"], untracked=[probe])
        assert status["branch"] == "main" and status["staged"] == []


async def test_ignored_ralph_and_git_internals_are_not_recorded(repo: Path,
                                                                 repo_store: Store) -> None:
    async with watching(repo, repo_store, debounce_ms=50) as watch:
        await watch.live()
        write(repo, "debug.log", "ignored\n")
        write(repo, "build/out/deep.o", "ignored\n")
        write(repo, ".ralph/notes.txt", "Ralph's own\n")
        write(repo, ".git/info/exclude", "# git's own\n")
        write(repo, "marker.txt", "after them\n")
        await watch.change("marker.txt", "created")
        (repo / "debug.log").unlink()  # a deleted ignored file is recognised too
        write(repo, "marker2.txt", "after them\n")
        await watch.change("marker2.txt", "created")
        paths = [change["path"] for change in watch.changes()]
        assert not [p for p in paths if p.endswith((".log", ".o"))
                    or p.startswith(("build", ".ralph", ".git"))]
        for status in watch.statuses():
            assert not [p for p in status["untracked"] if p.startswith(".ralph")]


async def test_git_add_and_commit_change_the_status(repo: Path, repo_store: Store) -> None:
    async with watching(repo, repo_store, debounce_ms=50) as watch:
        probe = await watch.live()
        write(repo, "staged.txt", "s\n")
        await watch.status(untracked=[probe, "staged.txt"])
        before = len(watch.changes())
        await asyncio.to_thread(git, repo, "add", "staged.txt")
        await watch.status(staged=["staged.txt"], untracked=[probe])
        await asyncio.to_thread(git, repo, "commit", "-q", "-m", "staged")
        await watch.status(staged=[], unstaged=[], untracked=[probe])
        assert not [c for c in watch.changes()[before:] if c["path"].startswith(".git")]
        await asyncio.to_thread(git, repo, "checkout", "-q", "-b", "topic")
        await watch.status("topic", staged=[], unstaged=[], untracked=[probe])


async def test_a_rename(repo: Path, repo_store: Store) -> None:
    async with watching(repo, repo_store, debounce_ms=50) as watch:
        await watch.live()
        write(repo, "before.txt", "content\n")
        await watch.change("before.txt", "created")
        (repo / "before.txt").rename(repo / "after.txt")
        await watch.change("after.txt", "renamed", old_path="before.txt")
        assert {"path": "before.txt", "change": "deleted"} not in watch.changes()


async def test_the_state_at_start_is_remembered_not_recorded(repo: Path,
                                                             repo_store: Store) -> None:
    write(repo, "tracked.txt", "dirty before the start\n")
    write(repo, "old.txt", "untracked before the start\n")
    async with watching(repo, repo_store, debounce_ms=50) as watch:
        probe = await watch.live()
        write(repo, "later.txt", "after the start\n")
        await watch.status(unstaged=["tracked.txt"], untracked=["old.txt", probe, "later.txt"])
        frames = watch.frames()
        # nothing before the first change (the probe's, which the status at the start may
        # have had already)
        assert frames[0].topic == FILE_CHANGED and frames[0].meta["path"] == probe
        assert all("old.txt" in status["untracked"] for status in watch.statuses())


async def test_a_directory_that_is_not_a_repository(tmp_path: Path,
                                                    caplog: pytest.LogCaptureFixture,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    plain = tmp_path / "plain"
    plain.mkdir()
    caplog.set_level(logging.WARNING, "ralph.remote")
    with Store(tmp_path / "store") as store:
        async with watching(plain, store, debounce_ms=50) as watch:
            await watch.live()
            write(plain, "file.txt", "x\n")
            await watch.change("file.txt", "created")
            assert watch.statuses() == []
    warnings = [r.getMessage() for r in caplog.records if "repository watcher" in
                r.getMessage()]
    assert any("not a git repository" in w for w in warnings)
    assert len(warnings) == len(set(warnings))  # each failure logged once, not per batch


async def test_cancelled_promptly(repo: Path, repo_store: Store) -> None:
    task = asyncio.create_task(watch_repository(repo, repo_store))
    await asyncio.sleep(0.2)
    task.cancel()
    started = time.monotonic()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(task, TIMEOUT)
    assert task.cancelled() and time.monotonic() - started < 10


# -- one batch, handed to the watcher directly ---------------------------------------------


async def started(repo: Path, store: Store, **options: Any) -> RepoWatcher:
    watcher = RepoWatcher(repo, store, **options)
    await watcher.start()
    return watcher


async def test_a_batch_is_merged_per_path(repo: Path, repo_store: Store) -> None:
    watcher = await started(repo, repo_store)
    root = str(watcher.root)
    write(repo, "replaced.txt", "x")
    write(repo, "made.txt", "x")
    os.mkdir(repo / "newdir")
    frames = await watcher.handle([
        (Change.added, f"{root}/made.txt"), (Change.modified, f"{root}/made.txt"),
        (Change.deleted, f"{root}/replaced.txt"), (Change.added, f"{root}/replaced.txt"),
        (Change.added, f"{root}/gone.txt"), (Change.deleted, f"{root}/gone.txt"),
        (Change.modified, f"{root}/tracked.txt"),
        (Change.modified, f"{root}/newdir"),  # a directory's own modification: nothing
        (Change.added, f"{root}/x.log"), (Change.added, f"{root}/build/a/b.o"),
        (Change.added, f"{root}/.ralph/store/head"), (Change.modified, f"{root}/.git/index"),
        (Change.modified, f"{root}/.git/objects/ab/cdef"), (Change.modified, root),
        (Change.modified, "/elsewhere/file"),
    ])
    assert [(f.topic, f.meta) for f in frames] == [
        (FILE_CHANGED, {"path": "gone.txt", "change": "deleted"}),
        (FILE_CHANGED, {"path": "made.txt", "change": "created"}),
        (FILE_CHANGED, {"path": "replaced.txt", "change": "created"}),
        (FILE_CHANGED, {"path": "tracked.txt", "change": "modified"}),
        (STATUS_CHANGED, {"branch": "main", "staged": [], "unstaged": [],
                          "untracked": ["made.txt", "replaced.txt"]}),
    ]
    assert all(f.stream == REPO_STREAM for f in frames)
    # the same again: the status did not change, so only the file is recorded
    frames = await watcher.handle([(Change.modified, f"{root}/made.txt")])
    assert [f.topic for f in frames] == [FILE_CHANGED]
    # git's own files: the status only, when it changed
    assert await watcher.handle([(Change.modified, f"{root}/.git/index")]) == []
    await asyncio.to_thread(git, repo, "add", "made.txt")
    frames = await watcher.handle([(Change.modified, f"{root}/.git/index")])
    assert [(f.topic, f.meta["staged"]) for f in frames] == [(STATUS_CHANGED, ["made.txt"])]
    assert await watcher.handle([(Change.modified, f"{root}/.git/objects/x")]) == []


async def test_a_batch_is_bounded(repo: Path, repo_store: Store,
                                  caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "ralph.remote")
    watcher = await started(repo, repo_store)
    root = str(watcher.root)
    many = [(Change.added, f"{root}/many/{n:04}.txt") for n in range(MAX_CHANGES + 700)]
    frames = await watcher.handle([*many, (Change.added, f"{root}/many/x.log")])
    changes = [f.meta["path"] for f in frames if f.topic == FILE_CHANGED]
    assert changes == [f"many/{n:04}.txt" for n in range(MAX_CHANGES)]
    assert "1201 changes in the repository at once: the first 500 recorded" in caplog.text
    small = await started(repo, repo_store, max_changes=2)
    frames = await small.handle([(Change.added, f"{root}/{name}") for name in "abc"])
    assert [f.meta["path"] for f in frames if f.topic == FILE_CHANGED] == ["a", "b"]


async def test_a_long_status_is_cut_in_its_frame(repo: Path, repo_store: Store) -> None:
    watcher = await started(repo, repo_store)
    for n in range(1005):
        (repo / f"u{n:04}.txt").write_text("")
    frames = await watcher.handle([(Change.added, f"{watcher.root}/u0000.txt")])
    status = frames[-1].meta
    assert frames[-1].topic == STATUS_CHANGED and status["truncated"] is True
    assert len(status["untracked"]) == 1000 and status["untracked"][0] == "u0000.txt"


async def test_renames_are_paired_by_inode(repo: Path, repo_store: Store) -> None:
    watcher = await started(repo, repo_store)
    root = str(watcher.root)
    write(repo, "a.txt", "a")
    write(repo, "unseen.txt", "u")
    await watcher.handle([(Change.added, f"{root}/a.txt")])
    (repo / "a.txt").rename(repo / "b.txt")
    (repo / "unseen.txt").rename(repo / "seen-now.txt")
    frames = await watcher.handle([
        (Change.deleted, f"{root}/a.txt"), (Change.added, f"{root}/b.txt"),
        (Change.deleted, f"{root}/unseen.txt"), (Change.added, f"{root}/seen-now.txt")])
    assert [f.meta for f in frames if f.topic == FILE_CHANGED] == [
        {"path": "b.txt", "change": "renamed", "old_path": "a.txt"},
        {"path": "seen-now.txt", "change": "created"},
        {"path": "unseen.txt", "change": "deleted"},
    ]
    (repo / "b.txt").rename(repo / "c.txt")  # seen as b.txt through the rename
    frames = await watcher.handle([(Change.deleted, f"{root}/b.txt"),
                                   (Change.added, f"{root}/c.txt")])
    assert frames[0].meta == {"path": "c.txt", "change": "renamed", "old_path": "b.txt"}


class FlakyStore:
    """A store whose first append fails."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.failed = False

    def append(self, *args: Any, **kwargs: Any) -> Frame:
        if not self.failed:
            self.failed = True
            raise OSError("disk full")
        return self.store.append(*args, **kwargs)


async def test_a_failure_does_not_end_the_watcher(repo: Path, repo_store: Store,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    flaky = FlakyStore(repo_store)
    async with watching(repo, cast(Store, flaky), debounce_ms=50) as watch:
        watch.store = repo_store
        await watch.live()
    assert flaky.failed and "could not record a change: OSError('disk full')" in caplog.text


def test_merge_kinds() -> None:
    assert merge_kinds({"deleted", "added", "modified"}, exists=False) == "deleted"
    assert merge_kinds({"deleted", "added"}, exists=True) == "created"
    assert merge_kinds({"added", "modified"}, exists=True) == "created"
    assert merge_kinds({"added"}, exists=False) == "created"  # its deletion comes next
    assert merge_kinds({"deleted"}, exists=True) == "deleted"  # its creation comes next
    assert merge_kinds({"modified"}, exists=True) == "modified"


def test_repo_events() -> None:
    def frame(topic: str, meta: dict[str, Any], stream: str = REPO_STREAM) -> Frame:
        return Frame(id="0" * 25, seq=7, ts="2026-01-01T00:00:00.000Z", topic=topic,
                     stream=stream, meta=meta, hash=None)

    assert repo_events(frame(FILE_CHANGED, FileChange("a", "modified").meta())) == [
        ("event/file_changed", {"path": "a", "change": "modified", "seq": 7})]
    assert repo_events(frame(FILE_CHANGED, FileChange("b", "renamed", "a").meta())) == [
        ("event/file_changed", {"path": "b", "change": "renamed", "old_path": "a",
                                "seq": 7})]
    status = {"branch": "main", "staged": ["s"], "unstaged": [], "untracked": ["u"]}
    assert repo_events(frame(STATUS_CHANGED, status)) == [
        ("event/git_status_changed", {**status, "seq": 7})]
    assert repo_events(frame(STATUS_CHANGED, {**status, "truncated": True})) == [
        ("event/git_status_changed", {**status, "truncated": True, "seq": 7})]
    assert repo_events(frame(FILE_CHANGED, {"path": "a"}, stream="sessions/x")) == []
    assert repo_events(frame("session.started", {})) == []

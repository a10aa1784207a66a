"""ralph.repo.working_diff: the work tree against HEAD, one path or all, bounded, confined."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from ralph.repo import FileNotFound, RepoGitError, working_diff
from tests.git.helpers import git, write


async def test_one_path_staged_and_unstaged_together(repo: Path) -> None:
    write(repo, "tracked.txt", "one\nTWO!\n")  # (sizes differ: see the racy test below)
    git(repo, "add", "tracked.txt")
    write(repo, "tracked.txt", "one\nTWO!\nthree\n")
    write(repo, "other.txt", "other\n")
    got = await working_diff(repo, "tracked.txt")
    assert got.path == "tracked.txt" and not got.truncated
    assert got.diff.startswith("diff --git a/tracked.txt b/tracked.txt\n")
    assert "-two\n+TWO!\n+three\n" in got.diff
    assert "other.txt" not in got.diff


async def test_every_change_when_no_path_is_given(repo: Path) -> None:
    write(repo, "tracked.txt", "changed!\n")
    write(repo, "new/file.txt", "new\n")
    write(repo, "ignored.log", "no\n")
    write(repo, ".ralph/store/head", "no\n")
    got = await working_diff(repo)
    assert got.path == ""
    assert "a/tracked.txt" in got.diff
    assert "diff --git a/new/file.txt b/new/file.txt\nnew file mode" in got.diff
    assert "+new\n" in got.diff
    assert "ignored.log" not in got.diff and ".ralph" not in got.diff
    assert (await working_diff(repo, ".")).diff == got.diff


async def test_an_untracked_file_is_a_new_file(repo: Path) -> None:
    write(repo, "dir/untracked.txt", "fresh\n")
    got = await working_diff(repo, "dir/untracked.txt")
    assert "--- /dev/null\n+++ b/dir/untracked.txt\n" in got.diff and "+fresh\n" in got.diff
    assert (await working_diff(repo, "dir")).diff == got.diff
    assert git(repo, "status", "--porcelain") == "?? dir/\n"  # the real index untouched


async def test_a_deleted_file_and_a_path_git_does_not_know(repo: Path) -> None:
    (repo / "tracked.txt").unlink()
    got = await working_diff(repo, "tracked.txt")
    assert "deleted file mode" in got.diff and "-one\n-two\n" in got.diff
    assert (await working_diff(repo, "never/was.txt")).diff == ""


async def test_before_the_first_commit(tmp_path: Path) -> None:
    repo = tmp_path / "unborn"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    write(repo, "a.txt", "a\n")
    got = await working_diff(repo, "a.txt")
    assert "new file mode" in got.diff and "+a\n" in got.diff


async def test_through_a_symlinked_directory(repo: Path) -> None:
    write(repo, "real/x.txt", "x\n")
    git(repo, "add", "real/x.txt")
    git(repo, "commit", "-q", "-m", "x")
    (repo / "alias").symlink_to("real")
    write(repo, "real/x.txt", "yy\n")
    got = await working_diff(repo, "alias/x.txt")
    assert got.path == "alias/x.txt" and "a/real/x.txt" in got.diff


async def test_the_bound(repo: Path) -> None:
    write(repo, "big.txt", "".join(f"line {n}\n" for n in range(1000)))
    got = await working_diff(repo, "big.txt", max_bytes=500)
    assert got.truncated and len(got.diff.encode()) <= 500
    assert got.diff.endswith("\n") and "[diff truncated" not in got.diff
    whole = await working_diff(repo, "big.txt")
    assert not whole.truncated and whole.diff.startswith(got.diff)


@pytest.mark.parametrize("path", ["", "../x", "/etc", ".git", ".git/config", "./.git/HEAD",
                                  "a/../.git/HEAD", ".GIT/config", "a\0b", "link_out"])
async def test_refused(repo: Path, tmp_path: Path, path: str) -> None:
    (repo / "link_out").symlink_to(tmp_path)
    with pytest.raises(FileNotFound):
        await working_diff(repo, path)


async def test_not_a_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(RepoGitError, match="not a git repository"):
        await working_diff(plain)


async def test_a_same_size_change_right_after_a_commit(repo: Path) -> None:
    write(repo, "racy.txt", "x\n")
    git(repo, "add", "racy.txt")
    git(repo, "commit", "-q", "-m", "racy")
    write(repo, "racy.txt", "y\n")  # same size, same second as the index write (mostly)
    second = int(time.time())
    while int(time.time()) == second:
        await asyncio.sleep(0.05)
    assert "+y\n" in git(repo, "diff", "HEAD")  # git itself sees it
    assert "+y\n" in (await working_diff(repo, "racy.txt")).diff

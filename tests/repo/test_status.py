"""ralph.repo.git_status: the branch and the staged, unstaged and untracked paths."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ralph.git import WorkTree
from ralph.repo import GitStatus, RepoGitError, git_status
from ralph.repo.status import status_of
from tests.git.helpers import git, write


async def test_a_clean_repository(repo: Path) -> None:
    status = await git_status(repo)
    assert status == GitStatus("main", (), (), ())
    assert status.is_clean


async def test_staged_unstaged_untracked(repo: Path) -> None:
    write(repo, "new.txt", "new\n")
    git(repo, "add", "new.txt")
    write(repo, "tracked.txt", "changed\n")
    write(repo, "both.txt", "1\n")
    git(repo, "add", "both.txt")
    write(repo, "both.txt", "2\n")
    write(repo, "dir/deep/untracked.txt", "u\n")
    write(repo, "debug.log", "ignored\n")
    write(repo, "build/out.o", "ignored\n")
    status = await git_status(repo)
    assert status.branch == "main"
    assert status.staged == ("both.txt", "new.txt")
    assert status.unstaged == ("both.txt", "tracked.txt")
    assert status.untracked == ("dir/deep/untracked.txt",)  # each file, not the directory
    assert not status.is_clean


async def test_deletions_staged_and_not(repo: Path) -> None:
    write(repo, "other.txt", "o\n")
    git(repo, "add", "other.txt")
    git(repo, "commit", "-q", "-m", "other")
    git(repo, "rm", "-q", "other.txt")
    (repo / "tracked.txt").unlink()
    status = await git_status(repo)
    assert status.staged == ("other.txt",)
    assert status.unstaged == ("tracked.txt",)


async def test_a_rename_is_its_new_path(repo: Path) -> None:
    write(repo, "z-last.txt", "z\n")  # a change listed after the rename
    git(repo, "mv", "tracked.txt", "moved.txt")
    status = await git_status(repo)
    assert status.staged == ("moved.txt",)
    assert status.unstaged == ()
    assert status.untracked == ("z-last.txt",)
    write(repo, "moved.txt", "changed after the move\n")
    status = await git_status(repo)
    assert status.staged == ("moved.txt",)
    assert status.unstaged == ("moved.txt",)


async def test_ralph_state_is_left_out(repo: Path) -> None:
    write(repo, ".ralph/store/head", "x")
    write(repo, ".ralph/forced.txt", "x")
    git(repo, "add", "-f", ".ralph/forced.txt")
    write(repo, ".ralphrc", "not Ralph's directory\n")
    status = await git_status(repo)
    assert status == GitStatus("main", (), (), (".ralphrc",))


async def test_an_unborn_branch_and_a_detached_head(tmp_path: Path) -> None:
    repo = tmp_path / "fresh"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "trunk")
    write(repo, "a.txt", "a\n")
    assert await git_status(repo) == GitStatus("trunk", (), (), ("a.txt",))
    git(repo, "add", "a.txt")
    assert (await git_status(repo)).staged == ("a.txt",)
    git(repo, "commit", "-q", "-m", "a")
    sha = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "--detach")
    status = await git_status(repo)
    assert status.branch == sha[:7] and status.is_clean


async def test_a_conflict_is_unstaged(repo: Path) -> None:
    git(repo, "checkout", "-q", "-b", "side")
    write(repo, "tracked.txt", "side\n")
    git(repo, "commit", "-q", "-am", "side")
    git(repo, "checkout", "-q", "main")
    write(repo, "tracked.txt", "main\n")
    git(repo, "commit", "-q", "-am", "main")
    with pytest.raises(Exception):  # noqa: B017 - the merge stops on the conflict
        git(repo, "merge", "-q", "side")
    status = await git_status(repo)
    assert status.unstaged == ("tracked.txt",) and status.staged == ()


async def test_not_a_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(RepoGitError) as caught:
        await git_status(plain)
    assert "not a git repository" in caught.value.reason
    with pytest.raises(RepoGitError):
        await git_status(tmp_path / "missing")


async def test_names_that_are_not_utf8_are_shown_replaced(repo: Path) -> None:
    (repo / os.fsdecode(b"caf\xe9.txt")).write_text("x")
    status = await git_status(repo)
    assert status.untracked == ("caf\ufffd.txt",)


def test_the_payload_and_its_bound() -> None:
    status = GitStatus("main", ("a", "b", "c"), ("d",), ())
    assert status.payload() == {"branch": "main", "staged": ["a", "b", "c"],
                                "unstaged": ["d"], "untracked": []}
    assert status.payload(limit=2) == {"branch": "main", "staged": ["a", "b"],
                                       "unstaged": ["d"], "untracked": [],
                                       "truncated": True}


def test_a_copy_and_a_rename_drop_their_original() -> None:
    tree = WorkTree(head="0" * 40, branch=None,
                    changes=(("R ", "new"), ("D ", "old"), ("C ", "copy"), ("D ", "source"),
                             ("D ", "really-deleted"), (" A", "intent"), ("AA", "both")),
                    fingerprint="")
    status = status_of(tree)
    assert status.branch == "0000000"
    assert status.staged == ("new", "copy", "really-deleted")
    assert status.unstaged == ("intent", "both")

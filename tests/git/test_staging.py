"""ralph.git's staging, partial commits, restores and the queries protected paths use."""

from __future__ import annotations

from pathlib import Path

from tests.git.helpers import git, write
from tests.git.test_git import committed


def _staged(repo: Path) -> list[str]:
    return sorted(git(repo, "diff", "--cached", "--no-renames", "--name-status").splitlines())


async def test_stage_takes_new_changed_and_deleted_paths_and_skips_vanished_ones(
        repo: Path) -> None:
    g = await committed(repo)
    write(repo, "a.txt", "changed\n")
    (repo / "b.txt").unlink()
    write(repo, "new dir/n.txt", "new\n")
    git(repo, "mv", "c.txt", "d.txt")
    await g.stage(["a.txt", "b.txt", "new dir/n.txt", "d.txt", "c.txt", "gone.txt"])
    assert _staged(repo) == ["A\td.txt", "A\tnew dir/n.txt", "D\tb.txt", "D\tc.txt",
                             "M\ta.txt"]


async def test_snapshot_lists_a_renames_original_path_as_removed(repo: Path) -> None:
    g = await committed(repo)
    git(repo, "mv", "c.txt", "d.txt")
    tree = await g.snapshot()
    assert ("D ", "c.txt") in tree.changes and "d.txt" in tree.stamps


async def test_commit_paths_commits_only_those_and_keeps_the_rest_staged(repo: Path) -> None:
    g = await committed(repo)
    write(repo, "a.txt", "mine\n")
    write(repo, "b.txt", "staged by someone\n")
    git(repo, "add", "b.txt")
    (repo / "c.txt").unlink()
    sha = await g.commit_paths("only a and c", ["a.txt", "c.txt"])
    assert sha is not None
    assert git(repo, "show", "--name-only", "--format=", "HEAD").split() == ["a.txt", "c.txt"]
    assert _staged(repo) == ["M\tb.txt"]


async def test_restore_puts_files_back_from_a_commit(repo: Path) -> None:
    g = await committed(repo)
    head = git(repo, "rev-parse", "HEAD").strip()
    write(repo, "a.txt", "changed\n")
    git(repo, "add", "a.txt")
    (repo / "b.txt").unlink()
    await g.restore(["a.txt", "b.txt"], source=head)
    assert (repo / "a.txt").read_text() == "a\n" and (repo / "b.txt").read_text() == "b\n"
    assert git(repo, "status", "--porcelain") == ""


async def test_files_in_and_changed_since(repo: Path) -> None:
    g = await committed(repo)
    head = git(repo, "rev-parse", "HEAD").strip()
    write(repo, "t/x.txt", "x\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "t")
    assert await g.files_in(head, ["a.txt", "t", "nope"]) == ["a.txt"]
    assert await g.changed_since(head, [":(glob)t/**"]) == ["t/x.txt"]


async def test_flagged_files_are_found_and_cleared(repo: Path) -> None:
    g = await committed(repo)
    git(repo, "update-index", "--assume-unchanged", "a.txt")
    git(repo, "update-index", "--skip-worktree", "b.txt")
    assert await g.flagged_files([":(glob)*.txt"]) == ["a.txt", "b.txt"]
    await g.clear_flags(["a.txt", "b.txt"])
    assert await g.flagged_files([":(glob)*.txt"]) == []


async def test_ignored_files_as_directories(repo: Path) -> None:
    g = await committed(repo)
    write(repo, ".gitignore", "cache/\n*.log\n")
    write(repo, "cache/a/b.bin", "x")
    write(repo, "run.log", "x")
    assert await g.ignored_files([":(glob)**"], directory=True) == ["cache/", "run.log"]
    assert await g.ignored_files([":(glob)**"]) == ["cache/a/b.bin", "run.log"]

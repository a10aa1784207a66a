"""Work moved between workers through git: run branches, work directories brought to the
remote head whatever state they were left in, iteration marks that round-trip their result,
and pushes that are refused (never forced) when another worker got there first.

Each test has its own bare repository in tmp_path standing in for the run's remote, and work
directories standing in for workers."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from ralph.git import GitError
from ralph.scale.gitwork import (
    IterationMark,
    PushRejected,
    RepoError,
    checkout_branch,
    create_run_branch,
    find_mark,
    mark_iteration,
    push_branch,
    work_key,
)
from tests.git.helpers import git, isolate_git, write

BRANCH = "ralph/run_x"

RESULT: dict[str, Any] = {
    "status": "done",
    "verified": True,
    "score": 0.1 + 0.2,  # a float that only reads back equal if it is written exactly
    "none": None,
    "files": ["src/a.py", "tests/test_a.py"],
    "nested": {"tokens": {"in": 12345, "out": 678}, "empty": {}, "list": [[], [1, [2]]]},
    "text": "multi\nline\t\"quoted\" ünïcödé ✓ and Ralph-Iteration: run_x/9 inside",
    "big": "x" * 20_000,
}


@pytest.fixture(autouse=True)
def _isolated_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No global or system git config, a fixed identity for the tests' own commits."""
    isolate_git(tmp_path, monkeypatch)


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    """A bare repository whose default branch `main` has two commits, and a `develop` branch
    one commit further."""
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    seed = tmp_path / "seed"
    git(tmp_path, "clone", "-q", str(bare), str(seed))
    git(seed, "checkout", "-q", "-b", "main")
    write(seed, "README.md", "hello\n")
    write(seed, ".gitignore", "*.log\n")
    git(seed, "add", "-A")
    git(seed, "commit", "-q", "-m", "first")
    write(seed, "src/app.py", "print('v1')\n")
    git(seed, "add", "-A")
    git(seed, "commit", "-q", "-m", "second")
    git(seed, "push", "-q", "origin", "main")
    git(seed, "checkout", "-q", "-b", "develop")
    write(seed, "src/app.py", "print('develop')\n")
    git(seed, "commit", "-q", "-am", "develop work")
    git(seed, "push", "-q", "origin", "develop")
    return bare


def remote_head(bare: Path, branch: str) -> str | None:
    out = git(bare, "ls-remote", str(bare), f"refs/heads/{branch}")
    return out.split("\t")[0] if out else None


async def started(remote: Path, tmp_path: Path) -> str:
    """The run branch created from main, as a run's start does."""
    return await create_run_branch(str(remote), BRANCH, scratch=tmp_path / "scratch")


# -- create_run_branch ------------------------------------------------------------------------


async def test_create_branch_from_the_default_branch(remote: Path, tmp_path: Path) -> None:
    sha = await started(remote, tmp_path)
    assert sha == remote_head(remote, "main")
    assert remote_head(remote, BRANCH) == sha
    # the throwaway repository is gone; only the scratch directory itself is left
    assert list((tmp_path / "scratch").iterdir()) == []


async def test_create_branch_from_a_named_base(remote: Path, tmp_path: Path) -> None:
    sha = await create_run_branch(str(remote), BRANCH, base="develop",
                                  scratch=tmp_path / "scratch")
    assert sha == remote_head(remote, "develop")
    assert remote_head(remote, BRANCH) == sha


async def test_create_branch_is_idempotent_and_keeps_the_work(remote: Path,
                                                              tmp_path: Path) -> None:
    first = await started(remote, tmp_path)
    assert await started(remote, tmp_path) == first
    # Work pushed to the branch since: a retried start returns it and resets nothing, even
    # with another base named.
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", "-b", BRANCH, str(remote), str(other))
    git(other, "commit", "-q", "--allow-empty", "-m", "iteration 1")
    git(other, "push", "-q", "origin", BRANCH)
    moved = git(other, "rev-parse", "HEAD").strip()
    assert await create_run_branch(str(remote), BRANCH, base="develop",
                                   scratch=tmp_path / "scratch") == moved
    assert remote_head(remote, BRANCH) == moved


async def test_create_branch_with_a_relative_path(remote: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # The scratch repository runs git elsewhere: a relative path must still name the remote.
    monkeypatch.chdir(tmp_path)
    sha = await create_run_branch("remote.git", BRANCH, scratch=tmp_path / "scratch")
    assert remote_head(remote, BRANCH) == sha


async def test_create_branch_from_a_missing_base(remote: Path, tmp_path: Path) -> None:
    with pytest.raises(RepoError) as caught:
        await create_run_branch(str(remote), BRANCH, base="no-such-base",
                                scratch=tmp_path / "scratch")
    message = str(caught.value)
    assert "no-such-base" in message and str(remote) in message
    assert "\n" not in message
    assert remote_head(remote, BRANCH) is None


async def test_create_branch_on_an_unreachable_url(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.git"
    with pytest.raises(RepoError) as caught:
        await create_run_branch(str(missing), BRANCH, scratch=tmp_path / "scratch")
    message = str(caught.value)
    assert message.startswith(f"cannot reach {missing}: ")
    assert "does not appear to be a git repository" in message
    assert "\n" not in message


async def test_create_branch_hides_a_password_in_the_url(tmp_path: Path) -> None:
    # Port 9 on the loopback: nothing listens there, so the connection fails at once.
    url = "http://ralph:s3cret-token@127.0.0.1:9/repo.git"
    with pytest.raises(RepoError) as caught:
        await create_run_branch(url, BRANCH, scratch=tmp_path / "scratch")
    message = str(caught.value)
    assert "s3cret-token" not in message
    assert "http://ralph:***@127.0.0.1:9/repo.git" in message
    assert "\n" not in message


async def test_create_branch_on_an_empty_repository(tmp_path: Path) -> None:
    bare = tmp_path / "empty.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    with pytest.raises(RepoError, match="no default branch"):
        await create_run_branch(str(bare), BRANCH, scratch=tmp_path / "scratch")


async def test_create_branch_refuses_a_refspec_as_name(remote: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="invalid branch name"):
        await create_run_branch(str(remote), "main:refs/heads/other",
                                scratch=tmp_path / "scratch")


# -- checkout_branch --------------------------------------------------------------------------


async def test_checkout_into_a_fresh_directory(remote: Path, tmp_path: Path) -> None:
    sha = await started(remote, tmp_path)
    work = tmp_path / "worker1" / "run_x"
    assert await checkout_branch(str(remote), BRANCH, work) == sha
    assert git(work, "rev-parse", "HEAD").strip() == sha
    assert git(work, "symbolic-ref", "--short", "HEAD").strip() == BRANCH
    assert (work / "src" / "app.py").read_text() == "print('v1')\n"
    assert git(work, "status", "--porcelain", "--ignored") == ""
    # origin is the run's repository, so that push_branch knows where to push
    assert git(work, "config", "--get", "remote.origin.url").strip() == str(remote)


async def test_checkout_into_a_directory_that_already_holds_ralph_files(
        remote: Path, tmp_path: Path) -> None:
    sha = await started(remote, tmp_path)
    work = tmp_path / "work"
    write(work, ".ralph/logs/worker.log", "started\n")
    assert await checkout_branch(str(remote), BRANCH, work) == sha
    assert (work / ".ralph/logs/worker.log").read_text() == "started\n"


async def test_checkout_repairs_a_dirty_work_directory(remote: Path, tmp_path: Path) -> None:
    sha = await started(remote, tmp_path)
    work = tmp_path / "work"
    await checkout_branch(str(remote), BRANCH, work)
    # What a killed attempt leaves: a local commit never pushed, a half-done merge with a
    # conflict, modified / staged / untracked / ignored files, a nested clone, a stale lock.
    write(work, "src/app.py", "print('local commit')\n")
    git(work, "commit", "-q", "-am", "unpushed")
    git(work, "checkout", "-q", "-b", "side", f"origin/{BRANCH}")
    write(work, "src/app.py", "print('side')\n")
    git(work, "commit", "-q", "-am", "side")
    git(work, "checkout", "-q", BRANCH)
    merge = subprocess.run(["git", "merge", "side"], cwd=work, capture_output=True,
                           stdin=subprocess.DEVNULL, timeout=60, check=False)
    assert merge.returncode != 0 and (work / ".git" / "MERGE_HEAD").exists()
    write(work, "README.md", "changed\n")
    write(work, "staged.txt", "staged\n")
    git(work, "add", "staged.txt")
    write(work, "untracked/deep/file.txt", "new\n")
    write(work, "build.log", "ignored\n")
    git(work, "init", "-q", str(work / "nested"))
    write(work, ".ralph/state.json", '{"iteration": 3}\n')
    write(work, "sub/.ralph/not-runtime.txt", "only the top-level .ralph is kept\n")
    (work / ".git" / "index.lock").write_text("")

    assert await checkout_branch(str(remote), BRANCH, work) == sha

    assert git(work, "rev-parse", "HEAD").strip() == sha
    assert git(work, "symbolic-ref", "--short", "HEAD").strip() == BRANCH
    # nothing left but Ralph's runtime file
    assert git(work, "status", "--porcelain", "--untracked-files=all",
               "--ignored") == "?? .ralph/state.json\n"
    assert not (work / ".git" / "index.lock").exists()
    assert not (work / ".git" / "MERGE_HEAD").exists()
    assert (work / "src" / "app.py").read_text() == "print('v1')\n"
    assert (work / "README.md").read_text() == "hello\n"
    for gone in ("staged.txt", "untracked", "build.log", "nested", "sub"):
        assert not (work / gone).exists(), gone
    assert (work / ".ralph" / "state.json").read_text() == '{"iteration": 3}\n'


async def test_checkout_ends_an_interrupted_rebase(remote: Path, tmp_path: Path) -> None:
    sha = await started(remote, tmp_path)
    work = tmp_path / "work"
    await checkout_branch(str(remote), BRANCH, work)
    git(work, "checkout", "-q", "-b", "side", f"origin/{BRANCH}")
    write(work, "src/app.py", "print('side')\n")
    git(work, "commit", "-q", "-am", "side")
    git(work, "checkout", "-q", BRANCH)
    write(work, "src/app.py", "print('mine')\n")
    git(work, "commit", "-q", "-am", "mine")
    rebase = subprocess.run(["git", "rebase", "side"], cwd=work, capture_output=True,
                            stdin=subprocess.DEVNULL, timeout=60, check=False)
    assert rebase.returncode != 0 and (work / ".git" / "rebase-merge").exists()

    assert await checkout_branch(str(remote), BRANCH, work) == sha
    assert not (work / ".git" / "rebase-merge").exists()
    assert git(work, "symbolic-ref", "--short", "HEAD").strip() == BRANCH
    assert git(work, "status", "--porcelain") == ""


async def test_checkout_of_a_missing_branch(remote: Path, tmp_path: Path) -> None:
    with pytest.raises(RepoError) as caught:
        await checkout_branch(str(remote), "ralph/never-created", tmp_path / "work")
    message = str(caught.value)
    assert message == f"the branch ralph/never-created does not exist on {remote}"


async def test_checkout_from_an_unreachable_url(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.git"
    with pytest.raises(RepoError) as caught:
        await checkout_branch(str(missing), BRANCH, tmp_path / "work")
    message = str(caught.value)
    assert str(missing) in message and "\n" not in message


# -- marks ------------------------------------------------------------------------------------


async def test_a_mark_pushed_by_one_worker_is_found_by_another(remote: Path,
                                                               tmp_path: Path) -> None:
    await started(remote, tmp_path)
    one, two = tmp_path / "worker1", tmp_path / "worker2"
    await checkout_branch(str(remote), BRANCH, one)
    write(one, "src/feature.py", "done = True\n")
    git(one, "add", "-A")
    git(one, "commit", "-q", "-m", "the agent's work")
    key = work_key("run_x", 3)
    sha = await mark_iteration(one, key=key, run_id="run_x", subject="ralph: iteration 3 done",
                               result=RESULT)
    await push_branch(one, BRANCH)
    assert remote_head(remote, BRANCH) == sha

    assert await checkout_branch(str(remote), BRANCH, two) == sha
    mark = await find_mark(two, BRANCH, key)
    assert mark == IterationMark(key=key, sha=sha, result=RESULT)
    assert mark is not None and list(mark.result) == list(RESULT)  # key order kept too
    message = git(two, "log", "-1", "--format=%B", sha)
    assert message.startswith("ralph: iteration 3 done\n\nRalph-Run: run_x\n"
                              f"Ralph-Iteration: {key}\nRalph-Result: ")
    trailers = git(two, "log", "-1", "--format=%(trailers:key=Ralph-Result,valueonly)", sha)
    payload = trailers.strip()
    assert payload and "\n" not in payload and set(payload) <= set(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=")


async def test_find_mark_matches_the_key_exactly(remote: Path, tmp_path: Path) -> None:
    await started(remote, tmp_path)
    work = tmp_path / "work"
    await checkout_branch(str(remote), BRANCH, work)
    later = await mark_iteration(work, key="run_x/31", run_id="run_x", subject="iteration 31",
                                 result={"n": 31})
    await push_branch(work, BRANCH)
    await checkout_branch(str(remote), BRANCH, work)
    assert await find_mark(work, BRANCH, "run_x/3") is None
    assert await find_mark(work, BRANCH, "run_x/1") is None
    assert await find_mark(work, BRANCH, "run_x") is None

    earlier = await mark_iteration(work, key="run_x/3", run_id="run_x", subject="iteration 3",
                                   result={"n": 3})
    await push_branch(work, BRANCH)
    await checkout_branch(str(remote), BRANCH, work)
    assert await find_mark(work, BRANCH, "run_x/3") == IterationMark("run_x/3", earlier,
                                                                     {"n": 3})
    assert await find_mark(work, BRANCH, "run_x/31") == IterationMark("run_x/31", later,
                                                                      {"n": 31})


async def test_find_mark_sees_only_what_was_pushed(remote: Path, tmp_path: Path) -> None:
    await started(remote, tmp_path)
    work = tmp_path / "work"
    await checkout_branch(str(remote), BRANCH, work)
    await mark_iteration(work, key="run_x/1", run_id="run_x", subject="iteration 1",
                         result={"ok": True})
    # committed locally only: lost if this worker dies, so not a finished iteration yet
    assert await find_mark(work, BRANCH, "run_x/1") is None


async def test_find_mark_before_the_branch_was_fetched(remote: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    git(tmp_path, "init", "-q", str(work))
    with pytest.raises(GitError, match="checkout_branch"):
        await find_mark(work, BRANCH, "run_x/1")


async def test_mark_commits_nothing_of_the_work_tree(remote: Path, tmp_path: Path) -> None:
    await started(remote, tmp_path)
    work = tmp_path / "work"
    head = await checkout_branch(str(remote), BRANCH, work)
    write(work, "README.md", "unstaged change\n")
    write(work, "src/app.py", "print('staged change')\n")
    git(work, "add", "src/app.py")
    write(work, "new.txt", "untracked\n")

    sha = await mark_iteration(work, key="run_x/1", run_id="run_x", subject="iteration 1",
                               result={"ok": True})

    assert git(work, "rev-parse", "HEAD").strip() == sha
    assert git(work, "rev-parse", f"{sha}^").strip() == head
    assert git(work, "rev-parse", f"{sha}^{{tree}}") == git(work, "rev-parse", f"{head}^{{tree}}")
    # the changes are all still there, staged as they were
    assert git(work, "status", "--porcelain").splitlines() == [
        " M README.md", "M  src/app.py", "?? new.txt"]


async def test_mark_without_a_configured_identity(remote: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    await started(remote, tmp_path)
    work = tmp_path / "work"
    await checkout_branch(str(remote), BRANCH, work)
    for name in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME",
                 "GIT_COMMITTER_EMAIL"):
        monkeypatch.delenv(name)
    sha = await mark_iteration(work, key="run_x/1", run_id="run_x", subject="iteration 1",
                               result={})
    assert git(work, "log", "-1", "--format=%an <%ae>|%cn <%ce>", sha).strip() == (
        "Ralph <ralph@localhost>|Ralph <ralph@localhost>")
    # given for the commit only: the repository's config still has no identity
    unset = subprocess.run(["git", "config", "--get", "user.name"], cwd=work,
                           capture_output=True, stdin=subprocess.DEVNULL, timeout=60,
                           check=False)
    assert unset.returncode == 1


async def test_mark_refuses_a_result_that_would_not_read_back_equal(remote: Path,
                                                                   tmp_path: Path) -> None:
    await started(remote, tmp_path)
    work = tmp_path / "work"
    head = await checkout_branch(str(remote), BRANCH, work)
    bad_results: list[dict[Any, Any]] = [
        {"pair": (1, 2)}, {"n": float("nan")}, {1: "int key"}, {"x": object()}]
    for bad in bad_results:
        with pytest.raises(ValueError):
            await mark_iteration(work, key="run_x/1", run_id="run_x", subject="s", result=bad)
    with pytest.raises(ValueError):
        await mark_iteration(work, key="run_x/1\nRalph-Run: other", run_id="run_x",
                             subject="s", result={})
    assert git(work, "rev-parse", "HEAD").strip() == head


def test_work_key() -> None:
    assert work_key("run_abc", 3) == "run_abc/3"
    with pytest.raises(ValueError):
        work_key("run abc\n", 3)
    with pytest.raises(ValueError):
        work_key("run_abc", -1)


# -- push_branch ------------------------------------------------------------------------------


async def test_the_second_worker_to_push_is_rejected_not_forced(remote: Path,
                                                                tmp_path: Path) -> None:
    await started(remote, tmp_path)
    one, two = tmp_path / "worker1", tmp_path / "worker2"
    await checkout_branch(str(remote), BRANCH, one)
    await checkout_branch(str(remote), BRANCH, two)
    key = work_key("run_x", 1)
    for work, name in ((one, "first"), (two, "second")):
        write(work, "result.txt", f"{name}\n")
        git(work, "add", "-A")
        git(work, "commit", "-q", "-m", f"{name} worker's work")
    first = await mark_iteration(one, key=key, run_id="run_x", subject="iteration 1",
                                 result={"by": "first"})
    second = await mark_iteration(two, key=key, run_id="run_x", subject="iteration 1",
                                  result={"by": "second"})
    await push_branch(one, BRANCH)

    with pytest.raises(PushRejected) as caught:
        await push_branch(two, BRANCH)
    assert str(caught.value) == (
        f"the branch {BRANCH} moved on {remote} since this iteration began: push rejected "
        "(Ralph never force-pushes)")
    assert remote_head(remote, BRANCH) == first
    missing = subprocess.run(["git", "cat-file", "-e", f"{second}^{{commit}}"], cwd=remote,
                             capture_output=True, stdin=subprocess.DEVNULL, timeout=60,
                             check=False)
    assert missing.returncode != 0  # nothing of the second worker's reached the remote

    # The second worker re-reads the branch: it is at the first's work, with its mark.
    assert await checkout_branch(str(remote), BRANCH, two) == first
    assert (two / "result.txt").read_text() == "first\n"
    assert await find_mark(two, BRANCH, key) == IterationMark(key, first, {"by": "first"})
    await push_branch(two, BRANCH)  # nothing new: a no-op, not an error
    assert remote_head(remote, BRANCH) == first


async def test_push_to_an_unreachable_remote(remote: Path, tmp_path: Path) -> None:
    await started(remote, tmp_path)
    work = tmp_path / "work"
    await checkout_branch(str(remote), BRANCH, work)
    await mark_iteration(work, key="run_x/1", run_id="run_x", subject="s", result={})
    gone = tmp_path / "moved-away.git"
    remote.rename(gone)
    with pytest.raises(RepoError) as caught:
        await push_branch(work, BRANCH)
    message = str(caught.value)
    assert message.startswith(f"cannot push {BRANCH} to {remote}: ")
    assert "\n" not in message


async def test_push_refused_by_a_server_hook_is_not_a_rejection(remote: Path,
                                                                tmp_path: Path) -> None:
    await started(remote, tmp_path)
    work = tmp_path / "work"
    await checkout_branch(str(remote), BRANCH, work)
    await mark_iteration(work, key="run_x/1", run_id="run_x", subject="s", result={})
    hook = remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'pushes are frozen' >&2\nexit 1\n")
    hook.chmod(0o755)
    with pytest.raises(RepoError) as caught:
        await push_branch(work, BRANCH)
    assert not isinstance(caught.value, PushRejected)
    assert "pre-receive hook declined" in str(caught.value)

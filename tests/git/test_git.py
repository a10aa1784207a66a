"""ralph.git: the git CLI through ralph.proc, on repositories the tests create."""

from __future__ import annotations

import re
import stat
from pathlib import Path

import pytest

from ralph.errors import RalphError
from ralph.git import Git, GitError
from tests.git.conftest import IDENTITY
from tests.git.helpers import git, write
from tests.proc.helpers import running

SHA = re.compile(r"[0-9a-f]{40}")
STATE = ".ralph/state.json"


def hook(repo: Path, name: str, body: str) -> None:
    path = repo / ".git" / "hooks" / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


async def committed(repo: Path) -> Git:
    """`repo` with one commit holding a.txt, b.txt and c.txt."""
    for name in ("a", "b", "c"):
        write(repo, f"{name}.txt", f"{name}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial")
    return Git(repo)


# -- repository and HEAD ----------------------------------------------------------------------


async def test_not_a_repo(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    g = Git(plain)
    assert await g.is_repo() is False
    assert await Git(tmp_path / "missing").is_repo() is False
    with pytest.raises(GitError) as caught:
        await g.head()
    message = str(caught.value)
    assert message.startswith("git rev-parse")
    assert "not a git repository" in message
    assert "\n" not in message
    assert isinstance(caught.value, RalphError)
    for call in (g.current_branch(), g.status_short(), g.changed_files(), g.is_clean(),
                 g.diff(), g.commit_all("x"), g.switch_branch("x", create=True)):
        with pytest.raises(GitError, match="not a git repository"):
            await call


async def test_init_then_head_before_and_after_first_commit(tmp_path: Path) -> None:
    g = Git(tmp_path)
    assert not await g.is_repo()
    await g.init()
    assert await g.is_repo()
    assert (tmp_path / ".git").is_dir()
    assert await g.head() is None
    write(tmp_path, "a.txt", "a\n")
    sha = await g.commit_all("first")
    assert sha is not None and SHA.fullmatch(sha)
    assert await g.head() == sha == git(tmp_path, "rev-parse", "HEAD").strip()


async def test_is_repo_in_a_subdirectory(repo: Path) -> None:
    sub = repo / "pkg" / "deep"
    sub.mkdir(parents=True)
    assert await Git(sub).is_repo()


# -- branches ---------------------------------------------------------------------------------


async def test_current_branch_switch_and_create(repo: Path) -> None:
    g = Git(repo)
    assert await g.current_branch() == "main"  # unborn, still named
    await committed(repo)
    await g.switch_branch("ralph/feature", create=True)
    assert await g.current_branch() == "ralph/feature"
    await g.switch_branch("main", create=False)
    assert await g.current_branch() == "main"
    with pytest.raises(GitError, match="git switch"):
        await g.switch_branch("absent", create=False)
    with pytest.raises(GitError, match="already exists"):
        await g.switch_branch("ralph/feature", create=True)
    with pytest.raises(GitError, match="invalid branch name"):
        await g.switch_branch("-f", create=True)
    with pytest.raises(GitError, match="not a valid branch name"):
        await g.switch_branch("bad..name", create=True)
    assert await g.current_branch() == "main"


async def test_detached_head_has_no_branch(repo: Path) -> None:
    g = await committed(repo)
    git(repo, "checkout", "-q", "--detach")
    assert await g.current_branch() is None
    assert await g.head() == git(repo, "rev-parse", "HEAD").strip()


async def test_switch_keeps_local_changes(repo: Path) -> None:
    g = await committed(repo)
    write(repo, "a.txt", "changed\n")
    await g.switch_branch("work", create=True)
    assert (repo / "a.txt").read_text() == "changed\n"
    assert await g.changed_files() == ["a.txt"]


# -- status -----------------------------------------------------------------------------------


async def _messy(repo: Path) -> Git:
    """Every kind of change: modified, deleted, renamed, untracked, ignored, runtime state."""
    g = await committed(repo)
    write(repo, ".gitignore", "*.log\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-q", "-m", "ignore logs")
    write(repo, "a.txt", "a changed\n")
    (repo / "b.txt").unlink()
    git(repo, "mv", "c.txt", "moved.txt")
    write(repo, "new dir/x.txt", "x\n")
    write(repo, "debug.log", "ignored\n")
    write(repo, STATE, "{}\n")
    write(repo, ".ralph/state.json.bak", "{}\n")
    write(repo, "ünï.txt", "u\n")
    return g


async def test_changed_files_with_excludes(repo: Path) -> None:
    g = await _messy(repo)
    everything = [".ralph/state.json", ".ralph/state.json.bak", "a.txt", "b.txt", "c.txt",
                  "moved.txt", "new dir/x.txt", "ünï.txt"]
    assert await g.changed_files() == everything
    # An exclude is a path: the file itself, not every name it is a prefix of.
    assert await g.changed_files(exclude=[STATE]) == [p for p in everything if p != STATE]
    # A directory excludes everything beneath it.
    assert await g.changed_files(exclude=[".ralph"]) == everything[2:]
    assert await g.changed_files(exclude=[".ralph", "new dir", "a.txt"]) == [
        "b.txt", "c.txt", "moved.txt", "ünï.txt"]


async def test_status_short_with_excludes(repo: Path) -> None:
    g = await _messy(repo)
    full = (await g.status_short()).splitlines()
    assert " M a.txt" in full
    assert " D b.txt" in full
    assert "R  c.txt -> moved.txt" in full
    assert '?? "new dir/x.txt"' in full
    assert "?? .ralph/state.json" in full
    assert "?? ünï.txt" in full
    assert not any("debug.log" in line for line in full)
    filtered = (await g.status_short(exclude=[STATE])).splitlines()
    assert filtered == [line for line in full if line != "?? .ralph/state.json"]
    assert "?? .ralph/state.json.bak" in filtered


async def test_status_hides_an_untracked_directory_holding_only_excluded_files(
        repo: Path) -> None:
    g = await committed(repo)
    write(repo, STATE, "{}\n")
    assert await g.status_short(exclude=[STATE]) == ""
    assert await g.changed_files(exclude=[STATE]) == []
    assert await g.is_clean(exclude=[STATE])
    assert not await g.is_clean()


async def test_is_clean(repo: Path) -> None:
    g = await committed(repo)
    assert await g.is_clean()
    write(repo, "debug.log", "x")
    write(repo, ".gitignore", "*.log\n")
    assert not await g.is_clean()
    assert await g.is_clean(exclude=[".gitignore"])
    write(repo, "a.txt", "changed\n")
    assert not await g.is_clean(exclude=[".gitignore"])


# -- diff -------------------------------------------------------------------------------------


async def test_diff_shows_untracked_files_and_leaves_the_index_alone(repo: Path) -> None:
    g = await committed(repo)
    write(repo, "a.txt", "a\nmore\n")
    write(repo, "fresh/new.txt", "hello untracked\n")
    git(repo, "add", "a.txt")  # something staged, to see it stays staged
    index_before = (repo / ".git" / "index").read_bytes()
    status_before = git(repo, "status", "--porcelain")
    text = await g.diff()
    assert "diff --git a/a.txt b/a.txt" in text
    assert "+more" in text
    assert "diff --git a/fresh/new.txt b/fresh/new.txt" in text
    assert "new file mode" in text
    assert "+hello untracked" in text
    assert (repo / ".git" / "index").read_bytes() == index_before
    assert git(repo, "status", "--porcelain") == status_before
    assert "fresh/new.txt" not in git(repo, "ls-files")


async def test_diff_excludes_paths(repo: Path) -> None:
    g = await committed(repo)
    write(repo, STATE, '{"secret": 1}\n')
    write(repo, "a.txt", "changed\n")
    text = await g.diff(exclude=[STATE])
    assert "+changed" in text
    assert "state.json" not in text
    assert "state.json" in await g.diff()


async def test_diff_before_the_first_commit(repo: Path) -> None:
    g = Git(repo)
    write(repo, "a.txt", "alpha\n")
    write(repo, "b.txt", "beta\n")
    git(repo, "add", "b.txt")
    text = await g.diff()
    assert "+alpha" in text and "+beta" in text
    assert "new file mode" in text


async def test_diff_against_a_base(repo: Path) -> None:
    g = await committed(repo)
    base = await g.head()
    assert base is not None
    write(repo, "a.txt", "second\n")
    await g.commit_all("second")
    write(repo, "b.txt", "third\n")
    against_head = await g.diff()
    assert "+third" in against_head and "+second" not in against_head
    against_base = await g.diff(base=base)
    assert "+third" in against_base and "+second" in against_base
    with pytest.raises(GitError, match="invalid revision"):
        await g.diff(base="--output=/tmp/x")
    with pytest.raises(GitError, match="git diff"):
        await g.diff(base="no-such-rev")


async def test_diff_truncated_with_a_marker(repo: Path) -> None:
    g = await committed(repo)
    write(repo, "big.txt", "".join(f"line number {i}\n" for i in range(10_000)))
    full = await g.diff()
    assert "+line number 9999" in full
    assert "truncated" not in full
    text = await g.diff(max_bytes=1000)
    body, marker = text.rsplit("\n", 2)[0] + "\n", text.splitlines()[-1]
    assert marker.startswith("[diff truncated:")
    assert f"of {len(full.encode())} bytes shown]" in marker
    assert len(body.encode()) <= 1000
    assert full.startswith(body)
    assert body.endswith("\n")  # cut at a line break
    assert text.endswith("]\n")


# -- commit -----------------------------------------------------------------------------------


async def test_commit_all_with_excludes(repo: Path) -> None:
    g = await _messy(repo)
    message = "#12: tidy up\n\nbody line"
    sha = await g.commit_all(message, exclude=[STATE])
    assert sha is not None and SHA.fullmatch(sha)
    assert await g.head() == sha
    assert git(repo, "log", "-1", "--format=%B").rstrip("\n") == message
    files = set(git(repo, "-c", "core.quotepath=off", "show", "--name-only",
                            "--format=", "-M", "HEAD").splitlines())
    assert files == {"a.txt", "b.txt", "moved.txt", "new dir/x.txt", ".ralph/state.json.bak",
                     "ünï.txt"}
    # The excluded file stays as it was: untracked, uncommitted.
    assert git(repo, "status", "--porcelain", "-uall") == "?? .ralph/state.json\n"
    assert git(repo, "log", "-1", "--format=%an <%ae>").strip() == (
        f"{IDENTITY['GIT_AUTHOR_NAME']} <{IDENTITY['GIT_AUTHOR_EMAIL']}>")


async def test_commit_all_unstages_excluded_paths_staged_by_someone_else(repo: Path) -> None:
    g = await committed(repo)
    write(repo, STATE, "{}\n")
    write(repo, "a.txt", "changed\n")
    git(repo, "add", "-A")  # an agent's own `git add -A`
    sha = await g.commit_all("work", exclude=[STATE])
    assert sha is not None
    assert git(repo, "show", "--name-only", "--format=", "HEAD").split() == ["a.txt"]
    assert git(repo, "status", "--porcelain") == "?? .ralph/\n"


async def test_nothing_to_commit(repo: Path) -> None:
    g = await committed(repo)
    head = await g.head()
    assert await g.commit_all("nothing") is None
    write(repo, STATE, "{}\n")
    assert await g.commit_all("only excluded", exclude=[STATE]) is None
    assert await g.head() == head
    empty = Git(repo.parent / "empty")
    await empty.init()
    assert await empty.commit_all("nothing yet") is None
    assert await empty.head() is None


async def test_commit_refuses_an_empty_message(repo: Path) -> None:
    g = await committed(repo)
    write(repo, "a.txt", "changed\n")
    with pytest.raises(GitError, match="empty"):
        await g.commit_all("  \n")


async def test_failing_pre_commit_hook(repo: Path) -> None:
    g = await committed(repo)
    head = await g.head()
    hook(repo, "pre-commit",
         'echo "checking 2 files"\necho "lint: a.txt:1 bad style" >&2\nexit 1\n')
    write(repo, "a.txt", "changed\n")
    with pytest.raises(GitError) as caught:
        await g.commit_all("should fail")
    message = str(caught.value)
    assert message.startswith("git commit")
    assert "lint: a.txt:1 bad style" in message
    assert "checking 2 files" in caught.value.output
    assert await g.head() == head


async def test_passing_hook_runs(repo: Path) -> None:
    g = await committed(repo)
    hook(repo, "pre-commit", 'echo ran > "$(git rev-parse --git-dir)/hook-ran"\n')
    write(repo, "a.txt", "changed\n")
    assert await g.commit_all("with hook") is not None
    assert (repo / ".git" / "hook-ran").read_text() == "ran\n"


async def test_identity_fallback_without_writing_config(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in IDENTITY:
        monkeypatch.delenv(name)
    g = Git(repo)
    write(repo, "a.txt", "a\n")
    assert await g.commit_all("anonymous") is not None
    assert git(repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>").strip() == (
        "Ralph <ralph@localhost>|Ralph <ralph@localhost>")
    assert "user." not in (repo / ".git" / "config").read_text()
    # A configured identity wins over the fallback.
    git(repo, "config", "user.name", "Configured")
    git(repo, "config", "user.email", "configured@example.invalid")
    write(repo, "a.txt", "b\n")
    assert await g.commit_all("configured") is not None
    assert git(repo, "log", "-1", "--format=%an <%ae>").strip() == (
        "Configured <configured@example.invalid>")


async def test_slow_hook_times_out_and_is_killed(repo: Path) -> None:
    await committed(repo)
    pid_file = repo.parent / "hook.pid"
    hook(repo, "pre-commit", f'echo $$ > "{pid_file}"\nexec sleep 100\n')
    write(repo, "a.txt", "changed\n")
    with pytest.raises(GitError, match="timed out after 1s"):
        await Git(repo, timeout_s=1).commit_all("slow")
    # The hook ran in git's process group and went down with it.
    hook_pid = int(pid_file.read_text())
    assert not running(hook_pid)
    # git got SIGTERM first, so it removed its lock files on the way out.
    assert not (repo / ".git" / "index.lock").exists()
    assert git(repo, "status", "--porcelain") == "M  a.txt\n"


@pytest.mark.parametrize("where", ["branch", "packed", "detached", "worktree"])
async def test_a_commit_returns_the_new_head_wherever_the_refs_are(repo: Path, tmp_path: Path,
                                                                  where: str) -> None:
    """The sha after a commit is read from HEAD and the loose ref when they say it (no git
    process), and must be HEAD's in each layout."""
    await committed(repo)
    root = repo
    if where == "packed":
        git(repo, "pack-refs", "--all")
    elif where == "detached":
        git(repo, "checkout", "-q", "--detach")
    elif where == "worktree":
        root = tmp_path / "other"
        git(repo, "worktree", "add", "-q", "-b", "side", str(root))
    write(root, "new.txt", "new\n")
    repository = Git(root)
    sha = await repository.commit_all("another")
    assert sha == git(root, "rev-parse", "HEAD").strip()
    assert sha == await Git(root).head()
    assert await repository._head_from_files() == sha  # read without asking git

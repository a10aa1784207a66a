"""A run's work moved between machines through a git repository and one branch.

In scale mode any worker may execute a run's next iteration, so the work cannot live in one
machine's directory: it lives on a branch (`ralph/<run_id>`) of a repository every worker can
reach. A worker brings its work directory to the branch's remote head (`checkout_branch`), lets
the agent work and commit, marks the iteration done with an empty commit carrying trailers
(`mark_iteration`) and pushes (`push_branch`). The mark is what makes a retried iteration
safe: before running iteration N again, a worker asks `find_mark` whether some worker already
finished and pushed it, and then takes the recorded result instead of doing the work twice.

Pushes are never forced. Two workers that both ran the same iteration (a retry after a lost
heartbeat, say) race to push: the first wins, the second gets `PushRejected` and re-reads the
branch. That keeps the branch a single line of history nobody rewrote.

Every git call runs through `ralph.git.Git`'s runner: an owned child in its own session (no
controlling terminal, so ssh cannot prompt either), bounded by a timeout, with
GIT_TERMINAL_PROMPT=0 so that a missing credential is an error, not a worker hanging on a
prompt. Nothing is printed: failures are RepoError / PushRejected (the remote) or GitError (the
local repository), each with a one-line message.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import re
import shutil
import tempfile
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ralph.errors import RalphError
from ralph.git import Git, GitError

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "ITERATION_TRAILER",
    "RESULT_TRAILER",
    "RUN_TRAILER",
    "IterationMark",
    "PushRejected",
    "RepoError",
    "checkout_branch",
    "create_run_branch",
    "find_mark",
    "mark_iteration",
    "push_branch",
    "work_key",
]

DEFAULT_TIMEOUT_S = 300.0
"""The bound on each single git call: generous enough for fetching a large repository over a
slow link, short enough that a dead server does not hold a worker (and its activity) forever."""

RUN_TRAILER = "Ralph-Run"
ITERATION_TRAILER = "Ralph-Iteration"
RESULT_TRAILER = "Ralph-Result"

RUNTIME_DIR = ".ralph"
"""Ralph's runtime files (state, logs) in a work directory: `checkout_branch` keeps them."""

_MAX_RESULT_BYTES = 64 << 20
"""Most bytes a Ralph-Result payload may inflate to: a corrupt or hostile trailer cannot make
a worker allocate without bound."""

_ENV: Mapping[str, str] = {
    # Ralph's runner sets this too; repeated here because this module's promise depends on it.
    "GIT_TERMINAL_PROMPT": "0",
    # Nothing here should open an editor; if some git config makes one start, it must not wait.
    "GIT_EDITOR": "true",
    "GIT_SEQUENCE_EDITOR": "true",
    "GIT_MERGE_AUTOEDIT": "no",
}

_STALE_LOCKS = ("index.lock", "HEAD.lock", "ORIG_HEAD.lock", "config.lock",
                "packed-refs.lock", "shallow.lock")
"""Lock files a git killed mid-command leaves in the git directory; each blocks the next git
that needs the same file until someone removes it."""

_MERGING = ("MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD")
"""What a half-done merge, cherry-pick or revert leaves: then the index may hold unmerged
entries, which only `git reset --hard` clears."""

_origin_of: dict[Path, str] = {}
"""The origin URL this process set (or found) in each work directory: looked up once."""

_HALF_DONE = ("rebase-merge", "rebase-apply", "sequencer")
"""State directories of an interrupted rebase, am, cherry-pick or revert. `git reset --hard`
clears a half-done merge but not these, and they would make the next commit part of the old
operation."""

_BOILERPLATE = (
    "could not read from remote repository.",
    "please make sure you have the correct access rights",
    "and the repository exists.",
)
"""git's generic lines after a failed connection: the specific reason is elsewhere."""


class RepoError(RalphError):
    """The run's repository cannot be reached, or refuses what we asked (clone, fetch, push,
    a missing branch). The message is one line naming the URL and git's reason."""


class PushRejected(RalphError):
    """The remote branch moved since this iteration's work began, so a push would have to
    overwrite someone else's commits; Ralph never does. The caller re-reads the branch
    (`checkout_branch`) and looks for the iteration's mark (`find_mark`)."""

    def __init__(self, branch: str, url: str) -> None:
        super().__init__(f"the branch {branch} moved on {url} since this iteration began: "
                         "push rejected (Ralph never force-pushes)")
        self.branch = branch
        self.url = url


@dataclass(frozen=True)
class IterationMark:
    """A finished iteration as recorded on the branch: its key, the marking commit and the
    result payload it carried."""

    key: str
    sha: str
    result: dict[str, Any]


@dataclass(frozen=True)
class _Output:
    """What one git call said: its exit code (None: ended by us) and its output."""

    code: int | None
    stdout: bytes
    stderr: bytes

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", errors="replace")


class _AnyExit:
    """Every exit code is acceptable: the caller reads the outcome itself (a rejected push,
    a missing ref) instead of getting the runner's generic GitError."""

    def __contains__(self, item: object) -> bool:
        return True


def work_key(run_id: str, iteration: int) -> str:
    """The key that names iteration `iteration` of run `run_id` across workers: `run_id/3`."""
    _check_value(run_id, "run id")
    if iteration < 0:
        raise ValueError(f"iteration must not be negative, not {iteration}")
    return f"{run_id}/{iteration}"


async def create_run_branch(repo_url: str, branch: str, *, base: str | None = None,
                            scratch: Path, timeout_s: float = DEFAULT_TIMEOUT_S) -> str:
    """Make sure `branch` exists on the remote at a run's start; its head sha.

    An existing branch is left as it is and its head returned: a retried start (the workflow
    activity ran twice) must find the work of the first, not fail or reset it. Otherwise the
    branch is created at the head of `base` (a branch on the remote; default: the remote's
    HEAD), without cloning: a throwaway bare repository in `scratch` fetches that one commit
    (depth 1) and pushes it under the new name, so nothing but one commit's objects travels.

    RepoError when the URL cannot be reached or `base` (or, without `base`, a default branch)
    does not exist there.
    """
    _check_branch(branch)
    if base is not None:
        _check_branch(base)
    url = _absolute_url(repo_url)
    scratch.mkdir(parents=True, exist_ok=True)
    heads = await _ls_remote(scratch, url, branch, base, timeout_s)
    existing = heads.get(f"refs/heads/{branch}")
    if existing is not None:
        return existing
    source = "HEAD" if base is None else f"refs/heads/{base}"
    if source not in heads:
        raise RepoError(f"cannot create branch {branch} on {_shown(url)}: " + (
            "it has no default branch (HEAD) to start from" if base is None
            else f"the base branch {base} does not exist there"))
    # A directory of its own under `scratch`: two starts at once must not share a repository.
    work = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="create-branch-",
                                        dir=scratch))
    try:
        await _local(work, ["init", "-q", "--bare"], timeout_s)
        fetched = await _git(work, ["fetch", "--quiet", "--depth=1", "--no-tags", url, source],
                             timeout_s, url=url)
        if fetched.code != 0:
            raise RepoError(f"cannot fetch {_source_name(base)} from {_shown(url)}: "
                            f"{_reason(fetched, url)}")
        sha = (await _local(work, ["rev-parse", "--verify", "FETCH_HEAD^{commit}"],
                            timeout_s)).strip()
        pushed = await _git(work, ["push", "--porcelain", url, f"{sha}:refs/heads/{branch}"],
                            timeout_s, url=url)
        if pushed.code != 0:
            # Another start may have created the branch in between: then it exists, which is
            # all this function promises.
            heads = await _ls_remote(scratch, url, branch, None, timeout_s)
            existing = heads.get(f"refs/heads/{branch}")
            if existing is not None:
                return existing
            raise RepoError(f"cannot create branch {branch} on {_shown(url)}: "
                            f"{_reason(pushed, url)}")
        return sha
    finally:
        await asyncio.to_thread(shutil.rmtree, work, True)


async def checkout_branch(repo_url: str, branch: str, workdir: Path, *,
                          timeout_s: float = DEFAULT_TIMEOUT_S) -> str:
    """Bring `workdir` to the remote head of `branch`, exactly; that head's sha.

    `workdir` becomes a repository if it is not one yet (`git init` and an `origin` remote
    rather than `git clone`: that works in a directory already holding `.ralph/`, and fetches
    the one branch instead of all of them); otherwise it is fetched into. Then the local
    branch is reset to `origin/<branch>` and everything else is thrown away: changes, untracked
    and ignored files, a half-done merge or rebase, lock files a killed git left behind. Only
    the top-level `.ralph/` directory (Ralph's own state and logs) survives. This is how a
    worker starts an iteration wherever the previous attempt stopped, on this machine or not.

    The work directory must belong to this worker alone: a lock file is taken as stale, not
    as another git's, because no other git may run here.

    RepoError when the remote cannot be reached or has no `branch`; GitError when the local
    repository is broken beyond what is repaired here.
    """
    _check_branch(branch)
    url = _absolute_url(repo_url)
    remote_ref = f"refs/remotes/origin/{branch}"
    workdir.mkdir(parents=True, exist_ok=True)
    if not (workdir / ".git").exists():
        await _local(workdir, ["init", "-q"], timeout_s)
        _origin_of.pop(workdir, None)
    git_dir = workdir / ".git"
    if not git_dir.is_dir():  # a gitfile (`.git` naming a directory elsewhere): ask git
        git_dir = Path((await _local(workdir, ["rev-parse", "--absolute-git-dir"],
                                     timeout_s)).strip())
    await asyncio.to_thread(_clear_leftovers, git_dir, branch)
    if _origin_of.get(workdir) != url:
        configured = await _git(workdir, ["config", "--get", "remote.origin.url"], timeout_s)
        if configured.text.strip() != url:
            # The run's repository is the truth: a work directory reused from elsewhere
            # follows it.
            await _local(workdir, ["config", "remote.origin.url", url], timeout_s,
                         label="git config remote.origin.url")
        _origin_of[workdir] = url
    fetched = await _git(workdir, ["fetch", "--quiet", "--no-tags", "--no-recurse-submodules",
                                   "origin", f"+refs/heads/{branch}:{remote_ref}"],
                         timeout_s, url=url)
    if fetched.code != 0:
        if b"couldn't find remote ref" in fetched.stderr:
            raise RepoError(f"the branch {branch} does not exist on {_shown(url)}")
        raise RepoError(f"cannot fetch {branch} from {_shown(url)}: {_reason(fetched, url)}")
    # -f: local changes and untracked files in the way are dropped, not a reason to refuse.
    await _local(workdir, ["checkout", "-q", "-f", "-B", branch, remote_ref, "--"], timeout_s)
    if any((git_dir / name).exists() for name in _MERGING):
        # reset --hard also ends a half-done merge (MERGE_HEAD) and unmerged index entries,
        # which checkout -f leaves (every iteration pays one git less without them).
        await _local(workdir, ["reset", "-q", "--hard", remote_ref], timeout_s)
    # -x: ignored files go too (build output of the last attempt); -ff: also nested clones.
    # `/.ralph/` is anchored, so only the top-level runtime directory is kept (checked in the
    # tests: -e patterns still apply under -x).
    await _local(workdir, ["clean", "-q", "-ffdx", "-e", f"/{RUNTIME_DIR}/"], timeout_s)
    head = await asyncio.to_thread(_read_ref, git_dir, remote_ref)
    if head is not None:
        return head
    return (await _local(workdir, ["rev-parse", "--verify", "HEAD^{commit}"],
                         timeout_s)).strip()


async def find_mark(workdir: Path, branch: str, key: str, *,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> IterationMark | None:
    """The commit on `origin/<branch>` (as last fetched by `checkout_branch`) that marks
    iteration `key` done, with its recorded result; None when no commit does.

    Only a pushed mark counts: a commit that never left a worker's machine is lost with it.
    The key must equal the `Ralph-Iteration` trailer exactly (`run/3` is not `run/31`); when
    several commits carry it, the newest wins. GitError when the branch was never fetched
    into `workdir` or the mark's payload cannot be read.
    """
    _check_branch(branch)
    _check_value(key, "iteration key")
    remote_ref = f"refs/remotes/origin/{branch}"
    fmt = (f"%x1e%H%x1f%(trailers:key={ITERATION_TRAILER},valueonly,unfold,separator=%x1d)"
           f"%x1f%(trailers:key={RESULT_TRAILER},valueonly,unfold,separator=%x1d)")
    # --grep -F narrows the walk to candidate commits in git itself; the trailer comparison
    # below is the exact match (the grep also finds `run/31` for `run/3`).
    found = await _git(workdir, ["log", f"--format={fmt}", "--fixed-strings",
                                 f"--grep={ITERATION_TRAILER}: {key}", remote_ref, "--"],
                       timeout_s, whole=True)
    if found.code != 0:
        raise GitError(f"origin/{branch} is not in {workdir}: fetch it first "
                       f"(checkout_branch): {_reason(found, '')}")
    for record in found.text.split("\x1e"):
        fields = record.rstrip("\n").split("\x1f")
        if len(fields) != 3:
            continue
        sha, iterations, results = fields
        if key not in (value.strip() for value in iterations.split("\x1d")):
            continue
        payload = results.split("\x1d")[0].strip()
        return IterationMark(key=key, sha=sha, result=_decode_result(payload, sha))
    return None


async def mark_iteration(workdir: Path, *, key: str, run_id: str, subject: str,
                         result: dict[str, Any], timeout_s: float = DEFAULT_TIMEOUT_S) -> str:
    """Record iteration `key` as done: an empty commit on the current branch whose message is
    `subject`, a blank line and the trailers Ralph-Run, Ralph-Iteration and Ralph-Result (the
    `result` as urlsafe base64 of zlib-compressed compact JSON). The new commit's sha.

    The commit has HEAD's tree, built with `git commit-tree` and moved onto the branch with a
    compare-and-swap `git update-ref`: the index and work tree are not read, so nothing staged
    or unstaged slips into the mark, and no commit hook runs for Ralph's own bookkeeping.
    Without a configured identity the commit is by "Ralph <ralph@localhost>" (given for this
    commit only, never written to the config), as `ralph.git.Git` commits are.

    ValueError when `result` is not JSON data that reads back equal (a tuple, a non-string
    key, NaN): the mark must give back exactly what was recorded. GitError when HEAD has no
    commit or moved while marking.
    """
    _check_value(key, "iteration key")
    _check_value(run_id, "run id")
    title = subject.strip()
    if not title:
        raise ValueError("the mark's subject is empty")
    payload = _encode_result(result)
    message = (f"{title}\n\n{RUN_TRAILER}: {run_id}\n{ITERATION_TRAILER}: {key}\n"
               f"{RESULT_TRAILER}: {payload}\n")
    git = Git(workdir, timeout_s=timeout_s)
    env = _workdir_env(workdir)
    head = await _git(workdir, ["rev-parse", "--verify", "-q", "HEAD^{commit}"], timeout_s)
    if head.code != 0:
        raise GitError(f"cannot mark {key} in {workdir}: HEAD has no commit")
    parent = head.text.strip()
    identity = await git._commit_identity()  # the fallback identity ralph.git.Git uses
    _, out = await git._run([*identity, "commit-tree", f"{parent}^{{tree}}", "-p", parent],
                            env=env, stdin=message.encode("utf-8"), label="git commit-tree")
    sha = out.stdout.decode().strip()
    # The old value makes this a compare-and-swap: a commit made meanwhile is never dropped.
    await git._run(["update-ref", "-m", f"ralph: mark iteration {key}", "HEAD", sha, parent],
                   env=env, label="git update-ref")
    return sha


async def push_branch(workdir: Path, branch: str, *,
                      timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
    """Push the local `branch` to the same branch on `origin`, never forced.

    PushRejected when the remote branch moved on (another worker pushed first): its commits
    stay, ours do not overwrite them. RepoError for any other refusal or failure (unreachable,
    a server hook declining). The repository's own pre-push hooks run as for any push.
    """
    _check_branch(branch)
    ref = f"refs/heads/{branch}"
    pushed = await _git(workdir, ["push", "--porcelain", "--no-follow-tags", "origin",
                                  f"{ref}:{ref}"], timeout_s, url="")
    if pushed.code == 0:
        return
    url = await _origin_url(workdir, timeout_s)
    for line in pushed.text.splitlines():
        # --porcelain: "!<TAB>src:dst<TAB>[rejected] (fetch first)" per refused ref.
        if line.startswith("!") and "[rejected]" in line and (
                "fetch first" in line or "non-fast-forward" in line):
            raise PushRejected(branch, _shown(url))
    raise RepoError(f"cannot push {branch} to {_shown(url)}: {_reason(pushed, url)}")


# -- helpers ---------------------------------------------------------------------------------


async def check_run_target(repo_url: str, branch: str, base: str | None, *,
                           timeout_s: float = 30.0) -> None:
    """What a run's start will need, checked before it starts (`ralph run --on temporal`):
    branch names git accepts, and a repository that answers, with `base` on it if given.
    RepoError in one line otherwise: a run started on a typo would wait for it forever."""
    for name in (branch, *([base] if base else [])):
        try:
            _check_branch(name)
        except ValueError as exc:
            raise RepoError(str(exc)) from None
    url = _absolute_url(repo_url)
    heads = await _ls_remote(Path.cwd(), url, branch, base, timeout_s)
    if base and f"refs/heads/{base}" not in heads:
        raise RepoError(f"the base branch {base} does not exist on {_shown(url)}")
    if not base and "HEAD" not in heads and f"refs/heads/{branch}" not in heads:
        raise RepoError(f"{_shown(url)} has no default branch to start {branch} from: "
                        "name one with --base")


async def _ls_remote(cwd: Path, url: str, branch: str, base: str | None,
                     timeout_s: float) -> dict[str, str]:
    """The remote's HEAD, `branch` and `base` (those that exist) as {full ref name: sha}."""
    patterns = ["HEAD", f"refs/heads/{branch}", *([f"refs/heads/{base}"] if base else [])]
    listed = await _git(cwd, ["ls-remote", url, *patterns], timeout_s, url=url)
    if listed.code != 0:
        raise RepoError(f"cannot reach {_shown(url)}: {_reason(listed, url)}")
    heads: dict[str, str] = {}
    for line in listed.text.splitlines():
        sha, _, ref = line.partition("\t")
        # ls-remote matches patterns on the tail of ref names: keep exact names only.
        if ref in patterns:
            heads[ref] = sha
    return heads


async def _origin_url(workdir: Path, timeout_s: float) -> str:
    """The `origin` remote's URL, for messages ("origin" when it cannot be read)."""
    found = await _git(workdir, ["config", "--get", "remote.origin.url"], timeout_s)
    return found.text.strip() or "origin"


async def _git(cwd: Path, args: Sequence[str], timeout_s: float, *, url: str | None = None,
               whole: bool = False) -> _Output:
    """Run `git <args>` in `cwd` whatever its exit code says (the caller judges it).

    `url` set: the call talks to a remote, so a timeout or a git that cannot start is a
    RepoError naming it ("" for `origin`), not a GitError about the local repository.
    """
    try:
        result, out = await Git(cwd, timeout_s=timeout_s)._run(
            args, ok=_AnyExit(), env=_workdir_env(cwd), whole=whole,
            # a remote call's arguments hold its URL, and URLs may hold a token: name only
            # the subcommand in messages
            label=None if url is None else f"git {args[0]}")
    except GitError as exc:
        if url is None:
            raise
        raise RepoError(f"cannot reach {_shown(url) or 'origin'}: {exc}") from exc
    return _Output(result.exit_code, bytes(out.stdout), bytes(out.stderr))


async def _local(cwd: Path, args: Sequence[str], timeout_s: float, *,
                 label: str | None = None) -> str:
    """Run a local `git <args>` in `cwd`; its stdout. GitError (one line) if it fails."""
    _, out = await Git(cwd, timeout_s=timeout_s)._run(args, env=_workdir_env(cwd), whole=True,
                                                      label=label)
    return out.stdout.decode("utf-8", errors="replace")


def _workdir_env(cwd: Path) -> dict[str, str]:
    """The environment of every git call here. The ceiling stops git from looking above
    `cwd` for a repository: a work directory whose `.git` is missing or broken must be an
    error (or get one), never a silent operation on some enclosing repository."""
    return {**_ENV, "GIT_CEILING_DIRECTORIES": str(cwd.resolve().parent)}


def _read_ref(git_dir: Path, ref: str) -> str | None:
    """A loose ref's sha, read from its file (one git process less on every iteration);
    None when it is packed or unreadable (the caller asks git)."""
    try:
        text = (git_dir / ref).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text if len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text) else None


def _clear_leftovers(git_dir: Path, branch: str) -> None:
    """Remove what a git killed mid-command leaves behind: lock files (the refs we are about
    to update included) and an interrupted rebase's or cherry-pick's state."""
    locks = [git_dir / name for name in _STALE_LOCKS]
    locks += [git_dir / "refs" / "heads" / f"{branch}.lock",
              git_dir / "refs" / "remotes" / "origin" / f"{branch}.lock"]
    for lock in locks:
        lock.unlink(missing_ok=True)
    for name in _HALF_DONE:
        shutil.rmtree(git_dir / name, ignore_errors=True)


def _encode_result(result: dict[str, Any]) -> str:
    """`result` as a trailer value: urlsafe base64 (one line, no spaces) of zlib-compressed
    compact JSON. ValueError unless it reads back equal to `result`."""
    try:
        text = json.dumps(result, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"the iteration result is not JSON data: {exc}") from exc
    if not isinstance(result, dict) or json.loads(text) != result:
        raise ValueError("the iteration result does not read back equal from JSON "
                         "(tuples, non-string keys?): it could not be returned exactly")
    packed = zlib.compress(text.encode("utf-8"), 9)
    return base64.urlsafe_b64encode(packed).decode("ascii")


def _decode_result(payload: str, sha: str) -> dict[str, Any]:
    """The result a Ralph-Result trailer carries; GitError naming the commit if it is not
    one that `_encode_result` wrote."""
    try:
        packed = base64.urlsafe_b64decode(payload.encode("ascii"))
        inflater = zlib.decompressobj()
        data = inflater.decompress(packed, _MAX_RESULT_BYTES)
        if inflater.unconsumed_tail or not inflater.eof:
            raise ValueError("truncated, or larger than the limit")
        value = json.loads(data.decode("utf-8"))
    except (ValueError, binascii.Error, zlib.error, UnicodeError) as exc:
        raise GitError(f"commit {sha} has an unreadable {RESULT_TRAILER} trailer: {exc}") from exc
    if not isinstance(value, dict):
        raise GitError(f"commit {sha} has a {RESULT_TRAILER} trailer that is not an object")
    return value


def _reason(out: _Output, url: str) -> str:
    """git's reason for a failure, in one line: its first specific `fatal:`/`error:` line
    (the generic "Could not read from remote repository" ones skipped), credentials hidden."""
    # A push's porcelain report says why each refused ref was refused ("[remote rejected]
    # (pre-receive hook declined)"); stderr then only says that the push failed.
    refused = [line.split("\t")[-1] for line in out.text.splitlines() if line.startswith("!\t")]
    lines = [line.strip() for line in out.stderr.decode("utf-8", errors="replace").splitlines()]
    lines = [line for line in lines if line and not line.startswith("hint:")]
    specific = [line for line in lines
                if not any(line.lower().removeprefix("fatal: ").startswith(text)
                           for text in _BOILERPLATE)]
    chosen = refused[0] if refused else next(
        (line for line in specific if line.startswith(("fatal:", "error:"))),
        specific[0] if specific else "")
    for prefix in ("fatal: ", "error: "):
        chosen = chosen.removeprefix(prefix)
    if not chosen:
        chosen = "git exited with " + ("a timeout" if out.code is None else f"code {out.code}")
    password = urlsplit(url).password if "://" in url else None
    return chosen.replace(password, "***") if password else chosen


def _shown(url: str) -> str:
    """`url` for messages: a password in it replaced by `***` (tokens often live there)."""
    if "://" not in url:
        return url
    parts = urlsplit(url)
    if not parts.password:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


def _absolute_url(url: str) -> str:
    """`url` with a local path made absolute: git calls here run in different directories
    (scratch, the work directory), where a relative path would name different places.
    URLs (`scheme://`) and scp-like `host:path` (a colon before any slash) stay as given."""
    if not url or "\0" in url or "\n" in url:
        raise ValueError(f"invalid repository URL: {url!r}")
    if "://" in url:
        return url
    colon, slash = url.find(":"), url.find("/")
    if colon > 0 and (slash < 0 or colon < slash):
        return url
    return str(Path(url).absolute())


def _source_name(base: str | None) -> str:
    return "the default branch (HEAD)" if base is None else f"the base branch {base}"


_BAD_REF = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//|/\.|\.lock(/|$)|^[-/.]|[/.]$")
"""What `git check-ref-format --branch` refuses, checked without a git process; `:` in
particular would turn a branch name into a refspec."""


def _check_branch(name: str) -> None:
    if not name or name == "@" or _BAD_REF.search(name):
        raise ValueError(f"invalid branch name: {name!r}")


def _check_value(value: str, what: str) -> None:
    """A trailer value must be one line with no surrounding space: git trims and unfolds
    trailer values, so anything else would not read back equal."""
    if not value or value != value.strip() or any(ord(c) < 0x20 or c == "\x7f" for c in value):
        raise ValueError(f"invalid {what}: {value!r}")

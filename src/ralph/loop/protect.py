"""Protected paths: what the gates run and what configures Ralph, kept out of the agent's reach.

An agent could make a gate pass by changing what the gate runs (the script it calls, the
tests, a fixture) or by editing ralph.toml. After the agent and before the gates, whatever it
changed under a protected path (modified, deleted or added) is put back to its content at
the start of the iteration, and the attempt fails. Protected: ralph.toml, the PROMPT files,
the tracked files a gate command names as what it runs (`gate_words`), and the user's
`[gates] protected` globs.

Patterns follow git's `:(glob)` pathspec rules (`*` and `?` stay within one directory, `**`
crosses them), and a pattern covers everything below what it names. When every pattern names
a file, checking costs no git call: only paths git status shows as changed are looked at. A
directory or wildcard pattern adds a listing of ignored entries before and after the agent;
an agent that ran git adds a look at its commits and at index flags.
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import orjson

from ralph.config import CONFIG_FILE, WORKFLOW_ROLES, Config
from ralph.fsutil import atomic_write_bytes, file_signature
from ralph.git import Git, WorkTree
from ralph.loop.events import EventSink
from ralph.loop.worktree import covered, listed

MANIFEST = "manifest.json"
DIFF_BYTES = 1 << 20  # the agent's diff of protected paths kept as the event's content
_SHELLS = {"sh", "bash", "dash", "zsh", "ksh"}
# Programs whose first argument is the script they run: that script is what the gate runs.
_INTERPRETERS = _SHELLS | {"python", "python3", "node", "ruby", "perl", "php", "deno", "bun",
                           "tsx", "ts-node", "Rscript", "lua"}
# Test runners: their arguments that name tests (a path with "test" or "spec" in it) are what
# the gate runs; other arguments (`--cov src`, the code they import) are what it checks.
_TEST_RUNNERS = {"pytest", "py.test", "unittest", "jest", "vitest", "mocha", "ava", "tap",
                 "rspec", "phpunit", "bats", "nose2", "ward", "tape", "karma", "cucumber-js"}
_TEST_WORD = re.compile(r"test|spec", re.IGNORECASE)
_WRAPPERS = {"env", "nohup", "time", "nice", "timeout", "exec", "command", "xvfb-run", "npx",
             "bunx", "pnpx"}
_RUN_WRAPPERS = {"uv", "poetry", "pdm", "pipenv", "hatch", "rye", "pixi", "conda", "yarn",
                 "pnpm", "npm", "bun"}


@dataclass(frozen=True)
class Protected:
    """The protected patterns of one iteration, and the files that are the agent's to edit
    whatever the patterns say (the tracker, progress.md, AGENTS.md)."""

    patterns: tuple[str, ...]
    exempt: frozenset[str] = frozenset()

    def matches(self, path: str) -> bool:
        path = path.rstrip("/")
        return path not in self.exempt and any(_compiled(p).match(path) for p in self.patterns)

    def pathspecs(self) -> list[str]:
        """The patterns as git pathspecs that match what `matches` does: each pattern, and
        everything below what it names (git's glob rules give that only to literal
        prefixes)."""
        specs = [spec for p in self.patterns
                 for spec in (f":(glob){p}", f":(glob){p.rstrip('/')}/**")]
        return specs + [f":(exclude,literal){p}" for p in sorted(self.exempt)]

    def split(self, root: Path) -> tuple[list[str], bool]:
        """The literal patterns that name a file (or nothing yet), and whether any pattern
        can cover more than one path (a wildcard, a directory)."""
        files: list[str] = []
        several = False
        for pattern in self.patterns:
            literal = _glob_unescape(pattern)
            if literal is None or (root / literal).is_dir():
                several = True
            else:
                files.append(literal)
        return files, several


def exempt_files(config: Config) -> frozenset[str]:
    """Files an agent is meant to edit: it ticks the tracker and keeps notes and memory."""
    files = config.files
    return frozenset(_normal(p) for p in (files.prd, files.progress, files.agents))


def fixed_patterns(config: Config) -> list[str]:
    """Protected whatever the gates are: ralph.toml, the PROMPT files, `[gates] protected`."""
    files = config.files
    prompts = [files.prompt, files.plan, files.general, files.judge, files.review,
               config.judge.prompt, config.review.prompt,
               *(config.role_prompt(role) for role in WORKFLOW_ROLES), files.nu]
    literal = [_glob_escape(_normal(p)) for p in (CONFIG_FILE, *prompts) if p]
    return list(dict.fromkeys([*literal, *config.gates.protected]))


def gate_words(command: str) -> list[str]:
    """The words of a gate command that name what the gate runs, as opposed to the code it
    checks: `ruff check src` protects nothing (the agent's work is in src), `sh gate.sh`
    protects gate.sh.

    Each simple command (between `;`, `&&`, `|`, ...) is read as a program and its
    arguments: a program given as a path (`./gate.sh`); the script an interpreter runs
    (`sh gate.sh`, `python check.py`, `node verify.js`); the tests a test runner runs
    (`pytest tests/unit`, `jest __tests__`: arguments with "test" or "spec" in their path);
    and a file fed to the command's input (`< fixture.txt`). Wrappers (`env`, `uv run`,
    `python -m`, `npx`, ...) hand on to the command they run; `sh -c '...'` is read too.
    Options and their values, words with expansions or wildcards, and output redirections do
    not count.
    """
    words: list[str] = []
    for simple, inputs in _simple_commands(_tokens(command)):
        words += _path_words(simple) + inputs
    return words


def _simple_commands(tokens: list[str]) -> list[tuple[list[str], list[str]]]:
    """Each simple command's words, and the files redirected into it (`< file`)."""
    commands: list[tuple[list[str], list[str]]] = [([], [])]
    redirect: str | None = None
    for token in tokens:
        if token and all(ch in ";&|()<>" for ch in token):
            if ">" in token or "<" in token:
                redirect = "in" if token == "<" else "out"
            else:
                commands.append(([], []))
            continue
        if redirect is not None:
            if redirect == "in" and _plain(token):
                commands[-1][1].append(token)
            redirect = None
            continue
        commands[-1][0].append(token)
    return [c for c in commands if c[0] or c[1]]


def _plain(word: str) -> bool:
    """A word that can name a file as it is written: no option, expansion or wildcard."""
    return bool(word) and not word.startswith("-") and not any(
        ch in word for ch in "$`*?[]{}~=\n")


def _path_words(words: list[str]) -> list[str]:
    rest = _unwrap(words)
    if not rest:
        return []
    program, args = rest[0], rest[1:]
    name = Path(program).name
    if name in _SHELLS and "-c" in args:  # sh -c 'script ...'
        inline = args[args.index("-c") + 1:args.index("-c") + 2]
        return gate_words(inline[0]) if inline else []
    found = [program] if "/" in program and _plain(program) else []
    if name in _INTERPRETERS or re.fullmatch(r"python[\d.]*", name):
        script = next((a for a in args if not a.startswith("-")), None)
        if script is not None and _plain(script):
            found.append(script)
    elif name in _TEST_RUNNERS:
        found += [a for a in args if _plain(a) and _TEST_WORD.search(a)]
    return found


def _unwrap(words: list[str]) -> list[str]:
    """Skip leading assignments and wrappers: `FOO=1 env uv run python -m pytest x` is
    `pytest x` as far as paths go."""
    rest = list(words)
    while rest:
        head = Path(rest[0]).name
        if "=" in rest[0] and not rest[0].startswith("="):
            rest = rest[1:]
        elif head in _WRAPPERS:
            rest = rest[1:]
            while rest and rest[0].startswith("-"):
                rest = rest[1:]
            if head == "timeout" and rest:  # its duration
                rest = rest[1:]
        elif (head in _RUN_WRAPPERS and len(rest) > 1 and rest[1] in ("run", "exec", "x")) or (
                re.fullmatch(r"python[\d.]*", head) and len(rest) > 2 and rest[1] == "-m"):
            rest = rest[2:]
        else:
            break
    return rest


async def protected_for(config: Config, git: Git, root: Path, head: str | None) -> Protected:
    """The iteration's protected patterns: the fixed ones, plus each word of a gate command
    that is a file or directory tracked in commit `head` (when `protect_gate_files`)."""
    patterns = fixed_patterns(config)
    if config.gates.protect_gate_files and head is not None:
        named = _candidates(config.gates.commands, root)
        if named:
            tracked = await _tracked(git, head, tuple(named))
            patterns += [_glob_escape(p) for p in named if p in tracked]
    return Protected(tuple(dict.fromkeys(patterns)), exempt_files(config))


# Files tools write beside the code as a matter of course (Python's bytecode and test caches):
# new ones under a protected path are removed before the gates, as any addition is, but do not
# fail the attempt: an agent that runs the tests itself makes them.
CACHE_DIRS = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache",
                        ".hypothesis"})
CACHE_SUFFIXES = (".pyc", ".pyo")


def is_cache(path: str) -> bool:
    parts = path.rstrip("/").split("/")
    return any(part in CACHE_DIRS for part in parts) or parts[-1].endswith(CACHE_SUFFIXES)


@dataclass
class Change:
    path: str  # a directory (a new ignored one, listed whole) ends with "/"
    change: str  # "modified", "deleted" or "added"

    @property
    def cache(self) -> bool:
        """A new cache file or directory: removed, but no sign of cheating."""
        return self.change == "added" and is_cache(self.path)


@dataclass
class Guard:
    """Protected paths over one iteration: their state at its start, what changed, putting it
    back. Paths that already differed from HEAD at the start are copied aside (with a
    manifest, so that a later process can put them back after a crash).

    What git status cannot show is looked at too: files hidden by a `.gitignore` (new
    ignored entries under protected directories, against a listing taken at the start),
    changes the agent committed, and index flags (`assume-unchanged`, `skip-worktree`) set
    on protected files, looked for when the agent touched the index."""

    git: Git
    root: Path
    protected: Protected
    head: str | None
    saved_dir: Path
    saved: dict[str, bool] = field(default_factory=dict)  # path -> existed at the start
    outputs: tuple[str, ...] = ()  # the gates' outputs: not inputs to protect
    ignored: frozenset[str] | None = None  # ignored entries under protected dirs at the start
    literal: dict[str, bool] = field(default_factory=dict)  # literal path -> existed
    index_stamp: tuple[int, int, int] | None = None
    index_copy: Path | None = None  # the index at the start: which flags were set then

    @classmethod
    async def begin(cls, config: Config, git: Git, root: Path, before: WorkTree,
                    saved_dir: Path, outputs: Sequence[str] = ()) -> Guard:
        protected = await protected_for(config, git, root, before.head)
        guard = cls(git, root, protected, before.head, saved_dir, outputs=tuple(outputs))
        dirty = [p for p in before.stamps if protected.matches(p)
                 and not guard._is_output(p, before)]
        if dirty:
            await asyncio.to_thread(guard._save, dirty)
        literal, listed = protected.split(root)
        guard.literal = {p: os.path.lexists(root / p) for p in literal}
        if listed:
            guard.ignored = frozenset(await git.ignored_files(protected.pathspecs(),
                                                              directory=True))
        index = await git.index_path()
        guard.index_stamp = file_signature(index)
        guard.index_copy = await asyncio.to_thread(_copy_index, index, saved_dir)
        return guard

    @classmethod
    def resume(cls, git: Git, root: Path, protected: Protected, head: str | None,
               saved_dir: Path, outputs: Sequence[str] = ()) -> Guard:
        """The guard of an iteration another process began (crash recovery)."""
        saved: dict[str, bool] = {}
        try:
            raw = orjson.loads((saved_dir / MANIFEST).read_bytes())
            saved = {str(k): bool(v) for k, v in raw.items()} if isinstance(raw, dict) else {}
        except (OSError, orjson.JSONDecodeError):
            pass
        return cls(git, root, protected, head, saved_dir, saved, outputs=tuple(outputs))

    def _save(self, paths: list[str]) -> None:
        for path in paths:
            source = self.root / path
            existed = os.path.lexists(source)
            self.saved[path] = existed
            if existed and not source.is_dir():
                copy = self.saved_dir / path
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, copy, follow_symlinks=False)
        self.saved_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(self.saved_dir / MANIFEST, orjson.dumps(self.saved), durable=False)

    async def changes(self, before: WorkTree, after: WorkTree) -> list[Change]:
        """What the agent changed under protected paths since `before` (taken at the start),
        and the cache files there (`Change.cache`: removed before the gates, not counted)."""
        touched = {p for p in after.touched_since(before) if self.protected.matches(p)}
        touched |= set(self.saved)  # a handful at most: their content is compared
        touched |= {p for p, existed in self.literal.items()
                    if not existed and os.path.lexists(self.root / p)}
        index_changed = self.index_stamp is not None and (
            file_signature(await self.git.index_path()) != self.index_stamp)
        if self.head is not None and (index_changed or after.head != before.head):
            # The agent ran git: what it committed, and protected files it hid from status
            # with index flags it set (cleared, so that the files are compared again).
            hidden = await self._new_flags()
            await self.git.clear_flags(hidden)
            touched |= set(hidden)
            touched |= set(await self.git.changed_since(self.head, self.protected.pathspecs()))
        touched = {p for p in touched if not self._is_output(p, after)}
        found = await self._classify(sorted(touched))
        caches = sorted(p for p in after.stamps if p not in touched and is_cache(p)
                        and after.stamps[p].startswith("??:") and self.protected.matches(p))
        if self.ignored is not None:
            now = await self.git.ignored_files(self.protected.pathspecs(), directory=True)
            found += [Change(p, "added") for p in await asyncio.to_thread(
                self._hidden_additions, [p for p in now if p not in self.ignored])
                if p not in touched]
            # Every cache under a protected directory goes, new or not: a crafted .pyc
            # in an existing __pycache__ would be run by the tests in place of their source.
            caches += [p for p in now if is_cache(p) and p not in caches]
        found += [Change(p, "added") for p in caches if not any(c.path == p for c in found)]
        return found

    def _hidden_additions(self, entries: list[str]) -> list[str]:
        """Of the ignored entries that are new since the start, those under a protected
        pattern: a directory matched as a whole, or the protected files inside it (at most
        MAX_WALK of them are looked at: a new node_modules/ is not the gates' input)."""
        found: list[str] = []
        for entry in entries:
            if covered(entry, self.outputs):
                continue
            if self.protected.matches(entry):
                found.append(entry)
            elif entry.endswith("/"):
                found += [f for f in _files_below(self.root, entry) if self.protected.matches(f)]
        return found

    async def _new_flags(self) -> list[str]:
        """Protected files with an index flag the agent set (flags set before the iteration,
        a user's skip-worktree file say, are left alone)."""
        now = await self.git.flagged_files(self.protected.pathspecs())
        if not now or self.index_copy is None:
            return now
        before = await self.git.flagged_files(self.protected.pathspecs(),
                                              index=self.index_copy)
        return [p for p in now if p not in set(before)]

    async def _classify(self, paths: list[str]) -> list[Change]:
        unsaved = [p for p in paths if p not in self.saved]
        in_head = set(await self._in_head(unsaved))
        differs = set(await self.git.changed_since(
            self.head, [f":(literal){p}" for p in sorted(in_head)])
        ) if in_head and self.head is not None else set()
        found: list[Change] = []
        for path in paths:
            exists = os.path.lexists(self.root / path)
            if path in self.saved:
                if await asyncio.to_thread(self._same_as_saved, path):
                    continue
                kind = "modified" if exists and self.saved[path] else (
                    "deleted" if self.saved[path] else "added")
            elif path in in_head:
                if path not in differs:
                    continue
                kind = "modified" if exists else "deleted"
            elif exists:
                kind = "added"
            else:
                continue  # added and removed again: nothing to put back
            found.append(Change(path, kind))
        return found

    async def diff(self, changes: Sequence[Change]) -> str:
        """The agent's change of these paths, as a diff against the iteration's start."""
        paths = [c.path.rstrip("/") for c in changes]
        return await self.git.diff(base=self.head, max_bytes=DIFF_BYTES, paths=paths)

    async def revert(self, changes: Sequence[Change]) -> None:
        """Put each path back to what it was at the start of the iteration: additions go
        first (a file may stand where a directory was, or the other way round)."""
        paths = [c.path for c in changes]
        from_copy = [p for p in paths if p in self.saved]
        rest = [p for p in paths if p not in self.saved]
        in_head = set(await self._in_head([p.rstrip("/") for p in rest]))
        added = [p for p in rest if p.rstrip("/") not in in_head]
        restore = [p for p in rest if p in in_head]
        await asyncio.to_thread(self._clear_the_way, added, restore, from_copy)
        await self.git.unstage_new([p.rstrip("/") for p in added])
        if restore and self.head is not None:
            await self.git.restore(restore, source=self.head)

    def _clear_the_way(self, added: list[str], restore: list[str], from_copy: list[str]
                       ) -> None:
        for path in added:
            _remove(self.root / path)
            _prune_empty_parents(self.root / path, self.root)
        for path in restore:  # a directory where the file was
            target = self.root / path
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target, ignore_errors=True)
        for path in from_copy:
            self._put_back_copy(path)

    # -- helpers ---------------------------------------------------------------------------

    async def _in_head(self, paths: Sequence[str]) -> list[str]:
        if not paths or self.head is None:
            return []
        return await self.git.files_in(self.head, paths)

    def _is_output(self, path: str, tree: WorkTree) -> bool:
        """An untracked file the gates made earlier: their output, not their input."""
        return tree.stamps.get(path, "").startswith("??:") and covered(path, self.outputs)

    def _same_as_saved(self, path: str) -> bool:
        current = self.root / path
        existed = self.saved[path]
        if not os.path.lexists(current):
            return not existed
        if not existed:
            return False
        copy = self.saved_dir / path
        try:
            if copy.is_symlink() or current.is_symlink():
                return copy.is_symlink() and current.is_symlink() and (
                    copy.readlink() == current.readlink())
            return copy.read_bytes() == current.read_bytes()
        except OSError:
            return False

    def _put_back_copy(self, path: str) -> None:
        target = self.root / path
        _remove(target)
        if self.saved[path]:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(self.saved_dir / path, target, follow_symlinks=False)


async def put_back(guard: Guard, changes: Sequence[Change], emit: EventSink, *,
                   task_id: str, attempt_id: str) -> list[Change]:
    """Revert `changes` and record those that count (cache files are only removed) as a
    `protected.reverted` event whose content is the agent's diff; those that count."""
    counted = [c for c in changes if not c.cache]
    diff = await guard.diff(counted) if counted else ""
    await guard.revert(changes)
    if counted:
        emit("protected.reverted", {
            "task_id": task_id, "attempt_id": attempt_id,
            "paths": [c.path for c in counted],
            "changes": [{"path": c.path, "change": c.change} for c in counted]},
            content=diff or None)
    return counted


def put_back_note(changes: Iterable[Change], attempt_id: str, task_id: str,
                  how: str = "") -> str:
    """The progress.md line that says what was put back."""
    return (f"Ralph put back protected paths the agent changed in attempt {attempt_id} of "
            f"task {task_id}{how}: {describe(changes, limit=20)}.")


def describe(changes: Iterable[Change], limit: int = 5) -> str:
    """`gate.sh (modified), tests/test_a.py (deleted)`, at most `limit` of them."""
    return listed([f"{c.path} ({c.change})" for c in changes], limit)


def changed_after(path: Path, since_ns: int) -> bool:
    """True if `path` was written at or after `since_ns` (wall clock, as file times are)."""
    try:
        st = path.lstat()
    except OSError:
        return False
    # ctime too: a tool that keeps the mtime (cp -p, tar) still sets it.
    return max(st.st_mtime_ns, st.st_ctime_ns) >= since_ns


MAX_WALK = 2000  # files looked at in one new ignored directory
INDEX_COPY_BYTES = 16 << 20  # a larger index is not copied (flags are then not compared)


def _files_below(root: Path, entry: str) -> list[str]:
    """Repo-relative files below directory `entry` (at most MAX_WALK)."""
    found: list[str] = []
    for top, dirs, files in os.walk(root / entry):
        dirs.sort()
        for name in sorted(files):
            found.append((Path(top) / name).relative_to(root).as_posix())
            if len(found) >= MAX_WALK:
                return found
    return found


def _copy_index(index: Path, saved_dir: Path) -> Path | None:
    """A copy of the index as it is at the start of the iteration (None if there is none,
    or it is too large to copy on every iteration)."""
    try:
        if index.stat().st_size > INDEX_COPY_BYTES:
            return None
        saved_dir.mkdir(parents=True, exist_ok=True)
        copy = saved_dir / "index"
        shutil.copyfile(index, copy)
    except OSError:
        return None
    return copy


def _prune_empty_parents(path: Path, root: Path) -> None:
    """Remove the directories an added file leaves empty (not `root`, not a kept one)."""
    parent = path.parent
    while parent != root and root in parent.parents:
        try:
            parent.rmdir()
        except OSError:  # not empty, or gone
            return
        parent = parent.parent


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _tokens(command: str) -> list[str]:
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # unbalanced quotes: the shell will complain; look at plain words
        return command.split()


def _candidates(commands: Sequence[str], root: Path) -> list[str]:
    """Repo-relative paths the gate commands name that exist in the work tree."""
    found: list[str] = []
    for command in commands:
        for word in gate_words(command):
            path = _inside(word, root)
            if path is not None and os.path.lexists(root / path):
                found.append(path)
    return list(dict.fromkeys(found))


def _inside(word: str, root: Path) -> str | None:
    """`word` as a path relative to `root`, or None when it leads outside (or is the root)."""
    if Path(word).is_absolute():
        try:
            word = os.path.relpath(word, root)
        except ValueError:
            return None
    path = _normal(word)
    if path in ("", ".") or path == ".." or path.startswith("../"):
        return None
    return path


def _normal(path: str) -> str:
    return os.path.normpath(path).replace(os.sep, "/")


_TRACKED: dict[tuple[str, tuple[str, ...]], frozenset[str]] = {}


async def _tracked(git: Git, head: str, named: tuple[str, ...]) -> frozenset[str]:
    """Which of `named` are files or directories with files in commit `head` (a commit never
    changes, so the answer is kept; a few entries at most)."""
    key = (head, named)
    if key not in _TRACKED:
        files = await git.files_in(head, list(named))
        tracked = {p for p in named if p in files or any(f.startswith(p + "/") for f in files)}
        if len(_TRACKED) > 32:
            _TRACKED.clear()
        _TRACKED[key] = frozenset(tracked)
    return _TRACKED[key]


def _glob_unescape(pattern: str) -> str | None:
    """The path a pattern without wildcards names (None when it has some)."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out.append(pattern[i + 1])
            i += 2
            continue
        if ch in "*?[":
            return None
        out.append(ch)
        i += 1
    return "".join(out).rstrip("/")


def _glob_escape(path: str) -> str:
    """A literal path as a glob pattern that matches only itself."""
    return re.sub(r"([*?\[\\])", r"\\\1", path)


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str]:
    """git's `:(glob)` rules as a regular expression; a match of a leading directory covers
    everything below it."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if pattern.startswith("**/", i) and (i == 0 or pattern[i - 1] == "/"):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i) and (i == 0 or pattern[i - 1] == "/") and i + 2 == n:
            out.append(".*")
            i += 2
        elif ch == "*":
            out.append("[^/]*")
            i += 1
        elif ch == "?":
            out.append("[^/]")
            i += 1
        elif ch == "\\" and i + 1 < n:
            out.append(re.escape(pattern[i + 1]))
            i += 2
        elif ch == "[":
            end = pattern.find("]", i + 2)
            if end < 0:
                out.append(re.escape(ch))
                i += 1
                continue
            body = pattern[i + 1:end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(ch))
            i += 1
    body = "".join(out).rstrip("/") if not pattern.endswith("**") else "".join(out)
    return re.compile(f"(?:{body})(?:/.*)?\\Z", re.DOTALL)

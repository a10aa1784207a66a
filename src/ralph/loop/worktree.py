"""What goes into Ralph's commits: an agent's commit holds the agent's work and nothing else.

- At the start of a step or run, changes to Ralph's own project files (ralph.toml, the PRD,
  progress.md, the PROMPT files, AGENTS.md, FEEDBACK.md, .gitignore) are committed on their
  own: editing the PRD between runs is the normal way to work. Any other change refuses the
  start, unless the user allows it, and then it is committed on its own too.
- An iteration stages what changed between the snapshot before the agent and the one after
  it, before the gates run; files the gates create (`__pycache__/`, build output, coverage
  files) are therefore not committed, and are remembered (state.json `gate_outputs`) so that
  they neither count as the user's changes at the next start nor slip into a later commit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from ralph.config import CONFIG_FILE, WORKFLOW_ROLES, Config
from ralph.git import Git, WorkTree
from ralph.loop.errors import LoopError
from ralph.loop.paths import RUNTIME_PATHS
from ralph.loop.state import LoopState
from ralph.tracker import Task

MAX_GATE_OUTPUTS = 200  # entries kept in state.json (directories count as one)


def project_files(config: Config) -> set[str]:
    """Ralph's own files in the project: what `ralph init` writes and the loop edits."""
    files = config.files
    names = {CONFIG_FILE, files.prd, files.progress, files.agents, files.prompt, files.plan,
             files.general, files.judge, files.review, files.feedback, files.nu, ".gitignore",
             config.judge.prompt, config.review.prompt,
             *(config.role_prompt(role) for role in WORKFLOW_ROLES)}
    return {n for n in names if n}


def ralph_files(config: Config, root: Path) -> list[str]:
    """The files Ralph itself edits during an iteration (the tracker, progress.md) that
    exist: staged with the iteration's commit."""
    files = config.files
    return [f for f in (files.prd, files.progress) if (root / f).exists()]


def covered(path: str, outputs: Iterable[str]) -> bool:
    """`path` is one of the gate outputs, or inside one (a directory entry ends with `/`)."""
    return any(path == o or (o.endswith("/") and path.startswith(o)) for o in outputs)


def _new_file(code: str) -> bool:
    """Untracked, or added to the index but in no commit yet (and maybe changed since)."""
    return code == "??" or code.startswith("A")


def _file_stamp(stamp: str) -> str:
    """`size:mtime` of a snapshot stamp (`code:size:mtime`): the code changes with staging."""
    return stamp.split(":", 1)[1] if ":" in stamp else stamp


def untracked_outputs(tree: WorkTree, outputs: Sequence[str]) -> list[str]:
    """The gates' earlier outputs in `tree`: never staged, even if an agent's `git add -A`
    staged them."""
    return [p for code, p in tree.changes if code.startswith("A") and covered(p, outputs)]


def agent_paths(before: WorkTree, after: WorkTree, outputs: Sequence[str]) -> list[str]:
    """Paths the agent changed (between the two snapshots) that can be staged: the gates'
    outputs left out, and untracked files that were there before and are gone now too."""
    codes = {p: c for c, p in after.changes}
    paths = []
    for path in after.touched_since(before):
        if covered(path, outputs) and _new_file(codes.get(path, "??")):
            continue
        if path not in after.stamps and before.stamps.get(path, "").startswith("??:"):
            continue  # an untracked file removed: git knows nothing to stage
        paths.append(path)
    return paths


def gate_changes(after: WorkTree, post: WorkTree, reverted: Iterable[str] = ()
                 ) -> tuple[list[str], dict[str, str]]:
    """What the gates (and the judge and reviewer) did to the tree: the untracked entries
    they made (`post` is taken with untracked="normal", so a new directory is one entry) and
    the tracked files they changed, with their stamps. `after` is the snapshot after the
    agent; `reverted` the protected paths Ralph put back in between."""
    skip = set(reverted)
    made: list[str] = []
    changed: dict[str, str] = {}
    for code, path in post.changes:
        if path in skip:
            continue
        if code == "??":
            if path in after.stamps or (path.endswith("/") and any(
                    p.startswith(path) for p in after.stamps)):
                continue  # there before the gates (a directory: something in it was)
            made.append(path)
        elif _file_stamp(post.stamps[path]) != _file_stamp(after.stamps.get(path, "")):
            changed[path] = _file_stamp(post.stamps[path])
    return made, changed


def remember_gate_outputs(state: LoopState, made: Sequence[str],
                          changed: dict[str, str] | None = None) -> None:
    """Add to state.json's gate outputs (the newest MAX_GATE_OUTPUTS of each kind kept)."""
    if made:
        kept = [p for p in state.gate_outputs if p not in made]
        state.gate_outputs = [*kept, *made][-MAX_GATE_OUTPUTS:]
    if changed:
        merged = {**{p: s for p, s in state.gate_changed.items() if p not in changed},
                  **changed}
        state.gate_changed = dict(list(merged.items())[-MAX_GATE_OUTPUTS:])


def by_gates(code: str, path: str, stamp: str, state: LoopState) -> bool:
    """A change in the tree that the gates made, as they left it."""
    if _new_file(code):
        return code == "??" and covered(path, state.gate_outputs)
    return state.gate_changed.get(path) == _file_stamp(stamp)


def tree_is_clean(tree: WorkTree, state: LoopState) -> bool:
    """Nothing is left uncommitted but what the gates made or changed."""
    return all(by_gates(code, path, tree.stamps.get(path, ""), state)
               for code, path in tree.changes)


def listed(items: Sequence[str], limit: int = 8) -> str:
    """`a, b, c and 4 more`: at most `limit` of `items`."""
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more


def attempt_message(config: Config, task: Task | tuple[str, str], iteration: int,
                    attempt: int | str, status: str | None, reason: str | None) -> str:
    """An iteration's commit message: the configured one, and for an attempt that was not
    verified `(attempt N, not verified: why)`, or `(attempt N, stopped: why)` and the like
    for one that ended without a verdict."""
    task_id, title = (task.id, task.title) if isinstance(task, Task) else task
    message = config.git.format_commit_message(task_id=task_id, title=title,
                                               iteration=iteration)
    if status is None:
        return message
    how = "not verified" if status in ("not_done", "agent_failed") else status
    return f"{message} (attempt {attempt}, {how}: {reason or 'no reason recorded'})"


async def prepare_tree(git: Git, config: Config, state: LoopState, run_id: str, *,
                       allow_dirty: bool, require_clean: bool, commit: bool = True
                       ) -> list[str]:
    """Before a step or run: commit Ralph's project files, refuse (LoopError) or commit other
    changes; the commits made. `commit=False` only checks (a face refusing a run at once)."""
    tree = await git.snapshot(exclude=RUNTIME_PATHS)
    state.gate_outputs = [o for o in state.gate_outputs if (git.root / o).exists()]
    state.gate_changed = {p: s for p, s in state.gate_changed.items() if p in tree.stamps}
    changed = [p for code, p in tree.changes
               if not by_gates(code, p, tree.stamps.get(p, ""), state)]
    if require_clean and changed:
        raise LoopError(f"the working tree has uncommitted changes (--require-clean): "
                        f"{listed(changed)}; commit or stash them first")
    if not config.git.auto_commit:  # Ralph commits nothing: nothing of the user's can mix in
        return []
    ours = project_files(config)
    project = [p for p in changed if p in ours]
    others = [p for p in changed if p not in ours]
    if others and not allow_dirty:
        raise LoopError(f"the working tree has changes Ralph did not make: {listed(others)}; "
                        "commit or stash them, or pass --allow-dirty to commit them first "
                        "on their own")
    commits = []
    if commit and project:
        sha = await git.commit_paths(f"ralph: project files before run {run_id}", project)
        commits += [sha] if sha else []
    if commit and others:
        sha = await git.commit_paths(f"ralph: changes present before run {run_id}", others)
        commits += [sha] if sha else []
    return commits

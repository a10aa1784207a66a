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

from ralph.config import CONFIG_FILE, Config
from ralph.git import Git, WorkTree
from ralph.loop.errors import LoopError
from ralph.loop.paths import RUNTIME_PATHS
from ralph.loop.state import LoopState

MAX_GATE_OUTPUTS = 200  # entries kept in state.json (directories count as one)
SHOWN_PATHS = 8  # paths listed in an error message


def project_files(config: Config) -> set[str]:
    """Ralph's own files in the project: what `ralph init` writes and the loop edits."""
    files = config.files
    names = {CONFIG_FILE, files.prd, files.progress, files.agents, files.prompt, files.plan,
             files.general, files.judge, files.review, files.feedback, ".gitignore",
             config.judge.prompt, config.review.prompt}
    return {n for n in names if n}


def covered(path: str, outputs: Iterable[str]) -> bool:
    """`path` is one of the gate outputs, or inside one (a directory entry ends with `/`)."""
    return any(path == o or (o.endswith("/") and path.startswith(o)) for o in outputs)


def agent_paths(before: WorkTree, after: WorkTree, outputs: Sequence[str]) -> list[str]:
    """Paths the agent changed (between the two snapshots) that `git add` can stage: gate
    outputs left out, and untracked files that were there before and are gone now too."""
    paths = []
    for path in after.touched_since(before):
        if covered(path, outputs):
            continue
        if path not in after.stamps and before.stamps.get(path, "").startswith("??:"):
            continue  # an untracked file removed: git knows nothing to stage
        paths.append(path)
    return paths


def new_gate_outputs(after: WorkTree, post: WorkTree) -> list[str]:
    """Untracked entries in `post` (taken after the gates with untracked="normal", so that
    a new directory is one entry) that the snapshot `after` the agent did not have."""
    found = []
    for code, path in post.changes:
        if code != "??" or path in after.stamps:
            continue
        if path.endswith("/") and any(p.startswith(path) for p in after.stamps):
            continue  # the directory held untracked files before the gates already
        found.append(path)
    return found


def remember_gate_outputs(state: LoopState, paths: Sequence[str]) -> None:
    """Add `paths` to state.json's gate outputs (the newest MAX_GATE_OUTPUTS are kept)."""
    if paths:
        kept = [p for p in state.gate_outputs if p not in paths]
        state.gate_outputs = [*kept, *paths][-MAX_GATE_OUTPUTS:]


def shown(paths: Sequence[str]) -> str:
    more = f" and {len(paths) - SHOWN_PATHS} more" if len(paths) > SHOWN_PATHS else ""
    return ", ".join(paths[:SHOWN_PATHS]) + more


async def prepare_tree(git: Git, config: Config, state: LoopState, run_id: str, *,
                       allow_dirty: bool, require_clean: bool, commit: bool = True
                       ) -> list[str]:
    """Before a step or run: commit Ralph's project files, refuse (LoopError) or commit other
    changes; the commits made. `commit=False` only checks (a face refusing a run at once)."""
    tree = await git.snapshot(exclude=RUNTIME_PATHS)
    state.gate_outputs = [o for o in state.gate_outputs if (git.root / o).exists()]
    changed = [p for _, p in tree.changes if not covered(p, state.gate_outputs)]
    if require_clean and changed:
        raise LoopError(f"the working tree has uncommitted changes (--require-clean): "
                        f"{shown(changed)}; commit or stash them first")
    if not config.git.auto_commit:  # Ralph commits nothing: nothing of the user's can mix in
        return []
    ours = project_files(config)
    project = [p for p in changed if p in ours]
    others = [p for p in changed if p not in ours]
    if others and not allow_dirty:
        raise LoopError(f"the working tree has changes Ralph did not make: {shown(others)}; "
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

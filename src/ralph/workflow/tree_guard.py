"""The project's tree around one role call: what a role may not touch outside its session.

The session-file checks (ralph.workflow.checks) see only the session directory. Around each
role call the tree guard also looks at the project, with the loop's own machinery
(ralph.loop.protect): protected paths (ralph.toml, the PROMPT files including the roles'
instructions, what the gates run, `[gates] protected`) changed by any role are put back and
are a contract violation, as the loop puts them back after an iteration; and a planner,
questioner or reviewer that changes any project file outside its session directory has
broken its contract (only the executor does the work; the caches a test run leaves, such as
`__pycache__/`, do not count). Such a change is reported, not undone: the result is not
used, so the task is not done, and its gates run again after the next attempt. Outside a
git repository nothing is looked at.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ralph.config import Config
from ralph.git import Git, WorkTree
from ralph.loop.paths import RUNTIME_PATHS, ProjectPaths
from ralph.loop.protect import Guard, describe, is_cache
from ralph.loop.state import load_state
from ralph.loop.worktree import by_gates, listed
from ralph.workflow.checks import Violation
from ralph.workflow.session_dir import SessionDir


@dataclass
class TreeGuard:
    """The tree as a role call found it (see the module docstring)."""

    git: Git
    before: WorkTree
    guard: Guard
    session: SessionDir

    @classmethod
    async def begin(cls, config: Config, root: Path, session: SessionDir,
                    saved_dir: Path) -> TreeGuard | None:
        """The guard of a call about to run; None outside a git repository."""
        git = Git(root)
        if not await git.is_repo():
            return None
        before = await git.snapshot(exclude=RUNTIME_PATHS)
        outputs = load_state(ProjectPaths(root).state, repair=False).gate_outputs
        guard = await Guard.begin(config, git, root, before, saved_dir, outputs=outputs)
        return cls(git, before, guard, session)

    async def check(self, role: str) -> list[Violation]:
        """The role's changes it had no right to make (protected ones put back)."""
        after = await self.git.snapshot(exclude=RUNTIME_PATHS)
        changes = [change for change in await self.guard.changes(self.before, after)
                   if not change.cache]
        found: list[Violation] = []
        if changes:
            await self.guard.revert(changes)
            found.append(Violation(f"the {role} leaves Ralph's files and what the gates run "
                                   "as they are", f"{describe(changes)}: put back"))
        if role == "executor":
            return found
        reverted = {change.path for change in changes}
        own = (self.session.relative(self.session.path) + "/",
               self.session.relative(self.session.instructions))
        state = load_state(ProjectPaths(self.git.root).state, repair=False)
        outside = [path for path in after.touched_since(self.before)
                   if not path.startswith(own[0]) and path != own[1]
                   and path not in reverted and not is_cache(path)
                   and not by_gates(_code(after, path), path, after.stamps.get(path, ""),
                                    state)]
        if outside:
            found.append(Violation(f"the {role} changes no project file outside its session "
                                   f"({own[0]})", f"{listed(outside)} changed"))
        return found


def _code(tree: WorkTree, path: str) -> str:
    return next((code for code, changed in tree.changes if changed == path), "  ")

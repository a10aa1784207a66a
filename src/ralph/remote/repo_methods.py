"""The remote API's repository methods (`git/status`, `git/diff`, `file/get`): translations to
ralph.repo, confined to the repository. (Being written.)"""

from __future__ import annotations

from pathlib import Path

from ralph.rpc import Registry


def register(registry: Registry, root: Path) -> None:
    """Add git/status, git/diff and file/get on the repository at `root`."""

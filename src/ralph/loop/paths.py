"""Where the loop keeps its files under the project root."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# Runtime parts of .ralph/: never committed, never counted as the agent's changes.
RUNTIME_PATHS = (".ralph/state.json", ".ralph/state.json.damaged", ".ralph/logs",
                 ".ralph/receipts", ".ralph/context", ".ralph/attempts", ".ralph/store",
                 ".ralph/cache", ".ralph/sessions", ".ralph/workflows", ".ralph/loop.lock",
                 ".ralph/serve.json")


@dataclass(frozen=True)
class ProjectPaths:
    root: Path

    @property
    def ralph_dir(self) -> Path:
        return self.root / ".ralph"

    @property
    def state(self) -> Path:
        return self.ralph_dir / "state.json"

    @property
    def store(self) -> Path:
        return self.ralph_dir / "store"

    @property
    def lock(self) -> Path:
        return self.ralph_dir / "loop.lock"

    def log(self, iteration: int, suffix: str = "") -> Path:
        return self.ralph_dir / "logs" / f"{iteration:06d}{suffix}.log"

    def context_dir(self, task_id: str, attempt_id: str) -> Path:
        return self.ralph_dir / "context" / task_id / attempt_id

    def receipts_dir(self, task_id: str, attempt_id: str) -> Path:
        return self.ralph_dir / "receipts" / task_id / attempt_id

    def attempts_dir(self, task_id: str) -> Path:
        return self.ralph_dir / "attempts" / task_id

    def attempt_file(self, task_id: str, attempt_id: str) -> Path:
        return self.attempts_dir(task_id) / f"{attempt_id}.json"

    def tracker_at_start(self, suffix: str) -> Path:
        """The tracker file as the iteration in flight found it (for recovery)."""
        return self.ralph_dir / "context" / f"tracker-at-start{suffix}"

    def relative(self, path: Path) -> str:
        """A path as shown in results: relative to the project root when inside it."""
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return str(path)

"""A scratch project for loop tests: a git repository, `ralph init`'s files, a PRD, and the
scriptable fake agent (ralph.testing.fake_agent) configured as agent `fake`."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ralph.loop import LoopService
from ralph.loop.results import StepResult
from ralph.scaffold import scaffold
from ralph.store import Frame

THREE_TASKS = """# Test project

## Tasks

- [ ] 1. First task
  - it works
- [ ] 2. Second task
  - Depends on: 1
- [ ] 3. Third task
"""


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL).stdout


@dataclass
class Project:
    root: Path
    plan_path: Path

    def plan(self, plan: dict[str, Any]) -> None:
        self.plan_path.write_text(json.dumps(plan))
        self.plan_path.with_name(self.plan_path.name + ".calls.json").unlink(missing_ok=True)

    def config(self, extra: str = "", *, gates: list[str] | None = None) -> None:
        """ralph.toml: the fake agent as default, fast rate-limit waits, `extra` appended."""
        argv = [sys.executable, "-m", "ralph.testing.fake_agent", "--plan", str(self.plan_path)]
        gate_list = json.dumps(gates if gates is not None else [])
        text = (f'[loop]\ndefault_agent = "fake"\nrate_limit_max_wait_seconds = 1\n'
                f"max_iterations = 10\n\n[agents.fake]\nargv = {json.dumps(argv)}\n"
                f"timeout_seconds = 60\n\n[gates]\ncommands = {gate_list}\n{extra}")
        (self.root / "ralph.toml").write_text(text)

    def prd(self, text: str) -> None:
        (self.root / "PRD.md").write_text(text)

    def commit(self, message: str = "setup") -> None:
        git(self.root, "add", "-A")
        git(self.root, "commit", "-q", "-m", message)

    def service(self, events: list[Frame] | None = None) -> LoopService:
        return LoopService(self.root, observer=events.append if events is not None else None)

    def log(self) -> list[str]:
        return git(self.root, "log", "--format=%s").splitlines()

    def read_prd(self) -> str:
        return (self.root / "PRD.md").read_text()

    def state(self) -> dict[str, Any]:
        return dict(json.loads((self.root / ".ralph" / "state.json").read_text()))


def new_repository(root: Path) -> None:
    """`root`: a new git repository (with a committer) and `ralph init`'s files (md PRD)."""
    root.mkdir()
    git(root, "init", "-q")
    git(root, "config", "user.name", "Test")
    git(root, "config", "user.email", "test@localhost")
    scaffold(root, "md", False)


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    root = tmp_path / "proj"
    new_repository(root)
    proj = Project(root, tmp_path / "plan.json")
    proj.prd(THREE_TASKS)
    proj.plan({"default": {"print": ["did nothing"]}})
    proj.config()
    proj.commit()
    yield proj


async def step_with_events(project: Project) -> tuple[StepResult, list[Frame]]:
    """One `step` of the project's loop; its result and every event it appended."""
    events: list[Frame] = []
    service = project.service(events)
    try:
        result = await service.step()
    finally:
        await service.aclose()
    return result, events


async def wait_for(predicate: Callable[[], object], timeout: float = 30) -> None:
    """Poll `predicate` until it is true (AssertionError after `timeout` seconds)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


def start_orchestrator(root: Path) -> subprocess.Popen[bytes]:
    """`LoopService(root).run()` in a process of its own session, for tests that kill it."""
    script = textwrap.dedent("""
        import asyncio, sys
        from pathlib import Path
        from ralph.loop import LoopService
        asyncio.run(LoopService(Path(sys.argv[1])).run())
    """)
    return subprocess.Popen([sys.executable, "-c", script, str(root)], start_new_session=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def kill_guard_of(owner: str) -> None:
    """SIGKILL the guard process of the orchestrator whose owner id is `owner`."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(b"procguard" in a for a in argv) and owner.encode() in argv:
            os.kill(int(entry.name), signal.SIGKILL)
            return
    raise AssertionError(f"no guard process for {owner}")

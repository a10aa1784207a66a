"""What the run tests share: a project in a bare repository, `ralph worker` processes, and
`ralph` commands against a Temporal server and a shared store."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ralph.scaffold import scaffold

RALPH = [sys.executable, "-m", "ralph"]
TIMEOUT_S = 180
ROOT = Path(__file__).resolve().parents[2]


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL).stdout


def seed_repository(base: Path, tasks: list[str], plan: dict[str, Any],
                    gates: list[str] | None = None) -> tuple[Path, Path]:
    """A project (ralph init's files, the fake agent, a PRD of `tasks`) pushed to a bare
    repository; (the bare repository, the plan file)."""
    seed = base / "seed"
    seed.mkdir(parents=True)
    git(seed, "init", "-q", "-b", "main")
    git(seed, "config", "user.name", "Test")
    git(seed, "config", "user.email", "test@localhost")
    scaffold(seed, "md", False)
    plan_path = base / "plan.json"
    plan_path.write_text(json.dumps(plan))
    argv = [sys.executable, "-m", "ralph.testing.fake_agent", "--plan", str(plan_path)]
    (seed / "ralph.toml").write_text(
        f'[loop]\ndefault_agent = "fake"\nmax_iterations = 10\n\n[agents.fake]\n'
        f"argv = {json.dumps(argv)}\ntimeout_seconds = 120\n\n[gates]\n"
        f"commands = {json.dumps(gates or [])}\n")
    lines = "\n".join(f"- [ ] {n}. {title}" for n, title in enumerate(tasks, 1))
    (seed / "PRD.md").write_text(f"# Project\n\n## Tasks\n\n{lines}\n")
    git(seed, "add", "-A")
    git(seed, "commit", "-q", "-m", "seed")
    bare = base / "repo.git"
    git(base, "clone", "-q", "--bare", str(seed), str(bare))
    return bare, plan_path


def env() -> dict[str, str]:
    """The children's environment: this checkout's ralph, no Temporal or store from outside."""
    return {**{k: v for k, v in os.environ.items()
               if not k.startswith(("RALPH_TEMPORAL", "RALPH_STORE"))},
            "PYTHONPATH": str(ROOT / "src")}


@dataclass
class Worker:
    """`ralph worker` in its own process group; its stderr collected."""

    name: str
    proc: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)

    @classmethod
    def start(cls, name: str, address: str, store: str, workdir: Path) -> Worker:
        proc = subprocess.Popen(
            [*RALPH, "worker", "--temporal", address, "--store", store, "--workdir",
             str(workdir), "--name", name, "--concurrency", "2"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True, start_new_session=True, env=env(), cwd=workdir.parent)
        worker = cls(name, proc)
        ready = threading.Event()

        def read() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                worker.lines.append(line)
                if "polls queue" in line:
                    ready.set()

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + 60
        while not ready.wait(0.1):
            if proc.poll() is not None or time.monotonic() > deadline:
                worker.kill()
                raise AssertionError(f"worker {name} did not start: {''.join(worker.lines)}")
        return worker

    def kill(self) -> None:
        """SIGKILL the worker process alone (not its group): what its own containment must
        clean up is then left to it."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        """SIGTERM, then its whole group is ended whatever happens."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)


def ralph(*args: str, cwd: Path, timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RALPH, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, check=False, stdin=subprocess.DEVNULL, env=env(),
                          start_new_session=True)


def start_ralph(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([*RALPH, *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                            env=env(), start_new_session=True)


def wait_until(predicate: Any, timeout: float = 60, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached in {timeout} s")
        time.sleep(0.05)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False

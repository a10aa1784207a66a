"""examples/bridge_client.py as its docstring runs it: with `ralph` on PATH or not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.loop.conftest import Project

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "bridge_client.py"


def path_without_ralph() -> str:
    """PATH with every directory holding a `ralph` left out (git and the rest stay)."""
    return os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                           if d and not (Path(d) / "ralph").exists())


def run_example(python: str, project: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": path_without_ralph()}
    return subprocess.run([python, str(EXAMPLE), str(project)], env=env, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL, check=False)


def test_the_example_finds_ralph_beside_its_interpreter(project: Project) -> None:
    assert Path(sys.executable).with_name("ralph").is_file()  # this virtualenv's ralph
    done = run_example(sys.executable, project.root)
    assert done.returncode == 0, done.stderr
    assert "ping: {'ok': True" in done.stdout and "status: 0/3 done" in done.stdout
    assert done.stdout.rstrip().endswith("'type': 'bridge_stopped'}")


def test_the_example_says_when_there_is_no_ralph(project: Project, tmp_path: Path) -> None:
    bare = tmp_path / "bin" / "python3"
    bare.parent.mkdir()
    bare.symlink_to(sys.executable)  # the same interpreter, with no ralph beside it
    done = run_example(str(bare), project.root)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr == (f"error: ralph is neither on PATH nor beside {bare}: install Ralph "
                           "(`make demo` in its checkout) and run this with .venv/bin/python, "
                           "or put ralph on PATH\n")


def test_the_example_reports_a_bridge_that_cannot_start(project: Project) -> None:
    (project.root / "ralph.toml").write_text("[loop]\nmax_iterations = 0\n")
    done = run_example(sys.executable, project.root)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "loop.max_iterations" in done.stderr  # the bridge's own line
    assert done.stderr.rstrip().endswith("error: the bridge exited")

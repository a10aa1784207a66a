"""Bad input to the scale-out commands: one line on stderr, exit 2, nothing started."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scale.runs import ralph, seed_repository

UNREACHABLE = "127.0.0.1:1"  # nothing listens there: a command that got that far would say so


@pytest.mark.parametrize(("args", "words"), [
    (["run", "--repo", "x"], "--repo needs --on temporal"),
    (["run", "--on", "elsewhere"], "--on must be local or temporal"),
    (["run", "--on", "temporal"], "--on temporal needs --repo URL"),
    (["run", "--on", "temporal", "--repo", "REPO", "--temporal", UNREACHABLE],
     "name the store the workers share"),
    (["run", "--on", "temporal", "--repo", "REPO", "--temporal", UNREACHABLE, "--detach",
      "--heartbeat-seconds", "0.1"], "--heartbeat-seconds must be between 0.5 and 3600"),
    (["run", "--on", "temporal", "--repo", "REPO", "--temporal", UNREACHABLE, "--detach",
      "--branch", "bad..name"], "invalid branch name: 'bad..name'"),
    (["run", "--on", "temporal", "--repo", "REPO", "--temporal", UNREACHABLE, "--detach",
      "--base", "nope"], "the base branch nope does not exist"),
    (["run", "--on", "temporal", "--repo", "/nowhere/repo.git", "--temporal", UNREACHABLE,
      "--detach"], "cannot reach /nowhere/repo.git"),
    (["run", "--on", "temporal", "--repo", "REPO", "--temporal", UNREACHABLE, "--detach"],
     "cannot reach Temporal at 127.0.0.1:1: connection refused"),
    (["status", "--temporal", UNREACHABLE], "--temporal and --namespace need --run ID"),
    (["stop", "--run", "run_x"], "name the Temporal server: --temporal HOST:PORT"),
    (["pause", "--run", "run_x", "--temporal", UNREACHABLE],
     "cannot reach Temporal at 127.0.0.1:1"),
    (["worker"], "name the Temporal server: --temporal HOST:PORT"),
    (["worker", "--temporal", "nocolon"], "--temporal must be HOST:PORT"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], words: str) -> None:
    bare, _plan = seed_repository(tmp_path, ["Only"], {"tasks": {}})
    result = ralph(*[str(bare) if a == "REPO" else a for a in args], cwd=tmp_path, timeout=60)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stderr.count("\n") == 1 and words in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""

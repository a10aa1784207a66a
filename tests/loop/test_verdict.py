"""The verdict judges the task's own tree, a run goes on while tasks are ready, failures no
retry can fix stop the run at once, and a run without gates says what its evidence is."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ralph.store import Frame
from ralph.testing import misbehaving
from tests.loop.conftest import Project, git, step_with_events

RALPH = [sys.executable, "-m", "ralph"]
INDEPENDENT = """# Test project

## Tasks

- [ ] 1. First task
- [ ] 2. Second task
  - Depends on: 1
- [ ] 3. Third task
"""

# An acceptance check per ticked task: task N ticked needs done_N.txt.
ACCEPTANCE = ("for id in $(sed -n 's/^- \\[x\\] \\([0-9]*\\)\\..*/\\1/p' PRD.md); do "
              'test -f "done_$id.txt" || { echo "task $id has no done_$id.txt"; exit 1; }; done')


def _ralph(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RALPH, *args], cwd=root, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120, check=False)


async def test_other_ticks_are_reopened_before_the_gates_run(project: Project) -> None:
    project.config(gates=[ACCEPTANCE])
    project.commit("acceptance gate")
    project.plan({"tasks": {"1": [misbehaving.tick_everything(
        "2", "3", work={"done_1.txt": "the work\n"})]}})
    result, events = await step_with_events(project)
    assert result.verified, result.reason  # the real work passes its own check
    prd = project.read_prd()
    assert "- [x] 1." in prd and "- [ ] 2." in prd and "- [ ] 3." in prd
    topics = [f.topic for f in events]
    assert topics.index("task.reopened") < topics.index("gate.started")


async def test_a_blocked_task_moves_the_run_on_to_the_next_ready_one(project: Project) -> None:
    project.prd(INDEPENDENT)
    project.commit("independent task 3")
    project.plan({"tasks": {"1": [{"print": ["cannot do it"]}],
                            "3": [{"tick": True, "write": {"three.txt": "3\n"}}]}})
    events: list[Frame] = []
    service = project.service(events)
    try:
        outcome = await service.run()
    finally:
        await service.aclose()
    assert outcome.reason == "no_progress"
    assert "no task can move" in outcome.message
    prd = project.read_prd()
    assert "- [-] 1." in prd and "- [x] 3." in prd and "- [ ] 2." in prd
    worked = [f.meta["task_id"] for f in events if f.topic == "iteration.started"]
    assert worked == ["1", "1", "1", "3"]


async def test_a_run_of_no_change_at_all_still_stops(project: Project) -> None:
    """no_progress_limit iterations in a row that change nothing end the run, when they
    come before a block."""
    config = project.root / "ralph.toml"
    config.write_text(config.read_text().replace(
        "max_iterations = 10", "max_iterations = 10\nno_progress_limit = 2\n"
        "max_attempts_per_task = 5"))
    project.commit("limits")
    project.plan({"default": {"print": ["nothing"]}})
    service = project.service()
    try:
        outcome = await service.run()
    finally:
        await service.aclose()
    assert outcome.reason == "no_progress" and outcome.iterations == 2
    assert "no progress in 2 iterations" in outcome.message


def test_an_agent_that_is_not_logged_in_stops_the_run_at_once(project: Project) -> None:
    project.plan({"default": misbehaving.not_logged_in()})
    head = git(project.root, "rev-parse", "HEAD")
    prd = project.read_prd()
    result = _ralph(project.root, "run")
    assert result.returncode == 2, result.stderr
    said = [line for line in result.stderr.splitlines() if "could not authenticate" in line]
    assert len(said) == 1, result.stderr
    assert "agent 'fake'" in said[0] and "401" in said[0]
    state = project.state()
    assert state["tasks"]["1"]["failures"] == 0 and state["tasks"]["1"]["blocked"] is None
    assert state["iteration_count"] == 1  # one iteration, not three
    assert git(project.root, "rev-parse", "HEAD") == head  # nothing committed
    assert project.read_prd() == prd  # no Blocked: line
    assert '"stopped"' not in result.stdout
    quiet = _ralph(project.root, "step", "--quiet")
    assert quiet.returncode == 2
    assert quiet.stderr.count("could not authenticate") == 1, quiet.stderr


def test_an_agent_that_is_not_executable_stops_before_any_attempt(project: Project,
                                                                   tmp_path: Path) -> None:
    program = tmp_path / "agent.sh"
    program.write_text("#!/bin/sh\necho hi\n")
    program.chmod(0o644)
    config = project.root / "ralph.toml"
    config.write_text(f'[loop]\ndefault_agent = "bad"\n\n[agents.bad]\nargv = ["{program}"]\n')
    project.commit("bad agent")
    for command in ("step", "run"):
        result = _ralph(project.root, command)
        assert result.returncode == 2, result.stderr
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "agent 'bad'" in errors[0], result.stderr
        assert "chmod +x" in errors[0]
        assert len(result.stderr.splitlines()) == 1, result.stderr
    assert project.state().get("iteration_count", 0) == 0


def test_an_agent_of_the_wrong_format_stops_before_any_attempt(project: Project,
                                                                tmp_path: Path) -> None:
    program = tmp_path / "agent.bin"
    program.write_bytes(b"\x00\x01not a program\n")
    program.chmod(0o755)
    config = project.root / "ralph.toml"
    config.write_text(f'[loop]\ndefault_agent = "bad"\n\n[agents.bad]\nargv = ["{program}"]\n')
    project.commit("bad agent")
    result = _ralph(project.root, "step")
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("error:") == 1 and "agent 'bad'" in result.stderr
    assert "exec format" in result.stderr


def test_no_gates_warns_once_at_the_start(project: Project) -> None:
    project.plan({"default": {"tick": True}})
    result = _ralph(project.root, "run")
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("no gates are configured") == 1
    project.config(gates=["true"])
    project.commit("a gate")
    project.prd(project.read_prd().replace("[x]", "[ ]"))
    project.commit("again")
    result = _ralph(project.root, "step")
    assert "no gates are configured" not in result.stderr

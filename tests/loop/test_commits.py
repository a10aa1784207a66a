"""What gets committed: the user's changes never go into an agent's commit. Ralph's own
project files are committed on their own before a run, other changes refuse the start unless
--allow-dirty commits them on their own too, what the gates create stays out, and what a
stopped or killed iteration left is committed as that attempt's work."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ralph.loop import LoopError
from ralph.loop.service import LIFE_SLACK_NS
from ralph.store import Frame
from ralph.testing import misbehaving
from tests.loop.conftest import (
    THREE_TASKS,
    Project,
    git,
    new_repository,
    start_orchestrator,
    wait_for,
)

RALPH = [sys.executable, "-m", "ralph"]


def _ralph(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RALPH, *args], cwd=root, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120, check=False)


def _files_of(root: Path, rev: str) -> list[str]:
    out = git(root, "show", "--name-only", "--format=", rev)
    return sorted(line for line in out.splitlines() if line)


def _subjects(root: Path) -> list[str]:
    return git(root, "log", "--format=%s").splitlines()


def test_a_dirty_tree_refuses_the_start_with_the_files_named(project: Project) -> None:
    project.plan({"default": {"tick": True}})
    (project.root / "scratch.txt").write_text("work in progress\n")
    (project.root / "notes").mkdir()
    (project.root / "notes" / "idea.md").write_text("an idea\n")
    head = git(project.root, "rev-parse", "HEAD")
    for command in ("step", "run"):
        result = _ralph(project.root, command, "--quiet")
        assert result.returncode == 2, result.stderr
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
        assert "notes/idea.md, scratch.txt" in lines[0] and "--allow-dirty" in lines[0]
    assert git(project.root, "rev-parse", "HEAD") == head  # nothing committed
    assert "- [ ] 1." in project.read_prd()  # no agent ran
    assert project.state().get("active_run") is None


def test_allow_dirty_commits_the_changes_on_their_own_first(project: Project) -> None:
    project.plan({"default": {"tick": True, "write": {"work.txt": "the agent's\n"}}})
    (project.root / "scratch.txt").write_text("work in progress\n")
    result = _ralph(project.root, "step", "--quiet", "--allow-dirty")
    assert result.returncode == 0, result.stderr
    subjects = _subjects(project.root)
    assert subjects[0] == "ralph: 1 First task"
    assert subjects[1].startswith("ralph: changes present before run run_")
    assert _files_of(project.root, "HEAD~1") == ["scratch.txt"]
    assert _files_of(project.root, "HEAD") == ["PRD.md", "work.txt"]


def test_require_clean_refuses_even_ralphs_own_files(project: Project) -> None:
    with (project.root / "PRD.md").open("a") as handle:
        handle.write("- [ ] 4. Fourth task\n")
    result = _ralph(project.root, "step", "--quiet", "--require-clean")
    assert result.returncode == 2 and "--require-clean" in result.stderr and (
        "PRD.md" in result.stderr)


def test_the_readme_flow_commits_the_project_files_apart_from_the_agents_work(
        tmp_path: Path) -> None:
    """git init, ralph init, edit PRD.md, ralph step: the scaffold and the PRD are one
    commit, the agent's work another."""
    root = tmp_path / "proj"
    new_repository(root)
    (root / "PRD.md").write_text(THREE_TASKS)
    plan = tmp_path / "plan.json"
    plan.write_text('{"default": {"tick": true, "write": {"src/app.py": "print(1)\\n"}}}')
    config = root / "ralph.toml"
    config.write_text(config.read_text() + f"\n[agents.fake]\nargv = "
                      f'["{sys.executable}", "-m", "ralph.testing.fake_agent", "--plan", '
                      f'"{plan}"]\n')
    result = _ralph(root, "step", "--quiet", "--agent", "fake")
    assert result.returncode == 0, result.stderr
    subjects = _subjects(root)
    assert len(subjects) == 2
    assert subjects[1].startswith("ralph: project files before run run_")
    first = _files_of(root, "HEAD~1")
    assert "PRD.md" in first and "ralph.toml" in first and ".gitignore" in first
    assert "src/app.py" not in first
    assert _files_of(root, "HEAD") == ["PRD.md", "src/app.py"]


async def test_a_crashed_agent_does_not_commit_the_users_config_edit(
        project: Project) -> None:
    """The user edits ralph.toml and steps; the agent crashes: the edit is the project's
    own commit, and the failed attempt commits nothing of the user's."""
    config = project.root / "ralph.toml"
    config.write_text(config.read_text().replace("max_iterations = 10", "max_iterations = 9"))
    project.plan({"default": {"exit_code": 3, "stderr": ["boom"]}})
    service = project.service()
    try:
        result = await service.step()
    finally:
        await service.aclose()
    assert result.status == "agent_failed" and result.commit is None
    assert _subjects(project.root)[0].startswith("ralph: project files before run")
    assert _files_of(project.root, "HEAD") == ["ralph.toml"]


async def test_files_the_gates_create_are_not_committed(project: Project) -> None:
    project.config(gates=["mkdir -p build && echo out > build/out.o && echo c > .coverage"])
    project.commit("gates")
    project.plan({"default": {"tick": True, "write": {"src/a.py": "x = 1\n"}}})
    events: list[Frame] = []
    service = project.service(events)
    try:
        first = await service.step()
        assert first.verified and first.repo_clean
        assert _files_of(project.root, "HEAD") == ["PRD.md", "src/a.py"]
        assert sorted(project.state()["gate_outputs"]) == [".coverage", "build/"]
        # The next start is not refused for them, and they stay out of later commits.
        second = await service.step()
    finally:
        await service.aclose()
    assert second.verified and second.repo_clean
    assert "build/out.o" not in git(project.root, "log", "--name-only", "--format=")
    assert ".coverage" not in git(project.root, "log", "--name-only", "--format=")


async def test_a_stopped_iterations_work_is_committed_as_that_attempt(
        project: Project) -> None:
    project.plan({"default": misbehaving.hang(60, write={"half.txt": "half done\n"})})
    events: list[Frame] = []
    service = project.service(events)
    try:
        await service.start_run()
        await wait_for((project.root / "half.txt").exists)
        assert service.stop()
        outcome = await asyncio.wait_for(service.wait(), 30)
    finally:
        await service.aclose()
    assert outcome is not None and outcome.reason == "stopped"
    finished = [f.meta for f in events if f.topic == "iteration.finished"]
    assert finished[-1]["status"] == "stopped" and finished[-1]["commit"]
    assert "(attempt 1, stopped:" in _subjects(project.root)[0]
    assert _files_of(project.root, "HEAD") == ["half.txt"]
    # Resuming needs no --allow-dirty.
    project.plan({"default": {"tick": True}})
    service = project.service()
    try:
        result = await service.step()
    finally:
        await service.aclose()
    assert result.verified


async def test_a_killed_orchestrators_work_is_committed_by_the_next_start(
        project: Project) -> None:
    project.plan({"tasks": {"1": [misbehaving.hang(120, write={"half.txt": "half\n"}),
                                  {"tick": True}]}})
    proc = start_orchestrator(project.root)
    try:
        await wait_for((project.root / "half.txt").exists, timeout=60)
        await wait_for(lambda: bool((project.state().get("in_flight") or {})
                                    .get("agent_pgid")), timeout=60)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    status = _ralph(project.root, "status", "--json")
    assert '"status": "interrupted"' in status.stdout or '"status":"interrupted"' in (
        status.stdout.replace(" ", ""))
    service = project.service()
    try:
        result = await service.step()
    finally:
        await service.aclose()
    assert result.verified
    subjects = _subjects(project.root)
    assert subjects[0] == "ralph: 1 First task"
    assert "(attempt 1, interrupted:" in subjects[1]
    assert _files_of(project.root, "HEAD~1") == ["half.txt"]


@pytest.mark.parametrize("allow", [False, True])
async def test_check_refuses_a_background_run_on_a_dirty_tree(project: Project,
                                                              allow: bool) -> None:
    (project.root / "scratch.txt").write_text("x\n")
    project.plan({"default": {"tick": True}})
    service = project.service()
    try:
        if not allow:
            with pytest.raises(LoopError, match=r"scratch\.txt"):
                await service.start_run()
        else:
            await service.start_run(allow_dirty=True, max_iterations=1)
            outcome = await asyncio.wait_for(service.wait(), 60)
            assert outcome is not None and outcome.iterations == 1
    finally:
        await service.aclose()


async def _kill_mid_iteration(project: Project, ready: Path) -> None:
    """Start a run in another process, wait until `ready` exists and the agent runs, then
    SIGKILL the orchestrator (its guard ends the agent)."""
    proc = start_orchestrator(project.root)
    try:
        await wait_for(ready.exists, timeout=60)
        await wait_for(lambda: bool((project.state().get("in_flight") or {})
                                    .get("agent_pgid")), timeout=60)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


async def test_after_a_crash_the_next_run_uses_the_config_put_back(project: Project) -> None:
    """An agent that rewrote ralph.toml (to drop the gate) and whose orchestrator died: the
    next start puts ralph.toml back and runs with that one."""
    project.config(gates=["test -f proof.txt"])
    project.commit("a gate")
    original = (project.root / "ralph.toml").read_text()
    cheat = original.replace('commands = ["test -f proof.txt"]', "commands = []")
    project.plan({"tasks": {"1": [misbehaving.hang(120, write={"ralph.toml": cheat,
                                                               "half.txt": "x"}),
                                  {"tick": True}]}})
    await _kill_mid_iteration(project, project.root / "half.txt")
    service = project.service()
    try:
        result = await service.step()
    finally:
        await service.aclose()
    assert (project.root / "ralph.toml").read_text() == original
    assert not result.verified and result.reason and "test -f proof.txt" in result.reason


async def test_the_users_edits_after_a_crash_are_left_to_the_user(project: Project) -> None:
    project.plan({"tasks": {"1": [misbehaving.hang(120, write={"half.txt": "half\n"})]}})
    await _kill_mid_iteration(project, project.root / "half.txt")
    await asyncio.sleep(LIFE_SLACK_NS / 1e9 + 0.5)  # past the dead process's last sign of life
    with (project.root / "PROMPT_build.md").open("a") as handle:
        handle.write("\nThe user's own edit, after the crash.\n")
    (project.root / "mine.txt").write_text("the user's file\n")
    service = project.service()
    try:
        with pytest.raises(LoopError, match=r"mine\.txt"):
            await service.step()
    finally:
        await service.aclose()
    assert "The user's own edit" in (project.root / "PROMPT_build.md").read_text()
    assert (project.root / "mine.txt").exists()
    assert "(attempt 1, interrupted:" in _subjects(project.root)[0]
    assert _files_of(project.root, "HEAD") == ["half.txt"]


async def test_without_auto_commit_a_crash_still_puts_protected_paths_back(
        project: Project) -> None:
    (project.root / "gate.sh").write_text("exit 1\n")
    project.config("\n[git]\nauto_commit = false\n", gates=["sh gate.sh"])
    project.commit("no commits")
    project.plan({"tasks": {"1": [misbehaving.hang(120, write={"gate.sh": "exit 0\n"}),
                                  {"tick": True}]}})
    project.plan({"tasks": {"1": [misbehaving.hang(120, write={"gate.sh": "exit 0\n",
                                                               "ready.txt": "x"}),
                                  {"tick": True}]}})
    await _kill_mid_iteration(project, project.root / "ready.txt")
    assert (project.root / "gate.sh").read_text() == "exit 0\n"
    service = project.service()
    try:
        result = await service.step()
    finally:
        await service.aclose()
    assert (project.root / "gate.sh").read_text() == "exit 1\n"
    assert not result.verified


async def test_a_stop_during_the_gates_commits_the_agents_work_not_the_gates(
        project: Project) -> None:
    project.config(gates=["mkdir -p out && echo r > out/report.txt && sleep 60"])
    project.commit("a slow gate")
    project.plan({"default": {"write": {"src/a.py": "x = 1\n"}, "tick": True}})
    service = project.service()
    try:
        await service.start_run()
        await wait_for((project.root / "out" / "report.txt").exists)
        assert service.stop()
        outcome = await asyncio.wait_for(service.wait(), 30)
    finally:
        await service.aclose()
    assert outcome is not None and outcome.reason == "stopped"
    # The tick was reopened (PRD.md as before, a line in progress.md); the gate's report stays
    # out.
    assert _files_of(project.root, "HEAD") == ["progress.md", "src/a.py"]
    assert "out/report.txt" not in git(project.root, "log", "--name-only", "--format=")


async def test_a_gate_that_changes_a_tracked_file_does_not_refuse_the_next_start(
        project: Project) -> None:
    (project.root / "results.log").write_text("none yet\n")
    project.config(gates=["date +%s%N > results.log"])
    project.commit("a gate that writes a tracked log")
    project.plan({"default": {"tick": True}})
    service = project.service()
    try:
        first = await service.step()
        assert first.verified and first.repo_clean
        second = await service.step()
    finally:
        await service.aclose()
    assert second.verified
    assert "results.log" not in _files_of(project.root, "HEAD")


async def test_a_tick_and_the_users_file_after_a_crash_are_told_apart(
        project: Project) -> None:
    """Recovery's own writes (the reopened tick) do not widen what counts as the agent's."""
    project.plan({"tasks": {"1": [{**misbehaving.hang(120, write={"half.txt": "h\n"}),
                                   "tick": True}]}})
    await _kill_mid_iteration(project, project.root / "half.txt")
    await asyncio.sleep(LIFE_SLACK_NS / 1e9 + 0.5)
    (project.root / "mine.txt").write_text("the user's\n")
    service = project.service()
    try:
        with pytest.raises(LoopError, match=r"mine\.txt"):
            await service.step()
    finally:
        await service.aclose()
    assert "mine.txt" not in _files_of(project.root, "HEAD")


async def test_recovery_protects_by_the_config_the_iteration_began_with(
        project: Project) -> None:
    tests = project.root / "tests"
    tests.mkdir()
    (tests / "test_a.sh").write_text("exit 1\n")
    project.config('protected = ["tests/**"]\n', gates=["sh tests/test_a.sh"])
    project.commit("protected tests")
    cheat = (project.root / "ralph.toml").read_text().replace(
        'protected = ["tests/**"]\n', "").replace('commands = ["sh tests/test_a.sh"]',
                                                   "commands = []")
    # The next start's own attempt does nothing (a hang would wait out the agent timeout).
    project.plan({"tasks": {"1": [misbehaving.hang(120, write={
        "ralph.toml": cheat, "tests/test_a.sh": "exit 0\n", "half.txt": "h\n"}),
        {"print": ["nothing"]}]}})
    await _kill_mid_iteration(project, project.root / "half.txt")
    service = project.service()
    try:
        await service.step()
    finally:
        await service.aclose()
    assert (tests / "test_a.sh").read_text() == "exit 1\n"
    interrupted = git(project.root, "log", "--format=%h", "--grep=interrupted").split()
    assert len(interrupted) == 1
    assert "tests/test_a.sh" not in _files_of(project.root, interrupted[0])
    assert 'protected = ["tests/**"]' in (project.root / "ralph.toml").read_text()


async def test_after_a_stop_during_the_gates_the_next_start_needs_no_allow_dirty(
        project: Project) -> None:
    project.config(gates=["echo r > report.txt && sleep 60"])
    project.commit("a slow gate that writes a report")
    project.plan({"default": {"write": {"a.py": "x\n"}, "tick": True}})
    service = project.service()
    try:
        await service.start_run()
        await wait_for((project.root / "report.txt").exists)
        assert service.stop()
        await asyncio.wait_for(service.wait(), 30)
    finally:
        await service.aclose()
    project.config(gates=["true"])  # Ralph commits it on its own, as a project file
    service = project.service()
    try:
        result = await service.step()
    finally:
        await service.aclose()
    assert result.verified
    assert "report.txt" not in git(project.root, "log", "--name-only", "--format=")


async def test_a_gate_output_the_agent_staged_and_changed_stays_out(project: Project) -> None:
    project.config(gates=["echo report > report.txt"])
    project.commit("a gate that writes a report")
    project.plan({"tasks": {"1": [{"tick": True}],
                            "2": [{"git": ["add", "-A"], "append": {"report.txt": "more\n"},
                                   "tick": True}]}})
    service = project.service()
    try:
        assert (await service.step()).verified
        second = await service.step()
    finally:
        await service.aclose()
    assert second.verified
    assert "report.txt" not in git(project.root, "log", "--name-only", "--format=")

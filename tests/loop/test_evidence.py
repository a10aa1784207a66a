"""Nothing counts as done without evidence: ticks an iteration did not verify are taken back
(other tasks' ticks, an iteration stopped, failed or killed mid-way), blocks are the user's to
lift, and what a dead orchestrator left running (its gate too) is ended."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from ralph.errors import RalphError
from ralph.loop import LoopError
from ralph.store import Frame
from tests.loop.conftest import Project, git, kill_guard_of, start_orchestrator, wait_for
from tests.proc.helpers import group_members

TICK = {"tick": True, "print": ["done"]}




def _set_loop(project: Project, line: str) -> None:
    config = project.root / "ralph.toml"
    config.write_text(config.read_text().replace("max_iterations = 10",
                                                 f"max_iterations = 10\n{line}"))


async def test_a_task_ticked_in_another_tasks_iteration_is_reopened(project: Project) -> None:
    project.plan({"tasks": {"1": [{**TICK, "tick_also": ["3"]}]}})
    events: list[Frame] = []
    service = project.service(events)
    try:
        result = await service.step()
    finally:
        await service.aclose()
    assert result.verified and result.task_id == "1"
    prd = project.read_prd()
    assert "- [x] 1." in prd and "- [ ] 3." in prd
    reopened = [f.meta for f in events if f.topic == "task.reopened"]
    assert [r["task_id"] for r in reopened] == ["3"]
    assert "verified only in an iteration of its own" in reopened[0]["reason"]
    assert "Ralph reopened task 3" in (project.root / "progress.md").read_text()


async def test_a_stopped_iteration_leaves_nothing_marked_done(project: Project) -> None:
    project.plan({"tasks": {"1": [{**TICK, "write": {"a.txt": "x"}}]}})
    project.config(gates=["sleep 60"])
    project.commit("slow gate")
    events: list[Frame] = []
    service = project.service(events)
    try:
        await service.start_run()
        await wait_for(lambda: any(f.topic == "gate.started" for f in events))
        assert "- [x] 1." in project.read_prd()  # the agent ticked it; the gate decides
        assert service.stop()
        outcome = await asyncio.wait_for(service.wait(), 30)
    finally:
        await service.aclose()
    assert outcome is not None and outcome.reason == "stopped"
    assert "- [ ] 1." in project.read_prd()
    assert [f.meta["task_id"] for f in events if f.topic == "task.reopened"] == ["1"]


async def test_an_iteration_that_fails_leaves_nothing_marked_done(project: Project) -> None:
    """The judge's prompt is missing: the iteration errors after the agent ticked."""
    project.plan({"tasks": {"1": [TICK]}})
    project.config("\n[judge]\nenabled = true\n")
    (project.root / "PROMPT_judge.md").unlink()
    project.commit("no judge prompt")
    service = project.service()
    try:
        with pytest.raises(LoopError, match=r"PROMPT_judge\.md"):
            await service.step()
    finally:
        await service.aclose()
    assert "- [ ] 1." in project.read_prd()




async def test_a_dead_orchestrators_gate_is_ended_and_its_tick_reopened(
        project: Project) -> None:
    project.plan({"tasks": {"1": [TICK], "2": [TICK], "3": [TICK]}})
    marker = project.root.parent / "gate.pid"
    project.config(gates=[f"echo $$ > {marker}; sleep 60"])
    project.commit("slow gate")
    proc = start_orchestrator(project.root)
    try:
        await wait_for(lambda: marker.exists() and marker.read_text().strip())
        gate_pgid = int(marker.read_text())
        await wait_for(lambda: project.state()["in_flight"]["agent_pgid"] == gate_pgid)
        # Its guard would end the gate at once: this is about a guard that died with it.
        kill_guard_of(project.state()["active_run"]["owner"])
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    assert group_members(gate_pgid), "the gate should have outlived the orchestrator"
    assert "- [x] 1." in project.read_prd()
    project.config()  # gates off, so that the next start runs quickly
    events: list[Frame] = []
    service = project.service(events)
    try:
        result = await service.step()
    finally:
        await service.aclose()
    assert group_members(gate_pgid) == []
    reopened = [f.meta for f in events if f.topic == "task.reopened"]
    assert reopened[0]["task_id"] == "1" and "died" in reopened[0]["reason"]
    assert result.task_id == "1" and result.verified  # tried again, now with evidence


async def test_a_task_the_user_unblocks_is_tried_again(project: Project) -> None:
    project.plan({"tasks": {"1": [{"print": ["not yet"]}, TICK]}})
    _set_loop(project, "max_attempts_per_task = 1")
    project.commit("one attempt per task")
    service = project.service()
    try:
        blocked = await service.step()
        assert blocked.blocked and "- [-] 1." in project.read_prd()
        prd = project.read_prd().replace("- [-] 1.", "- [ ] 1.")
        (project.root / "PRD.md").write_text(
            "\n".join(line for line in prd.splitlines() if "Blocked:" not in line) + "\n")
        assert service.status().blocked == []
        upcoming = service.status().next
        assert upcoming is not None and upcoming.task_id == "1"
        again = await service.step()
    finally:
        await service.aclose()
    assert again.task_id == "1" and again.verified
    assert "1" not in project.state()["tasks"]  # verified done: the block went with its entry


async def test_an_agent_cannot_lift_a_block(project: Project) -> None:
    project.plan({"tasks": {"1": [{"print": ["not yet"]}], "3": [{**TICK, "tick_also": ["1"]}]}})
    _set_loop(project, "max_attempts_per_task = 1")
    project.commit("one attempt per task")
    service = project.service()
    try:
        assert (await service.step()).blocked
        third = await service.step()
    finally:
        await service.aclose()
    assert third.task_id == "3" and third.verified
    prd = project.read_prd()
    assert "- [-] 1." in prd and "- [x] 3." in prd


async def test_the_configured_branch_is_reused_once_it_exists(project: Project) -> None:
    home = git(project.root, "symbolic-ref", "--short", "HEAD").strip()
    project.plan({"tasks": {"1": [TICK], "2": [TICK]}})
    project.config("\n[git]\nbranch = \"ralph-work\"\n")
    project.commit("work on a branch")
    for _ in range(2):
        service = project.service()
        try:
            assert (await service.step()).verified
        finally:
            await service.aclose()
        assert git(project.root, "symbolic-ref", "--short", "HEAD").strip() == "ralph-work"
        git(project.root, "switch", "-q", home)
    assert "- [x] 2." in git(project.root, "show", "ralph-work:PRD.md")


async def test_rate_limit_retries_end(project: Project) -> None:
    """An agent that always looks rate limited counts as a failed attempt after
    loop.rate_limit_max_retries retries, instead of waiting forever."""
    project.plan({"tasks": {"1": [{**TICK, "rate_limit": 100}]}})
    _set_loop(project, "rate_limit_max_retries = 2")
    project.commit("two retries")
    events: list[Frame] = []
    service = project.service(events)
    try:
        result = await service.step()
    finally:
        await service.aclose()
    assert result.status == "agent_failed" and not result.verified
    assert result.reason is not None and "still rate limited after 2 retries" in result.reason
    assert len([f for f in events if f.topic == "agent.started"]) == 3
    assert project.state()["tasks"]["1"]["failures"] == 1


async def test_a_damaged_state_is_only_set_aside_by_a_step_and_overwrites_nothing(
        project: Project) -> None:
    project.plan({"tasks": {"1": [TICK], "2": [TICK]}})
    service = project.service()
    try:
        await service.step()
    finally:
        await service.aclose()
    first_log = (project.root / ".ralph/logs/000001.log").read_bytes()
    state = project.root / ".ralph" / "state.json"
    state.write_text("{damaged")
    service = project.service()
    try:
        assert service.status().iterations == 0  # shown as fresh, the file left as it is
        assert state.read_text() == "{damaged"
        second = await service.step()
    finally:
        await service.aclose()
    assert (project.root / ".ralph/state.json.damaged").read_text() == "{damaged"
    assert second.iteration == 2 and second.log_path == ".ralph/logs/000002.log"
    assert (project.root / ".ralph/logs/000001.log").read_bytes() == first_log


async def test_a_judge_whose_program_is_missing_is_refused_before_the_agent_works(
        project: Project) -> None:
    project.plan({"tasks": {"1": [TICK]}})
    project.config('\n[judge]\nenabled = true\nagent = "checker"\n\n[agents.checker]\n'
                   'argv = ["no-such-judge-program-here"]\n')
    project.commit("judge without its program")
    service = project.service()
    try:
        with pytest.raises(RalphError, match="no-such-judge-program-here"):
            await service.step()
    finally:
        await service.aclose()
    assert "- [ ] 1." in project.read_prd()
    assert not (project.root / ".ralph/logs/000001.log").exists()

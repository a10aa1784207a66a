"""The loop service's behaviour with fake agents: verified completion, reopening, no
progress, blocking, timeouts, rate limits, stop, pause, a killed orchestrator, judge, review,
the JSON tracker, and what every iteration records."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal

import pytest

from ralph.loop import LoopBusy, LoopService, StepResult, ratelimit
from ralph.loop.results import StepResult as StepResultModel
from ralph.store import Frame, Store
from tests.loop.conftest import Project, git, kill_guard_of, start_orchestrator, wait_for
from tests.proc.helpers import group_members

TICK = {"tick": True, "print": ["done"]}


def _agent_pgid(project: Project, iteration: int) -> int:
    log = (project.root / ".ralph" / "logs" / f"{iteration:06d}.log").read_text()
    match = re.search(r"child-pid (\d+)", log)
    assert match, log
    return int(match.group(1))




async def test_run_to_complete(project: Project) -> None:
    project.plan({"tasks": {"1": [{**TICK, "write": {"one.txt": "1"}}],
                            "2": [{**TICK, "write": {"two.txt": "2"}}],
                            "3": [{**TICK, "write": {"three.txt": "3"}, "exit_signal": True}]}})
    project.config(gates=["test -f one.txt"])
    events: list[Frame] = []
    service = project.service(events)
    try:
        outcome = await service.run()
    finally:
        await service.aclose()
    assert (outcome.reason, outcome.iterations, outcome.done, outcome.total) == (
        "complete", 3, 3, 3)
    assert project.log()[:3] == ["ralph: 3 Third task", "ralph: 2 Second task",
                                 "ralph: 1 First task"]
    assert "- [x] 1. First task" in project.read_prd()
    topics = [f.topic for f in events]
    assert topics[0] == "run.started" and topics[-1] == "run.stopped"
    assert topics.count("iteration.finished") == 3 and topics.count("task.done") == 3
    assert events[-1].meta["reason"] == "complete"
    tracked = git(project.root, "ls-files").splitlines()
    assert not any(p.startswith(".ralph/") for p in tracked)  # runtime files never committed
    state = project.state()
    assert state["active_run"] is None and state["in_flight"] is None
    assert state["last"]["task_id"] == "3" and state["last"]["verified"] is True


async def test_every_iteration_records_every_step_field(project: Project) -> None:
    project.plan({"tasks": {"1": [{**TICK, "exit_signal": False}]}})
    project.config(gates=["echo gate-output && true"])
    service = project.service()
    try:
        result = await service.step()
        frames = list(service.store.read(topic="iteration.finished"))
        receipt_frames = list(service.store.read(topic="gate.finished"))
        store_hash = receipt_frames[0].hash
        gate_output = service.store.cas_get(store_hash or "")
    finally:
        await service.aclose()
    assert result.verified and result.status == "done" and result.exit_signal is False
    assert result.return_code == 0 and result.gates_ok and result.repo_clean
    assert result.judge_ok is None and result.review_ok is None  # disabled means null
    assert result.attempt_id == "1-1" and result.task_title == "First task"
    assert result.log_path == ".ralph/logs/000001.log"
    meta = frames[-1].meta
    assert set(StepResultModel.model_fields) <= set(meta)
    assert meta["iteration"] == result.iteration and meta["task_id"] == "1"
    root = project.root
    attempt = json.loads((root / ".ralph/attempts/1/1-1.json").read_text())
    assert attempt["verified"] is True and attempt["gates"][0]["exit_code"] == 0
    receipt = json.loads((root / ".ralph/receipts/1/1-1/gate-1.json").read_text())
    assert receipt["output_hash"] == store_hash and receipt["cwd"] == str(root)
    assert b"gate-output" in gate_output
    prompt = (root / ".ralph/context/1/1-1/prompt.md").read_text()
    assert "- Task id: 1" in prompt and "it works" in prompt
    assert (root / ".ralph/logs/000001.log").read_text().startswith("fake agent working")


async def test_ticking_the_box_with_a_failing_gate_reopens_the_task(project: Project) -> None:
    project.plan({"tasks": {"1": [TICK]}})
    project.config(gates=["test -f proof.txt"])
    events: list[Frame] = []
    service = project.service(events)
    try:
        result = await service.step()
    finally:
        await service.aclose()
    assert not result.verified and result.status == "not_done" and not result.gates_ok
    assert result.reason == "gate 'test -f proof.txt' exited with 1"
    assert "- [ ] 1. First task" in project.read_prd()  # reopened by the orchestrator
    assert "Ralph reopened task 1" in (project.root / "progress.md").read_text()
    assert [f.meta["reason"] for f in events if f.topic == "task.reopened"] == [result.reason]
    assert "not verified" in project.log()[0]


async def test_exit_signal_alone_never_ends_a_run(project: Project) -> None:
    project.plan({"default": {"exit_signal": True, "print": ["all done, trust me"]}})
    project.config("\n[loop]\n" if False else "")
    service = project.service()
    try:
        outcome = await service.run(max_iterations=2)
    finally:
        await service.aclose()
    assert outcome.reason in ("max_iterations", "no_progress")
    assert outcome.done == 0


async def test_no_progress_stops_the_run(project: Project) -> None:
    project.plan({"default": {"print": ["thinking, changing nothing"]}})
    (project.root / "ralph.toml").write_text(
        (project.root / "ralph.toml").read_text().replace(
            "max_iterations = 10", "max_iterations = 10\nno_progress_limit = 2\n"
            "max_attempts_per_task = 9"))
    service = project.service()
    try:
        outcome = await service.run()
    finally:
        await service.aclose()
    assert outcome.reason == "no_progress" and outcome.iterations == 2
    assert project.state()["no_progress_streak"] == 2


async def test_max_attempts_then_blocked_and_skipped(project: Project) -> None:
    project.plan({"tasks": {"1": [{"append": {"work.txt": "x"}}],
                            "3": [TICK]}})
    (project.root / "ralph.toml").write_text(
        (project.root / "ralph.toml").read_text().replace(
            "max_iterations = 10", "max_iterations = 10\nmax_attempts_per_task = 2"))
    events: list[Frame] = []
    service = project.service(events)
    try:
        outcome = await service.run()
        status = service.status()
    finally:
        await service.aclose()
    finished = [f.meta for f in events if f.topic == "iteration.finished"]
    assert [(m["task_id"], m["blocked"]) for m in finished] == [
        ("1", False), ("1", True), ("3", False)]
    assert outcome.reason == "no_progress"  # task 2 waits on the blocked task 1
    prd = project.read_prd()
    assert "- [-] 1. First task" in prd and "Blocked: 2 attempts failed" in prd
    assert [b.task_id for b in status.blocked] == ["1"]
    assert status.blocked[0].reason and "2 attempts failed" in status.blocked[0].reason
    assert project.state()["tasks"]["1"]["blocked"]


async def test_agent_timeout_ends_its_whole_process_tree(project: Project) -> None:
    project.plan({"tasks": {"1": [{"spawn": 60, "sleep": 60}]}})
    (project.root / "ralph.toml").write_text(
        (project.root / "ralph.toml").read_text().replace("timeout_seconds = 60",
                                                          "timeout_seconds = 1"))
    service = project.service()
    try:
        result = await service.step()
    finally:
        await service.aclose()
    assert result.status == "agent_failed" and result.agent_status == "timeout"
    assert result.reason is not None and "timed out" in result.reason
    assert result.return_code is None
    pgid = _agent_pgid(project, 1)
    assert group_members(pgid) == []


async def test_rate_limited_agent_waits_and_retries_without_counting(project: Project) -> None:
    project.plan({"tasks": {"1": [{**TICK, "rate_limit": 2, "retry_after": 0}]}})
    events: list[Frame] = []
    service = project.service(events)
    try:
        result = await service.step()
    finally:
        await service.aclose()
    assert result.verified
    waits = [f.meta for f in events if f.topic == "agent.rate_limited"]
    assert len(waits) == 2 and all(w["wait_seconds"] <= 1 for w in waits)
    assert "1" not in project.state()["tasks"]  # verified done: state.json no longer follows it
    assert [p.name for p in (project.root / ".ralph/attempts/1").iterdir()] == ["1-1.json"]
    assert result.no_progress_streak == 0


async def test_hourly_cap_on_agent_starts(project: Project, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(ratelimit, "sleep", fake_sleep)
    project.plan({"default": {"append": {"w.txt": "x"}}})
    (project.root / "ralph.toml").write_text(
        (project.root / "ralph.toml").read_text().replace(
            "rate_limit_max_wait_seconds = 1", "rate_limit_max_wait_seconds = 1\n"
            "rate_limit_per_hour = 2\nmax_attempts_per_task = 9"))
    service = project.service()
    try:
        await service.run(max_iterations=3)
    finally:
        await service.aclose()
    assert len(slept) == 1 and 3500 < slept[0] <= 3600


async def test_stop_from_another_task_ends_the_agent(project: Project) -> None:
    project.plan({"tasks": {"1": [{"spawn": 60, "sleep": 60}]}})
    events: list[Frame] = []
    service = project.service(events)
    try:
        run_id = await service.start_run()
        with pytest.raises(LoopBusy) as busy:
            await service.step()
        assert busy.value.active_run_id == run_id
        with pytest.raises(LoopBusy):
            await service.start_run()
        await wait_for(lambda: (project.root / ".ralph/logs/000001.log").exists()
                        and "child-pid" in (project.root / ".ralph/logs/000001.log").read_text())
        assert service.status().running and service.status().activeRunId == run_id
        assert service.stop()
        outcome = await asyncio.wait_for(service.wait(), 30)
    finally:
        await service.aclose()
    assert outcome is not None and outcome.reason == "stopped"
    finished = [f.meta for f in events if f.topic == "iteration.finished"]
    assert finished[-1]["status"] == "stopped"
    assert events[-1].topic == "run.stopped" and events[-1].meta["reason"] == "stopped"
    assert group_members(_agent_pgid(project, 1)) == []
    assert not service.stop()  # nothing left to stop


async def test_pause_takes_effect_between_iterations(project: Project) -> None:
    project.plan({"tasks": {"1": [{**TICK, "sleep": 0.5}], "2": [TICK], "3": [TICK]}})
    events: list[Frame] = []
    service = project.service(events)
    try:
        await service.start_run()
        await wait_for(lambda: any(f.topic == "iteration.started" for f in events))
        assert service.pause()
        await wait_for(lambda: any(f.topic == "run.paused" for f in events))
        assert [f.topic for f in events].count("iteration.finished") == 1
        status = service.status()
        assert status.paused and status.running
        assert json.loads((project.root / ".ralph/state.json").read_text())[
            "active_run"]["paused"] is True
        await asyncio.sleep(0.3)
        assert [f.topic for f in events].count("iteration.started") == 1  # still paused
        assert service.resume()
        outcome = await asyncio.wait_for(service.wait(), 60)
    finally:
        await service.aclose()
    assert outcome is not None and outcome.reason == "complete"
    topics = [f.topic for f in events]
    assert topics.index("run.resumed") > topics.index("run.paused")




async def test_killed_orchestrator_is_recovered_on_the_next_start(project: Project) -> None:
    project.plan({"tasks": {"1": [{"spawn": 60, "sleep": 60}, TICK], "2": [TICK],
                            "3": [TICK]}})
    proc = start_orchestrator(project.root)
    try:
        log = project.root / ".ralph/logs/000001.log"
        await wait_for(lambda: log.exists() and "child-pid" in log.read_text())
        agent_pgid = project.state()["in_flight"]["agent_pgid"]
        # The orchestrator dies, and its guard with it (else the guard ends the agent): the
        # agent lives on, for the next start to end.
        kill_guard_of(project.state()["active_run"]["owner"])
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    assert group_members(agent_pgid), "the agent should have outlived the orchestrator"
    events: list[Frame] = []
    service = project.service(events)
    try:
        outcome = await service.run()
    finally:
        await service.aclose()
    assert group_members(agent_pgid) == []  # ended by the recovery
    finished = [f.meta for f in events if f.topic == "iteration.finished"]
    assert finished[0]["status"] == "interrupted" and finished[0]["task_id"] == "1"
    stopped = [f.meta for f in events if f.topic == "run.stopped"]
    assert stopped[0]["reason"] == "error" and "died" in stopped[0]["message"]
    assert outcome.reason == "complete"
    # An interruption is not a failure: the task, verified since, left state.json clean.
    assert "1" not in project.state()["tasks"]


@pytest.mark.parametrize(("section", "answers", "field"), [
    ("judge", [False, True], "judge_ok"),
    ("review", ["BLOCK", "SHIP"], "review_ok"),
])
async def test_judge_and_review_must_say_yes(project: Project, section: str,
                                             answers: list[object], field: str) -> None:
    project.plan({"tasks": {"1": [TICK]}, section: answers})
    project.config(f"\n[{section}]\nenabled = true\n")
    service = project.service()
    try:
        first = await service.step()
        second = await service.step()
    finally:
        await service.aclose()
    assert getattr(first, field) is False and not first.verified
    assert first.reason and section.replace("review", "reviewer") in first.reason
    assert getattr(second, field) is True and second.verified
    other = "review_ok" if field == "judge_ok" else "judge_ok"
    assert getattr(second, other) is None
    judge_log = project.root / ".ralph/logs" / f"000002.{section}.log"
    assert judge_log.exists()


async def test_a_judge_without_a_signal_is_a_no(project: Project) -> None:
    project.plan({"tasks": {"1": [TICK]}, "judge": ["I think it is fine"]})
    project.config("\n[judge]\nenabled = true\n")
    service = project.service()
    try:
        result = await service.step()
    finally:
        await service.aclose()
    assert result.judge_ok is False and not result.verified
    assert "JUDGE_SIGNAL" in (result.reason or "")


async def test_json_tracker(project: Project) -> None:
    (project.root / "PRD.md").unlink()
    (project.root / "prd.json").write_text(json.dumps({"stories": [
        {"id": "a", "title": "Alpha", "priority": 2, "acceptance": ["x"], "passes": False,
         "depends_on": []},
        {"id": "b", "title": "Beta [DOCS]", "priority": 1, "acceptance": [], "passes": False,
         "depends_on": []}]}))
    project.plan({"tasks": {"a": [TICK], "b": [TICK]}})
    project.config('\n[files]\nprd = "prd.json"\n')
    # fake_agent ticks prd.json when told where it is
    text = (project.root / "ralph.toml").read_text().replace(
        '"--plan"', '"--prd", "prd.json", "--plan"')
    (project.root / "ralph.toml").write_text(text)
    project.commit("json tracker")
    service = project.service()
    try:
        status = service.status()
        assert status.next is not None and (status.next.task_id, status.next.kind) == (
            "b", "docs")
        outcome = await service.run()
    finally:
        await service.aclose()
    assert outcome.reason == "complete"
    stories = json.loads((project.root / "prd.json").read_text())["stories"]
    assert all(s["passes"] for s in stories)
    assert project.log()[:2] == ["ralph: a Alpha", "ralph: b Beta [DOCS]"]


async def test_a_chatty_agent_keeps_memory_bounded(project: Project) -> None:
    project.plan({"tasks": {"1": [{**TICK, "print_bytes": 20_000_000}]}})
    service = project.service()
    try:
        result = await service.step()
        outputs = list(service.store.read(topic="agent.output"))
    finally:
        await service.aclose()
    assert result.verified
    assert (project.root / ".ralph/logs/000001.log").stat().st_size > 19_000_000
    assert all(len(f.meta["content"]) <= 8192 for f in outputs)


async def test_two_services_on_one_project_exclude_each_other(project: Project) -> None:
    project.plan({"tasks": {"1": [{"sleep": 60}]}})
    first = project.service()
    second = LoopService(project.root, store=Store(project.root / ".ralph" / "store"))
    try:
        await first.start_run()
        await wait_for((project.root / ".ralph/logs/000001.log").exists)
        with pytest.raises(LoopBusy, match="already active"):
            await second.step()
        assert second.status().running
        first.stop()
        await asyncio.wait_for(first.wait(), 30)
    finally:
        await first.aclose()
        second.store.close()
        second.close()


def test_step_result_is_the_bridge_step_result() -> None:
    bridge = {"iteration", "agent", "task_id", "exit_signal", "return_code", "log_path",
              "progress_made", "no_progress_streak", "gates_ok", "repo_clean", "judge_ok",
              "review_ok", "blocked", "attempt_id", "receipts_dir", "context_dir", "task_title"}
    assert bridge <= set(StepResult.model_fields)

"""The loop reads the tracker at most once per iteration (parses are counted, never timed),
and what an iteration cut short by a dead orchestrator marked done is still reopened."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from ralph.loop import ratelimit
from ralph.store import Store
from ralph.testing import misbehaving
from ralph.tracker import markdown
from ralph.tracker.mdincremental import reparse_prd
from ralph.tracker.mdparse import ParsedPrd, parse_prd
from tests.loop.conftest import Project, start_orchestrator, wait_for


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every whole ("full") and partial parse of a markdown tracker, in order."""
    done: list[str] = []
    whole, partial = parse_prd, reparse_prd

    def counted_whole(path: Path, text: str) -> ParsedPrd:
        done.append("full")
        return whole(path, text)

    def counted_partial(path: Path, old: ParsedPrd, text: str) -> ParsedPrd:
        done.append("partial")
        return partial(path, old, text)

    monkeypatch.setattr(markdown, "parse_prd", counted_whole)
    monkeypatch.setattr(markdown, "reparse_prd", counted_partial)
    return done


async def test_each_iteration_parses_the_tracker_at_most_once(
        project: Project, parses: list[str]) -> None:
    project.plan({"default": {"tick": True}})
    service = project.service()
    per_step = []
    try:
        for _ in range(3):
            before = len(parses)
            assert (await service.step()).verified
            per_step.append(parses[before:])
    finally:
        await service.aclose()
    # The first step parses the file whole (nothing parsed before); then each iteration
    # parses only what the agent changed (its tick), once.
    assert per_step[0][0] == "full"
    assert all(len(step) <= 1 for step in [per_step[0][1:], *per_step[1:]]), per_step
    assert [kind for step in per_step[1:] for kind in step] == ["partial", "partial"]


async def test_an_iteration_that_changes_nothing_parses_nothing(
        project: Project, parses: list[str]) -> None:
    project.plan({"default": {"print": ["nothing done"]}})
    service = project.service()
    try:
        await service.step()
        before = len(parses)
        result = await service.step()
    finally:
        await service.aclose()
    assert not result.verified
    assert parses[before:] == []


async def test_what_a_dead_orchestrators_iteration_ticked_is_reopened(project: Project) -> None:
    project.plan({"tasks": {"1": [{**misbehaving.hang(120, write={"half.txt": "x\n"}),
                                   "tick": True, "tick_also": ["3"]},
                                  {"tick": True}]}})
    proc = start_orchestrator(project.root)
    try:
        # The agent writes half.txt, then ticks: wait for the ticks, not the file.
        await wait_for(lambda: "- [x] 3." in project.read_prd(), timeout=60)
        await wait_for(lambda: bool((project.state().get("in_flight") or {})
                                    .get("agent_pgid")), timeout=60)
        copy = project.state()["in_flight"]["tracker_copy"]
        assert "- [ ] 3." in (project.root / copy).read_text()  # as the iteration began
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    service = project.service()
    try:
        result = await service.step()
    finally:
        await service.aclose()
    assert result.task_id == "1" and result.verified
    prd = project.read_prd()
    assert "- [ ] 3." in prd and "- [x] 1." in prd
    progress = (project.root / "progress.md").read_text()
    assert "Ralph reopened task 3" in progress and "died before it was verified" in progress


async def test_a_run_killed_before_its_agent_starts_leaves_the_iteration_to_recover(
        project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    """Killed while the second iteration waits for the hourly start slot (after
    `iteration.started`, before the agent): the next start records that iteration as
    interrupted and numbers its own after it."""
    config = (project.root / "ralph.toml").read_text()
    (project.root / "ralph.toml").write_text(
        config.replace("[loop]\n", "[loop]\nrate_limit_per_hour = 1\n", 1))
    project.plan({"default": {"tick": True}})
    project.commit("one agent start an hour")
    proc = start_orchestrator(project.root)
    try:
        await wait_for(lambda: "agent.rate_limited" in _topics(project.root), timeout=90)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert project.state()["in_flight"]["iteration"] == 2

    async def no_wait(_seconds: float) -> None:
        return None

    monkeypatch.setattr(ratelimit, "sleep", no_wait)
    service = project.service()
    try:
        result = await service.step()
    finally:
        await service.aclose()
    assert result.iteration == 3
    started = [m["iteration"] for t, m in _events(project.root) if t == "iteration.started"]
    finished = [m["iteration"] for t, m in _events(project.root) if t == "iteration.finished"]
    assert sorted(started) == sorted(finished) == [1, 2, 3]


def _events(root: Path) -> list[tuple[str, dict[str, Any]]]:
    with Store(root / ".ralph" / "store") as store:
        return [(frame.topic, frame.meta) for frame in store.read()]


def _topics(root: Path) -> list[str]:
    return [topic for topic, _ in _events(root)]

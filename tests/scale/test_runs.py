"""Runs on Temporal, end to end: `ralph worker` processes, `ralph run --on temporal`, a
shared PostgreSQL store, work moved through a bare repository; and the faults a run must
survive (a worker SIGKILLed mid-iteration, a stop while every worker is down, Temporal
restarted, a push rejected because the branch moved)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ralph.store import Frame, Store
from ralph.testing.pgserver import PostgresServer
from ralph.testing.temporal_dev import TemporalDevServer
from tests.scale.runs import (
    Worker,
    alive,
    git,
    ralph,
    seed_repository,
    start_ralph,
    wait_until,
)

TICK = {"tick": True}


@pytest.fixture(scope="module")
def temporal() -> Iterator[TemporalDevServer]:
    with TemporalDevServer() as server:
        yield server


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for worker in started:
        worker.stop()


def run_frames(store_url: str, run_id: str) -> list[Frame]:
    with Store(store_url, create=False) as store:
        return list(store.read(stream=f"runs/{run_id}"))


def start_detached(temporal: TemporalDevServer, bare: Path, store: str, cwd: Path,
                   *extra: str) -> str:
    started = ralph("run", "--on", "temporal", "--temporal", temporal.address, "--repo",
                    str(bare), "--store", store, "--detach", "--json", *extra, cwd=cwd)
    assert started.returncode == 0, started.stderr
    return str(json.loads(started.stdout)["run_id"])


def markers(bare: Path, branch: str) -> list[str]:
    """The Ralph-Iteration trailers on the branch, oldest first."""
    out = git(bare, "log", "--reverse", "--format=%(trailers:key=Ralph-Iteration,valueonly)",
              branch)
    return [line.strip() for line in out.splitlines() if line.strip()]


def test_a_run_completes_across_two_workers(tmp_path: Path, temporal: TemporalDevServer,
                                            pg_url: str, workers: list[Worker]) -> None:
    bare, _plan = seed_repository(tmp_path, ["First", "Second", "Third"], {"tasks": {
        "1": [{**TICK, "write": {"one.txt": "1"}}],
        "2": [{"print": ["not yet"]}, {**TICK, "write": {"two.txt": "2"}}],
        "3": [{**TICK, "write": {"three.txt": "3"}}]}})
    workers += [Worker.start(f"w{n}", temporal.address, pg_url, tmp_path / f"work{n}")
                for n in (1, 2)]
    run = ralph("run", "--on", "temporal", "--temporal", temporal.address, "--repo", str(bare),
                "--store", pg_url, cwd=tmp_path)
    assert run.returncode == 0, (run.stdout, run.stderr)
    run_id = run.stderr.split()[1]
    assert run_id.startswith("run_") and f"ralph stop --run {run_id}" in run.stderr
    assert "verified done" in run.stdout  # the run's summary, as a local run shows it

    frames = run_frames(pg_url, run_id)
    topics = [f.topic for f in frames]
    assert topics[0] == "run.started" and topics[-1] == "run.stopped"
    assert frames[0].meta["on"] == "temporal" and frames[-1].meta["reason"] == "complete"
    assert topics.count("iteration.finished") == 4 and topics.count("task.done") == 3
    with Store(pg_url) as store:  # every frame of the store: gapless, none twice
        seqs = [f.seq for f in store.read()]
    assert seqs == list(range(1, len(seqs) + 1))

    branch = f"ralph/{run_id}"
    assert markers(bare, branch) == [f"{run_id}/{n}" for n in (1, 2, 3, 4)]
    files = git(bare, "ls-tree", "--name-only", branch).split()
    assert {"one.txt", "two.txt", "three.txt"} <= set(files)
    assert "[x] 3. Third" in git(bare, "show", f"{branch}:PRD.md")

    status = ralph("status", "--run", run_id, "--temporal", temporal.address, "--json",
                   cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    assert {k: json.loads(status.stdout)[k] for k in ("phase", "reason", "done", "total")} == {
        "phase": "ended", "reason": "complete", "done": 3, "total": 3}
    log = ralph("log", "--run", run_id, "--store", pg_url, cwd=tmp_path)
    assert log.returncode == 0 and "Third" in log.stdout, log.stderr
    again = ralph("stop", "--run", run_id, "--temporal", temporal.address, cwd=tmp_path)
    assert again.returncode == 1 and "has ended" in again.stdout


def test_a_worker_killed_mid_iteration_has_it_retried_on_the_other(
        tmp_path: Path, temporal: TemporalDevServer, pg_url: str,
        workers: list[Worker]) -> None:
    agent_pid = tmp_path / "agent.pid"
    bare, _plan = seed_repository(tmp_path, ["Only"], {"tasks": {"1": [
        {"shell": [f"echo $PPID > {agent_pid}.tmp && mv {agent_pid}.tmp {agent_pid}"],
         "write": {"half.txt": "x"}, "hang": 300},
        {**TICK, "write": {"done.txt": "1"}}]}})
    first = Worker.start("first", temporal.address, pg_url, tmp_path / "work1")
    workers.append(first)
    run_id = start_detached(temporal, bare, pg_url, tmp_path, "--heartbeat-seconds", "3")
    wait_until(agent_pid.exists, what="the first attempt's agent")
    pid = int(agent_pid.read_text())
    first.kill()  # SIGKILL mid-iteration: its heartbeats stop
    wait_until(lambda: not alive(pid), timeout=15, what="the dead worker's agent gone")
    workers.append(Worker.start("second", temporal.address, pg_url, tmp_path / "work2"))
    wait_until(lambda: any(f.topic == "run.stopped" for f in run_frames(pg_url, run_id)),
               timeout=120, what="the run's end")

    frames = run_frames(pg_url, run_id)
    assert frames[-1].meta["reason"] == "complete"
    retried = [f for f in frames if f.topic == "iteration.retried"]
    assert [(f.meta["iteration"], f.meta["attempt"], f.meta["worker"]) for f in retried] == [
        (1, 2, "second")]
    verified = [f for f in frames if f.topic == "iteration.finished" and f.meta["status"] ==
                "done"]
    assert len(verified) == 1
    with Store(pg_url) as store:
        seqs = [f.seq for f in store.read()]
    assert seqs == list(range(1, len(seqs) + 1))
    branch = f"ralph/{run_id}"
    assert markers(bare, branch) == [f"{run_id}/1"]  # the iteration, done exactly once
    files = set(git(bare, "ls-tree", "--name-only", branch).split())
    assert "done.txt" in files and "half.txt" not in files  # the dead attempt left nothing


def test_a_stop_while_every_worker_is_down_ends_the_run_when_one_returns(
        tmp_path: Path, temporal: TemporalDevServer, pg_url: str,
        workers: list[Worker]) -> None:
    agent_pid = tmp_path / "agent.pid"
    bare, _plan = seed_repository(tmp_path, ["Only"], {"tasks": {"1": [
        {"shell": [f"echo $PPID > {agent_pid}.tmp && mv {agent_pid}.tmp {agent_pid}"],
         "write": {"half.txt": "x"}, "hang": 300}]}})
    first = Worker.start("first", temporal.address, pg_url, tmp_path / "work1")
    workers.append(first)
    follower = start_ralph("run", "--on", "temporal", "--temporal", temporal.address,
                           "--repo", str(bare), "--store", pg_url, "--heartbeat-seconds", "3",
                           cwd=tmp_path)
    try:
        wait_until(agent_pid.exists, what="the agent")
        first.kill()
        run_id = _run_id_of(pg_url)
        stop = ralph("stop", "--run", run_id, "--temporal", temporal.address, cwd=tmp_path)
        assert stop.returncode == 0 and f"stopping {run_id}" in stop.stdout, stop.stderr
        assert not any(f.topic == "run.stopped" for f in run_frames(pg_url, run_id))
        workers.append(Worker.start("second", temporal.address, pg_url, tmp_path / "work2"))
        out, err = follower.communicate(timeout=120)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.communicate(timeout=30)
    assert follower.returncode == 130, (out, err)
    frames = run_frames(pg_url, run_id)
    assert frames[-1].topic == "run.stopped" and frames[-1].meta["reason"] == "stopped"
    branch = f"ralph/{run_id}"
    # Nothing half-committed. The returning worker may take the iteration's retry before the
    # workflow has read the stop (the stop waits for a worker as much as the retry does):
    # then that attempt is stopped as a stop stops it, and recorded whole, marker and work.
    marked = markers(bare, branch)
    files = git(bare, "ls-tree", "--name-only", branch).split()
    finished = [f.meta["status"] for f in frames if f.topic == "iteration.finished"]
    if marked:
        assert marked == [f"{run_id}/1"] and finished == ["stopped"] and "half.txt" in files
    else:
        assert finished == [] and "half.txt" not in files, (finished, files)


def _run_id_of(store_url: str) -> str:
    """The one run recorded in a store of one test."""
    found: list[str] = []

    def started() -> bool:
        with Store(store_url, create=False) as store:
            found[:] = [str(f.meta["run_id"]) for f in store.last("run.started", 5)]
        return bool(found)

    wait_until(started, what="run.started")
    return found[-1]


def test_temporal_and_postgresql_restarted_mid_run(tmp_path: Path,
                                                  workers: list[Worker]) -> None:
    """Both servers restart while the run works: the run goes on and completes, appends
    were retried (nothing lost, gapless), and a follower of the run saw every event."""
    gate = tmp_path / "go"
    bare, _plan = seed_repository(tmp_path, ["First", "Second"], {"tasks": {
        "1": [{**TICK, "shell": [f"while [ ! -e {gate} ]; do sleep 0.05; done"],
               "print": ["first"]}],
        "2": [{**TICK, "print": ["second"]}]}})
    with TemporalDevServer(db_file=tmp_path / "temporal.db") as server, \
            PostgresServer() as postgres:
        url = postgres.url
        workers.append(Worker.start("w", server.address, url, tmp_path / "work"))
        run_id = start_detached(server, bare, url, tmp_path)
        follower = start_ralph("log", "--run", run_id, "--store", url, "--follow", "--json",
                               cwd=tmp_path)
        try:
            wait_until(lambda: any(f.topic == "agent.started"
                                   for f in run_frames(url, run_id)), what="the agent")
            server.restart()
            postgres.restart()
            gate.write_text("go")
            out, err = follower.communicate(timeout=120)
        finally:
            if follower.poll() is None:
                follower.kill()
                follower.communicate(timeout=30)
        assert follower.returncode == 0, err
        frames = run_frames(url, run_id)
        assert frames[-1].meta["reason"] == "complete"
        followed = [json.loads(line) for line in out.splitlines()]
        assert [f["seq"] for f in followed] == [f.seq for f in frames]
        with Store(url) as store:
            seqs = [f.seq for f in store.read()]
        assert seqs == list(range(1, len(seqs) + 1))
        workers.pop().stop()


def test_a_push_rejected_because_the_branch_moved_is_a_failed_attempt(
        tmp_path: Path, temporal: TemporalDevServer, pg_url: str,
        workers: list[Worker]) -> None:
    branch = f"ralph/moved-{uuid.uuid4().hex[:8]}"
    other = tmp_path / "other"
    bare, _plan = seed_repository(tmp_path, ["Only"], {"tasks": {"1": [
        # Someone else pushes to the run's branch while the first attempt works.
        {**TICK, "write": {"mine.txt": "1"}, "shell": [
            f"git clone -q --branch {branch} {tmp_path / 'repo.git'} {other} && cd {other} "
            "&& echo theirs > theirs.txt && git add theirs.txt && "
            "git -c user.name=T -c user.email=t@l commit -q -m theirs && git push -q"]},
        {**TICK, "write": {"mine.txt": "2"}}]}})
    workers.append(Worker.start("w", temporal.address, pg_url, tmp_path / "work"))
    run = ralph("run", "--on", "temporal", "--temporal", temporal.address, "--repo", str(bare),
                "--store", pg_url, "--branch", branch, cwd=tmp_path)
    assert run.returncode == 0, (run.stdout, run.stderr)
    run_id = run.stderr.split()[1]
    frames = run_frames(pg_url, run_id)
    warnings = [f.meta["message"] for f in frames if f.topic == "loop.warning"
                and "push rejected" in f.meta["message"]]
    assert len(warnings) == 1 and f"the branch {branch} moved" in warnings[0]
    log = git(bare, "log", "--format=%s", branch).splitlines()
    assert "theirs" in log  # their commit kept: nothing was forced over it
    assert markers(bare, branch) == [f"{run_id}/2"]
    assert git(bare, "show", f"{branch}:mine.txt").strip() == "2"


def test_a_run_that_cannot_start_says_why(tmp_path: Path, temporal: TemporalDevServer,
                                          pg_url: str, workers: list[Worker]) -> None:
    bare, _plan = seed_repository(tmp_path, [], {"tasks": {}})
    workers.append(Worker.start("w", temporal.address, pg_url, tmp_path / "work"))
    run = ralph("run", "--on", "temporal", "--temporal", temporal.address, "--repo", str(bare),
                "--store", pg_url, cwd=tmp_path)
    assert run.returncode == 2, (run.stdout, run.stderr)
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("error: run run_") and "could not start" in last
    assert "has no tasks" in last
    run_id = run.stderr.split()[1]
    status = ralph("status", "--run", run_id, "--temporal", temporal.address, "--json",
                   cwd=tmp_path)
    assert json.loads(status.stdout)["reason"] == "error"


def test_a_store_outage_longer_than_the_heartbeat_timeout(tmp_path: Path,
                                                          workers: list[Worker]) -> None:
    """PostgreSQL is down for longer than a worker may go silent: the worker's appends wait
    for it (its heartbeats with them), Temporal gives the iteration up and retries it, and the
    retry waits for the first attempt to finish, finds its marker on the branch and takes its
    result: the iteration is done once, the run completes, the store stays gapless."""
    gate = tmp_path / "go"
    bare, _plan = seed_repository(tmp_path, ["First", "Second"], {"tasks": {
        "1": [{**TICK, "shell": [f"while [ ! -e {gate} ]; do sleep 0.05; done"],
               "write": {"one.txt": "1"}}],
        "2": [{**TICK, "write": {"two.txt": "2"}}]}})
    with TemporalDevServer() as server, PostgresServer() as postgres:
        url = postgres.url
        workers.append(Worker.start("w", server.address, url, tmp_path / "work"))
        run_id = start_detached(server, bare, url, tmp_path, "--heartbeat-seconds", "2")
        wait_until(lambda: any(f.topic == "agent.started" for f in run_frames(url, run_id)),
                   what="the agent")
        postgres.kill()
        gate.write_text("go")  # the agent ends; its events wait for the store
        time.sleep(6)
        postgres.start()
        wait_until(lambda: any(f.topic == "run.stopped" for f in run_frames(url, run_id)),
                   timeout=120, what="the run's end")
        frames = run_frames(url, run_id)
        assert frames[-1].meta["reason"] == "complete", frames[-1].meta
        assert sum(f.topic == "task.done" for f in frames) == 2
        with Store(url) as store:
            seqs = [f.seq for f in store.read()]
        assert seqs == list(range(1, len(seqs) + 1))
        assert markers(bare, f"ralph/{run_id}") == [f"{run_id}/1", f"{run_id}/2"], [
            (f.seq, f.topic, f.meta.get("iteration"), f.meta.get("status"),
             f.meta.get("reason"), f.meta.get("message")) for f in frames
            if not f.topic.startswith("agent.")]
        workers.pop().stop()


def test_a_stop_while_an_iteration_works_pushes_it_as_a_stopped_attempt(
        tmp_path: Path, temporal: TemporalDevServer, pg_url: str,
        workers: list[Worker]) -> None:
    agent_pid = tmp_path / "agent.pid"
    bare, _plan = seed_repository(tmp_path, ["Only"], {"tasks": {"1": [
        {"shell": [f"echo $PPID > {agent_pid}.tmp && mv {agent_pid}.tmp {agent_pid}"],
         "write": {"half.txt": "x"}, "hang": 300}]}})
    workers.append(Worker.start("w", temporal.address, pg_url, tmp_path / "work"))
    follower = start_ralph("run", "--on", "temporal", "--temporal", temporal.address,
                           "--repo", str(bare), "--store", pg_url, cwd=tmp_path)
    try:
        wait_until(agent_pid.exists, what="the agent")
        pid = int(agent_pid.read_text())
        run_id = _run_id_of(pg_url)
        stop = ralph("stop", "--run", run_id, "--temporal", temporal.address, cwd=tmp_path)
        assert stop.returncode == 0, stop.stderr
        out, err = follower.communicate(timeout=120)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.communicate(timeout=30)
    assert follower.returncode == 130, (out, err)
    assert not alive(pid)  # the agent's process tree ended with the stop
    frames = run_frames(pg_url, run_id)
    finished = [f.meta["status"] for f in frames if f.topic == "iteration.finished"]
    assert finished == ["stopped"] and frames[-1].meta["reason"] == "stopped"
    branch = f"ralph/{run_id}"
    assert markers(bare, branch) == [f"{run_id}/1"]  # recorded and pushed, as locally
    assert "half.txt" in git(bare, "ls-tree", "--name-only", branch).split()

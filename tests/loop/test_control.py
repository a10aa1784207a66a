"""Control from any process: `ralph pause`, `ralph resume` and `ralph stop` in a second process
act on a `ralph run` running in another; a bridge's stop/pause/resume reach a run started in
a terminal, and `ralph stop` reaches a run started by a bridge. Requests and answers are
`control.requested` / `control.applied` frames in the run's stream (ralph.loop.control)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

from ralph.loop import service as service_module
from ralph.loop.control import ControlFollower, ask
from ralph.loop.events import EventSink
from ralph.loop.lock import ProjectLock
from ralph.loop.state import ActiveRun, load_state, save_state
from ralph.store import Store
from tests.bridge.client import BridgeProcess
from tests.loop.conftest import Project, wait_for
from tests.loop.test_cli_loop import events, wait_until
from tests.proc.helpers import group_members

RALPH = [sys.executable, "-m", "ralph"]
TIMEOUT = 120
TICK: dict[str, Any] = {"tick": True, "print": ["ticked it"]}


class RunningRalph:
    """`ralph ARGS...` in the project, in a session of its own; stderr read as it comes."""

    def __init__(self, root: Path, *args: str) -> None:
        self.root = root
        self.proc = subprocess.Popen([*RALPH, *args], cwd=root, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, start_new_session=True)
        self._err: list[str] = []
        self._out = ""
        self._readers = [threading.Thread(target=self._read_err, daemon=True),
                         threading.Thread(target=self._read_out, daemon=True)]
        for reader in self._readers:
            reader.start()

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._err.append(line)

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        self._out = self.proc.stdout.read()

    @property
    def err(self) -> str:
        return "".join(self._err)

    def alive(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"ralph exited early with {self.proc.returncode}: {self.err}")
        return True

    def wait(self, timeout: float = TIMEOUT) -> tuple[int, str, str]:
        code = self.proc.wait(timeout=timeout)
        for reader in self._readers:
            reader.join(timeout=TIMEOUT)
        return code, self._out, self.err

    def __enter__(self) -> RunningRalph:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=TIMEOUT)
        for reader in self._readers:
            reader.join(timeout=TIMEOUT)


def ralph(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RALPH, *args], cwd=root, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=TIMEOUT, check=False)


def count(root: Path, topic: str) -> int:
    return len(events(root, topic)) if (root / ".ralph" / "store").exists() else 0


def status(root: Path) -> dict[str, Any]:
    done = ralph(root, "status", "--json")
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def wait_for_topic(root: Path, topic: str, n: int = 1, run: RunningRalph | None = None) -> None:
    wait_until(lambda: (run is None or run.alive()) and count(root, topic) >= n,
               f"{n} {topic} event(s)")


def gated(tmp: Path, name: str = "go") -> tuple[dict[str, Any], Path]:
    """A plan step that ticks its task, then waits until the test creates the file `go`
    (outside the project): the iteration lasts exactly as long as the test needs."""
    go = tmp / name
    return {**TICK, "shell": [f"while [ ! -e {go} ]; do sleep 0.05; done"]}, go


def agent_pgid(root: Path, run: RunningRalph) -> int:
    log = root / ".ralph" / "logs" / "000001.log"
    found: list[int] = []

    def started() -> bool:
        run.alive()
        match = re.search(r"child-pid (\d+)", log.read_text()) if log.exists() else None
        if match:
            found.append(int(match.group(1)))
        return bool(found)

    wait_until(started, "the fake agent to start")
    return found[0]


def control_frames(root: Path, run_id: str) -> list[tuple[str, dict[str, Any]]]:
    stream = f"runs/{run_id}"
    return [(f.topic, f.meta) for f in events(root, "control.*") if f.stream == stream]


# -- no run ------------------------------------------------------------------------------------


def test_with_no_run_every_control_command_says_so(project: Project) -> None:
    for action in ("stop", "pause", "resume"):
        done = ralph(project.root, action)
        assert done.returncode == 1, (action, done.stderr)
        assert done.stdout.strip() == "no run is active for this project"
        assert "Traceback" not in done.stderr
        as_json = ralph(project.root, action, "--json")
        assert as_json.returncode == 1
        reply = json.loads(as_json.stdout)
        assert (reply["ok"], reply["run_id"], reply["paused"]) == (False, None, False)
        assert reply["message"] == "no run is active for this project"
    store = project.root / ".ralph" / "store"  # `ralph init` made it empty
    assert not store.exists() or list(store.iterdir()) == []  # a question writes nothing


def test_after_a_run_ended_there_is_no_run_to_stop(project: Project) -> None:
    project.plan({"default": TICK})
    assert ralph(project.root, "run", "--quiet").returncode == 0
    done = ralph(project.root, "stop")
    assert done.returncode == 1 and "no run is active" in done.stdout


# -- the terminal's run, steered from another terminal -----------------------------------------


def test_pause_and_resume_a_run_from_another_process(project: Project,
                                                     tmp_path: Path) -> None:
    first, go = gated(tmp_path)
    project.plan({"tasks": {"1": [first], "2": [TICK], "3": [TICK]}})
    root = project.root
    with RunningRalph(root, "run", "--json") as run:
        wait_for_topic(root, "iteration.started", 1, run)
        paused = ralph(root, "pause")
        assert paused.returncode == 0, paused.stderr
        assert re.fullmatch(r"run run_\w+ pauses before its next iteration\n", paused.stdout)
        now = status(root)
        assert (now["running"], now["paused"]) == (True, True)
        go.touch()  # the iteration under way finishes; the next one waits
        wait_for_topic(root, "run.paused", 1, run)
        # While paused, no iteration starts (watched for a while: nothing should happen).
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            assert count(root, "iteration.started") == 1
            time.sleep(0.1)
        assert count(root, "iteration.finished") == 1
        assert status(root)["paused"] is True
        text = ralph(root, "status")
        assert re.search(r"loop paused \(run_\w+\)", text.stdout), text.stdout
        again = ralph(root, "pause")  # already paused: still ok, still paused
        assert again.returncode == 0 and json.loads(
            ralph(root, "status", "--json").stdout)["paused"] is True

        resumed = ralph(root, "resume")
        assert resumed.returncode == 0, resumed.stderr
        assert resumed.stdout.strip().endswith("resumes")
        code, out, err = run.wait()
    assert code == 0, err
    outcome = json.loads(out)
    assert (outcome["reason"], outcome["iterations"], outcome["done"]) == ("complete", 3, 3)
    assert count(root, "run.resumed") == 1
    frames = control_frames(root, outcome["run_id"])
    requested = [m for t, m in frames if t == "control.requested"]
    applied = [m for t, m in frames if t == "control.applied"]
    assert [m["action"] for m in requested] == ["pause", "pause", "resume"]
    assert [(m["action"], m["ok"]) for m in applied] == [("pause", True), ("pause", True),
                                                         ("resume", True)]
    assert [m["request_id"] for m in applied] == [m["request_id"] for m in requested]
    assert all(re.fullmatch(r"pid \d+", m["by"]) for m in requested)
    assert applied[-1]["paused"] is False and applied[0]["paused"] is True
    # the run's own terminal said what happened
    assert re.search(r"pause asked by pid \d+", err)
    assert "run paused: it goes on after `ralph resume`" in err and "run resumed" in err
    assert status(root)["paused"] is False


def test_resume_of_a_run_that_is_not_paused_says_so(project: Project, tmp_path: Path) -> None:
    first, go = gated(tmp_path)
    project.plan({"tasks": {"1": [first], "2": [TICK], "3": [TICK]}})
    with RunningRalph(project.root, "run") as run:
        wait_for_topic(project.root, "iteration.started", 1, run)
        done = ralph(project.root, "resume")
        assert done.returncode == 1, done.stderr
        assert done.stdout.strip().endswith("is not paused")
        go.touch()
        code, _, err = run.wait()
    assert code == 0, err


def test_stop_a_run_from_another_process(project: Project) -> None:
    project.plan({"default": {"spawn": 300, "sleep": 300}})
    root = project.root
    pgid = 0
    with RunningRalph(root, "run", "--json") as run:
        try:
            pgid = agent_pgid(root, run)
            assert group_members(pgid)
            stopped = ralph(root, "stop")
            assert stopped.returncode == 0, stopped.stderr
            assert stopped.stdout.strip().endswith("is stopping")
            code, out, err = run.wait()
        finally:
            if pgid and group_members(pgid):
                os.killpg(pgid, signal.SIGKILL)
    assert code == 130, err
    assert "Traceback" not in err
    wait_until(lambda: not group_members(pgid), "the agent's group to end", 10)
    outcome = json.loads(out)
    assert outcome["reason"] == "stopped"
    assert "run ended: stopped on request" in err
    frames = control_frames(root, outcome["run_id"])
    assert [(t, m["action"]) for t, m in frames] == [("control.requested", "stop"),
                                                     ("control.applied", "stop")]
    assert frames[1][1]["ok"] is True
    assert events(root, "iteration.finished")[-1].meta["status"] == "stopped"
    after = status(root)
    assert (after["running"], after["activeRunId"]) == (False, None)


def test_stop_a_paused_run(project: Project, tmp_path: Path) -> None:
    first, go = gated(tmp_path)
    project.plan({"tasks": {"1": [first], "2": [TICK], "3": [TICK]}})
    root = project.root
    with RunningRalph(root, "run", "--json") as run:
        wait_for_topic(root, "iteration.started", 1, run)
        assert ralph(root, "pause").returncode == 0
        go.touch()
        wait_for_topic(root, "run.paused", 1, run)
        assert ralph(root, "stop").returncode == 0
        code, out, err = run.wait()
    assert code == 130, err
    assert json.loads(out)["reason"] == "stopped"
    assert count(root, "iteration.started") == 1
    assert count(root, "run.resumed") == 0  # a stop is not a resume


def test_a_step_cannot_be_paused_but_can_be_stopped(project: Project, tmp_path: Path) -> None:
    first, _ = gated(tmp_path)  # never let go: the stop ends it
    project.plan({"tasks": {"1": [first]}})
    root = project.root
    with RunningRalph(root, "step", "--json") as step:
        wait_for_topic(root, "iteration.started", 1, step)
        pause = ralph(root, "pause")
        assert pause.returncode == 1, pause.stderr
        assert "cannot pause" in pause.stdout
        assert ralph(root, "stop").returncode == 0
        code, out, err = step.wait()
    assert code == 130, err
    assert out == ""
    assert "Traceback" not in err and "run ended" not in err
    assert events(root, "iteration.finished")[-1].meta["status"] == "stopped"


# -- across faces: a bridge and a terminal -----------------------------------------------------


def test_a_bridge_stops_a_run_started_in_a_terminal(project: Project) -> None:
    project.plan({"default": {"spawn": 300, "sleep": 300}})
    root = project.root
    pgid = 0
    with BridgeProcess(root) as bridge:
        bridge.wait_event("bridge_started")  # it follows the store from now on
        run = RunningRalph(root, "run", "--json")
        try:
            started = bridge.wait_event("iteration_started")
            pgid = agent_pgid(root, run)
            assert bridge.call("status")["activeRunId"] == started["runId"]
            assert bridge.call("stop") == {"ok": True, "stopped": True}
            code, out, err = run.wait()
            stopped = bridge.wait_event("run_stopped", runId=started["runId"])
        finally:
            run.__exit__(None, None, None)
            if pgid and group_members(pgid):
                os.killpg(pgid, signal.SIGKILL)
        assert bridge.call("stop") == {"ok": True, "stopped": False}  # nothing left to stop
    assert code == 130, err
    assert json.loads(out)["reason"] == "stopped" and stopped["reason"] == "stopped"
    wait_until(lambda: not group_members(pgid), "the agent's group to end", 10)


def test_a_bridge_pauses_and_resumes_a_run_started_in_a_terminal(project: Project,
                                                                 tmp_path: Path) -> None:
    first, go = gated(tmp_path)
    project.plan({"tasks": {"1": [first], "2": [TICK], "3": [TICK]}})
    root = project.root
    with BridgeProcess(root) as bridge:
        bridge.wait_event("bridge_started")  # it follows the store from now on
        with RunningRalph(root, "run", "--json") as run:
            run_id = bridge.wait_event("iteration_started")["runId"]
            assert bridge.call("pause") == {"ok": True, "runId": run_id, "paused": True}
            assert bridge.call("status")["paused"] is True
            go.touch()
            assert bridge.wait_event("run_paused")["runId"] == run_id
            assert len([e for e in bridge.events if e["type"] == "iteration_started"]) == 1
            assert bridge.call("resume") == {"ok": True, "runId": run_id, "paused": False}
            assert bridge.wait_event("run_resumed")["runId"] == run_id
            assert bridge.wait_event("run_stopped", runId=run_id)["reason"] == "complete"
            code, out, err = run.wait()
    assert code == 0, err
    assert json.loads(out)["run_id"] == run_id


def test_ralph_stop_stops_a_run_started_by_a_bridge(project: Project) -> None:
    project.plan({"default": {"spawn": 300, "sleep": 300}})
    root = project.root
    with BridgeProcess(root) as bridge:
        run_id = bridge.call("run")["runId"]
        bridge.wait_event("iteration_started")
        log = root / ".ralph" / "logs" / "000001.log"
        wait_until(lambda: log.exists() and "child-pid" in log.read_text(), "the agent")
        pgid = int(re.findall(r"child-pid (\d+)", log.read_text())[0])
        try:
            done = ralph(root, "stop", "--json")
            assert done.returncode == 0, done.stderr
            reply = json.loads(done.stdout)
            assert (reply["ok"], reply["run_id"]) == (True, run_id)
            stopped = bridge.wait_event("run_stopped", runId=run_id)
        finally:
            if group_members(pgid):
                wait_until(lambda: not group_members(pgid), "the agent's group to end", 10)
        assert stopped["reason"] == "stopped"
        assert bridge.call("status")["running"] is False
    assert group_members(pgid) == []
    requested = [m for t, m in control_frames(root, run_id) if t == "control.requested"]
    assert [m["action"] for m in requested] == ["stop"]


# -- a run that ends, a run that starts, requests that make no sense ---------------------------


def requested(store: Store, run_id: str) -> list[str]:
    """The request ids of the run's control.requested frames."""
    return [f.meta["request_id"] for f in store.read(topic="control.requested",
                                                     stream=f"runs/{run_id}")]


@pytest.mark.timeout(30)
async def test_a_request_to_a_run_that_ends_before_reading_it_is_told_at_once(
        tmp_path: Path) -> None:
    """The run's process holds the lock; it appends run.stopped after the request (it ended
    without reading it): the requester says so instead of waiting for an answer."""
    doorbell = tmp_path / "loop.lock"
    lock = ProjectLock(doorbell)
    assert lock.try_acquire()
    try:
        with Store(tmp_path / "store") as store:
            asking = asyncio.ensure_future(ask(store, "run_ending", "stop", doorbell, wait_s=60))
            await wait_for(lambda: requested(store, "run_ending"))
            store.append("run.stopped", {"run_id": "run_ending", "reason": "complete"},
                         stream="runs/run_ending")
            reply = await asking
    finally:
        lock.release()
    assert (reply.ok, reply.run_id, reply.paused) == (False, "run_ending", False)
    assert "has ended" in reply.message


@pytest.mark.timeout(30)
async def test_a_request_to_a_run_whose_lock_is_free_is_told_at_once(tmp_path: Path) -> None:
    """No process holds the lock (the run's process is gone): nobody will answer."""
    doorbell = tmp_path / "loop.lock"
    doorbell.write_text("12345\n")
    with Store(tmp_path / "store") as store:
        reply = await ask(store, "run_gone", "pause", doorbell, wait_s=60)
        assert len(requested(store, "run_gone")) == 1  # it was asked all the same
    assert (reply.ok, reply.run_id) == (False, "run_gone")
    assert "has ended" in reply.message


def test_an_unknown_action_is_answered_as_unknown(tmp_path: Path) -> None:
    """Anyone may append to a run's stream: a request for an action that does not exist is
    answered (ok false) without echoing it, and a long `by` is clipped."""
    doorbell = tmp_path / "loop.lock"
    doorbell.write_text("")
    applied: list[str] = []

    def apply(action: str) -> tuple[bool, bool]:
        applied.append(action)
        return True, action == "pause"

    with Store(tmp_path / "store") as store:
        follower = ControlFollower(store, EventSink(store, "run_ctl"), apply, doorbell)
        stream = "runs/run_ctl"
        store.append("control.requested", {"run_id": "run_ctl", "request_id": "ctl_odd",
                                           "action": "\x1b[2Jexplode", "by": "x" * 500},
                     stream=stream)
        store.append("control.requested", {"run_id": "run_ctl", "request_id": "ctl_pause",
                                           "action": "pause", "by": "pid 7"}, stream=stream)
        os.utime(doorbell, ns=(1, 1))  # the doorbell rings
        follower.check()
        answers = [f.meta for f in store.read(topic="control.applied", stream=stream)]
    assert applied == ["pause"]
    assert answers == [
        {"run_id": "run_ctl", "request_id": "ctl_odd", "action": "unknown", "ok": False,
         "paused": False, "by": "x" * 100},
        {"run_id": "run_ctl", "request_id": "ctl_pause", "action": "pause", "ok": True,
         "paused": True, "by": "pid 7"}]


_LOCK_HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
os.ftruncate(fd, 0)
os.write(fd, f"{os.getpid()}\\n".encode())
sys.stdin.read()  # holds the lock until the test closes its stdin
"""


@contextlib.contextmanager
def lock_held_elsewhere(root: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A process holding `.ralph/loop.lock` (its pid written in it), as a run that is
    starting does before it records itself in state.json."""
    path = root / ".ralph" / "loop.lock"
    holder = subprocess.Popen([sys.executable, "-c", _LOCK_HOLDER, str(path)],
                              stdin=subprocess.PIPE, start_new_session=True)
    try:
        wait_until(lambda: ProjectLock(path).is_held_elsewhere()
                   and path.read_text().strip() == str(holder.pid), "the lock to be held")
        yield holder
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        try:
            holder.wait(timeout=TIMEOUT)
        finally:
            if holder.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(holder.pid, signal.SIGKILL)
                holder.wait(timeout=TIMEOUT)


async def test_a_stop_while_a_run_is_starting_says_so(project: Project,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The lock is held but state.json names no run yet: the stop waits a little for the run
    to record itself, then says a run is starting (not that there is none)."""
    monkeypatch.setattr(service_module, "STARTING_WAIT_S", 1.0, raising=False)
    service = project.service()
    try:
        with lock_held_elsewhere(project.root):
            reply = await service.request("stop")
    finally:
        await service.aclose()
    assert (reply.ok, reply.run_id, reply.answered) == (False, None, False)
    assert "a run is starting" in reply.message
    with Store(project.root / ".ralph" / "store") as store:
        assert list(store.read(topic="control.*")) == []  # nobody was asked


async def test_a_stop_while_a_run_is_starting_reaches_it_once_it_is_recorded(
        project: Project) -> None:
    """The run records itself (its pid is the lock holder's) while the stop waits: the stop
    is asked of that run, which answers."""
    service = project.service()
    try:
        with lock_held_elsewhere(project.root) as holder, \
                Store(project.root / ".ralph" / "store") as store:
            asking = asyncio.ensure_future(service.request("stop"))
            await asyncio.sleep(0)  # it looked once: no run recorded yet, it waits
            assert not asking.done()
            state_path = project.root / ".ralph" / "state.json"
            state = load_state(state_path)
            state.active_run = ActiveRun(run_id="run_starting", pid=holder.pid, agent="fake",
                                         max_iterations=1, started_at="2026-01-01T00:00:00Z")
            save_state(state_path, state)
            await wait_for(lambda: requested(store, "run_starting"))
            request_id = requested(store, "run_starting")[0]
            store.append("control.applied", {"run_id": "run_starting", "request_id": request_id,
                                             "action": "stop", "ok": True, "paused": False},
                         stream="runs/run_starting")
            reply = await asyncio.wait_for(asking, TIMEOUT)
    finally:
        await service.aclose()
    assert (reply.ok, reply.run_id, reply.answered) == (True, "run_starting", True)
    assert reply.message == "run run_starting is stopping"


# -- a pause as a run starts, and in its last iteration ----------------------------------------


def test_a_pause_asked_as_a_bridge_run_starts_is_in_state_json(project: Project) -> None:
    """A pause asked right after a bridge's `run` (before or as the run records itself): every
    process sees the run paused, as the bridge does, until it resumes."""
    project.plan({"default": TICK})
    root = project.root
    with BridgeProcess(root) as bridge:
        bridge.wait_event("bridge_started")
        run_id = bridge.call("run")["runId"]
        assert bridge.call("pause") == {"ok": True, "runId": run_id, "paused": True}
        assert bridge.wait_event("run_paused")["runId"] == run_id
        assert bridge.call("status")["paused"] is True
        elsewhere = status(root)
        assert (elsewhere["running"], elsewhere["activeRunId"], elsewhere["paused"]) == (
            True, run_id, True)
        assert bridge.call("resume") == {"ok": True, "runId": run_id, "paused": False}
        assert status(root)["paused"] is False
        stopped = bridge.wait_event("run_stopped", runId=run_id)
        assert bridge.call("status")["paused"] is False
    assert stopped["reason"] == "complete"
    assert status(root)["paused"] is False


@pytest.mark.parametrize(("prd", "limit", "reason", "code"), [
    (None, "1", "max_iterations", 1),  # three tasks, one iteration allowed
    ("# P\n\n## Tasks\n\n- [ ] 1. Only task\n", "5", "complete", 0)])
def test_a_pause_in_the_last_iteration_does_not_hold_the_run(
        project: Project, tmp_path: Path, prd: str | None, limit: str, reason: str,
        code: int) -> None:
    """A run paused during an iteration after which it has nothing left to do (its limit
    reached, every task done) ends: no run.paused, no resume needed."""
    if prd is not None:
        project.prd(prd)
        project.commit("one task")
    first, go = gated(tmp_path)
    project.plan({"tasks": {"1": [first], "2": [TICK], "3": [TICK]}})
    root = project.root
    with RunningRalph(root, "run", "--json", "--max-iterations", limit) as run:
        wait_for_topic(root, "iteration.started", 1, run)
        paused = ralph(root, "pause")
        assert paused.returncode == 0, paused.stderr
        go.touch()
        wait_until(lambda: count(root, "run.stopped") + count(root, "run.paused") > 0,
                   "the run to end or hold")
        assert count(root, "run.paused") == 0
        done, out, err = run.wait()
    assert done == code, err
    outcome = json.loads(out)
    assert (outcome["reason"], outcome["iterations"]) == (reason, 1)
    after = status(root)
    assert (after["running"], after["paused"]) == (False, False)

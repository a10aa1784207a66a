"""Control from any process: `ralph pause`, `ralph resume` and `ralph stop` in a second process
act on a `ralph run` running in another; a bridge's stop/pause/resume reach a run started in
a terminal, and `ralph stop` reaches a run started by a bridge. Requests and answers are
`control.requested` / `control.applied` frames in the run's stream (ralph.loop.control)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from tests.bridge.client import BridgeProcess
from tests.loop.conftest import Project
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

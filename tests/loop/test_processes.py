"""Nothing outlives a run: not a daemon the agent started outside its process group, not the
agent of an orchestrator killed with SIGKILL; a closed terminal (SIGHUP) stops a run as
SIGTERM does."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ralph.store import Store
from ralph.testing import misbehaving
from tests.loop.conftest import Project, start_orchestrator, wait_for
from tests.proc.helpers import group_members

RALPH = [sys.executable, "-m", "ralph"]


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent is not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            state = handle.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _pid_from(path: Path) -> int:
    return int(path.read_text())


@pytest.mark.parametrize("how", ["setsid", "double_fork", "nohup"])
async def test_a_daemon_the_agent_left_does_not_outlive_the_iteration(
        project: Project, tmp_path: Path, how: str) -> None:
    pid_file = tmp_path / "daemon.pid"
    project.plan({"tasks": {"1": [misbehaving.leave_daemon(how, str(pid_file))]}})
    service = project.service()
    try:
        result = await service.step()
    finally:
        await service.aclose()
    daemon = _pid_from(pid_file)
    try:
        assert result.verified
        assert not _alive(daemon), f"the {how} daemon {daemon} outlived the iteration"
    finally:
        _kill(daemon)


async def test_a_daemon_a_gate_left_does_not_outlive_it(project: Project,
                                                        tmp_path: Path) -> None:
    pid_file = tmp_path / "gate-daemon.pid"
    script = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); " \
             "time.sleep(120)"
    # The gate leaves the daemon running and exits once it is there.
    project.config(gates=[f"setsid {sys.executable} -c \"{script}\" >/dev/null 2>&1 & "
                          f"while [ ! -s {pid_file} ]; do sleep 0.01; done"])
    project.commit("a gate that leaves a daemon")
    project.plan({"default": {"tick": True}})
    service = project.service()
    try:
        result = await service.step()
    finally:
        await service.aclose()
    await wait_for(pid_file.exists, timeout=10)
    daemon = _pid_from(pid_file)
    try:
        assert result.gates_ok
        assert not _alive(daemon)
    finally:
        _kill(daemon)


async def test_a_sigkilled_orchestrator_leaves_no_agent_running(project: Project,
                                                                tmp_path: Path) -> None:
    pid_file = tmp_path / "daemon.pid"
    step = {**misbehaving.leave_daemon("setsid", str(pid_file)), "hang": 120}
    project.plan({"tasks": {"1": [step, {"tick": True}]}})
    proc = start_orchestrator(project.root)
    pgid = daemon = 0
    try:
        await wait_for(pid_file.exists, timeout=60)
        await wait_for(lambda: bool((project.state().get("in_flight") or {})
                                    .get("agent_pgid")), timeout=60)
        pgid = project.state()["in_flight"]["agent_pgid"]
        daemon = _pid_from(pid_file)
        assert group_members(pgid) and _alive(daemon)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        killed = time.monotonic()
        await wait_for(lambda: not group_members(pgid) and not _alive(daemon), timeout=5)
        assert time.monotonic() - killed <= 5
        # Until the next start, status says the iteration was interrupted.
        status = subprocess.run([*RALPH, "status", "--json"], cwd=project.root, text=True,
                                capture_output=True, timeout=60, check=True,
                                stdin=subprocess.DEVNULL)
        report = json.loads(status.stdout)
        assert report["running"] is False
        assert report["last"]["status"] == "interrupted"
        assert report["last"]["iteration"] == 1
    finally:
        _kill(proc.pid)
        if pgid:
            for member in group_members(pgid):
                _kill(member)
        if daemon:
            _kill(daemon)
    # The next start says what it found, in one line, and goes on.
    result = subprocess.run([*RALPH, "step"], cwd=project.root, text=True,
                            capture_output=True, timeout=120, stdin=subprocess.DEVNULL,
                            check=False)
    assert result.returncode == 0, result.stderr
    recovered = [line for line in result.stderr.splitlines() if "recovered iteration" in line]
    assert len(recovered) == 1, result.stderr
    assert "recovered iteration 1 (task 1), interrupted when the process running it" in (
        recovered[0])
    assert "failed" not in result.stderr.lower()


def test_sighup_stops_a_run_like_sigterm(project: Project) -> None:
    project.plan({"default": misbehaving.hang(120, write={"half.txt": "half\n"})})
    proc = subprocess.Popen([*RALPH, "run"], cwd=project.root, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    pgid = 0
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            flight = (project.state().get("in_flight") or {}) if (
                project.root / ".ralph/state.json").exists() else {}
            if flight.get("agent_pgid") and (project.root / "half.txt").exists():
                pgid = flight["agent_pgid"]
                break
            time.sleep(0.05)
        assert pgid, "the agent did not start"
        proc.send_signal(signal.SIGHUP)
        _, err = proc.communicate(timeout=60)
    finally:
        _kill(proc.pid)
    assert proc.returncode == 129, err
    assert group_members(pgid) == []
    with Store(project.root / ".ralph" / "store") as store:
        stopped = [f.meta for f in store.read("run.stopped")]
    assert stopped and stopped[-1]["reason"] == "stopped"
    assert "Traceback" not in err.decode()

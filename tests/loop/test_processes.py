"""Nothing outlives a run: not a daemon the agent started outside its process group, not the
agent of an orchestrator killed with SIGKILL; a closed terminal (SIGHUP) stops a run as
SIGTERM does."""

from __future__ import annotations

import contextlib
import json
import os
import pty
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


def _wait_for_agent(project: Project, ready: Path, timeout: float = 60) -> int:
    """The agent's process group, once it runs and `ready` exists."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        flight = (project.state().get("in_flight") or {}) if (
            project.root / ".ralph/state.json").exists() else {}
        if flight.get("agent_pgid") and ready.exists():
            return int(flight["agent_pgid"])
        time.sleep(0.05)
    raise AssertionError("the agent did not start")


def _run_stopped(project: Project) -> list[dict[str, object]]:
    with Store(project.root / ".ralph" / "store") as store:
        return [f.meta for f in store.read("run.stopped")]


def test_closing_the_terminal_stops_a_run_with_129(project: Project) -> None:
    """A real terminal that goes away: the session's controlling pty closes, the kernel
    sends SIGHUP, and every write to the terminal fails from then on."""
    project.plan({"default": misbehaving.hang(120, write={"half.txt": "half\n"})})
    pid, master = pty.fork()
    if pid == 0:  # the child: a session leader on the pty, as a login shell's job would be
        os.chdir(project.root)
        os.execv(sys.executable, [sys.executable, "-m", "ralph", "run"])
    pgid = 0
    try:
        pgid = _wait_for_agent(project, project.root / "half.txt")
        os.close(master)  # the terminal window closes
        master = -1
        deadline = time.monotonic() + 60
        status = 0
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("ralph run did not end after its terminal closed")
    finally:
        if master >= 0:
            os.close(master)
        _kill(pid)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 129, status
    assert group_members(pgid) == []
    assert _run_stopped(project)[-1]["reason"] == "stopped"
    state = project.state()
    assert state["in_flight"] is None and state["active_run"] is None
    assert "(attempt 1, stopped:" in subprocess.run(
        ["git", "log", "-1", "--format=%s"], cwd=project.root, capture_output=True, text=True,
        check=True).stdout


def test_under_nohup_a_hangup_is_ignored(project: Project) -> None:
    project.plan({"default": misbehaving.hang(120, write={"half.txt": "half\n"})})
    proc = subprocess.Popen(["nohup", *RALPH, "run"], cwd=project.root,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        _wait_for_agent(project, project.root / "half.txt")
        proc.send_signal(signal.SIGHUP)
        time.sleep(1.0)
        assert proc.poll() is None, "a hangup under nohup stopped the run"
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    finally:
        _kill(proc.pid)
    assert proc.returncode == 130


def test_a_second_sigterm_does_not_interrupt_the_stop(project: Project) -> None:
    """The stop records and commits what the iteration left; signals that come meanwhile
    (a terminal sends SIGHUP twice) do not cut it short."""
    hook = project.root / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\nsleep 2\n")  # a slow commit, as hooks can be
    hook.chmod(0o755)
    project.plan({"default": misbehaving.hang(120, write={"half.txt": "half\n"})})
    proc = subprocess.Popen([*RALPH, "run"], cwd=project.root, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        _wait_for_agent(project, project.root / "half.txt")
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        _kill(proc.pid)
    assert proc.returncode == 130, err
    state = project.state()
    assert state["in_flight"] is None
    log = subprocess.run(["git", "log", "-1", "--format=%s"], cwd=project.root,
                         capture_output=True, text=True, check=True).stdout
    assert "(attempt 1, stopped:" in log

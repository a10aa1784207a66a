"""ralph.proc's containment: nothing a contained child started outlives the call, not even
what left its process group, nor anything after the orchestrator is SIGKILLed.

Real processes throughout: daemons made the ways real tools make them (the fake agent's
`daemon` step: setsid, double fork, nohup), an orchestrator subprocess killed with SIGKILL.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from ralph import containment
from ralph.agents.server import AgentServer
from ralph.proc import OWNER_ENV, kill_owned, owner_id, run_process, run_shell
from tests.proc.helpers import (
    group_members,
    kill_and_reap,
    pids_from,
    py,
    running,
    stat_of,
    wait_until,
    zombie_children,
)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="containment beyond the group needs /proc")


class Recorder:
    def __init__(self) -> None:
        self.data = b""
        self.ready = asyncio.Event()

    def __call__(self, _stream: str, data: bytes) -> None:
        self.data += data
        if b"left a" in self.data or b"ready" in self.data:
            self.ready.set()


def fake_agent(tmp_path: Path, how: str, **step: Any) -> tuple[list[str], Path]:
    """The fake agent's argv for a step that leaves a `how` daemon, and its pid file."""
    pid_file = tmp_path / f"{how}.pid"
    plan = tmp_path / f"plan-{how}.json"
    plan.write_text(json.dumps({"default": {
        "daemon": {"how": how, "seconds": 120, "pid_file": str(pid_file)}, **step}}))
    return [sys.executable, "-m", "ralph.testing.fake_agent", "--plan", str(plan)], pid_file


def gone(pid: int) -> bool:
    """Not running, and not left a zombie child of ours either: killed and reaped."""
    return not running(pid) and pid not in zombie_children()


# -- after the call ---------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["setsid", "double_fork", "nohup"])
async def test_contained_daemon_is_ended_when_the_child_exits(tmp_path: Path, how: str) -> None:
    argv, pid_file = fake_agent(tmp_path, how)
    daemon = 0
    try:
        result = await run_process(argv, cwd=tmp_path, stdin_data=b"", timeout_s=60,
                                   contain=True)
        daemon = int(pid_file.read_text())
        assert result.exit_code == 0, result.tail
        assert f"left a {how} daemon".encode() in result.tail
        assert gone(daemon)
        assert group_members(result.pid) == []
    finally:
        kill_and_reap([daemon] if daemon else [])


async def test_contained_daemon_is_ended_on_timeout(tmp_path: Path) -> None:
    argv, pid_file = fake_agent(tmp_path, "setsid", sleep=120)
    rec = Recorder()
    daemon = 0
    try:
        result = await run_process(argv, cwd=tmp_path, stdin_data=b"", timeout_s=5,
                                   grace_s=0.5, on_output=rec, contain=True)
        assert result.timed_out
        assert b"left a setsid daemon" in rec.data  # within the 5 s, even on a loaded machine
        daemon = int(pid_file.read_text())
        assert gone(daemon)
        assert group_members(result.pid) == []
    finally:
        kill_and_reap([daemon] if daemon else [])


async def test_contained_daemon_is_ended_on_cancellation(tmp_path: Path) -> None:
    argv, pid_file = fake_agent(tmp_path, "double_fork", sleep=120)
    rec = Recorder()
    daemon = 0
    task = asyncio.create_task(run_process(argv, cwd=tmp_path, stdin_data=b"", timeout_s=None,
                                           grace_s=0.5, on_output=rec, contain=True))
    try:
        async with asyncio.timeout(60):
            await rec.ready.wait()
        daemon = int(pid_file.read_text())
        assert running(daemon)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert gone(daemon)
    finally:
        task.cancel()
        kill_and_reap([daemon] if daemon else [])


async def test_uncontained_daemon_still_escapes(tmp_path: Path) -> None:
    """contain=False is unchanged: no marker, and a new session escapes the group kill."""
    argv, pid_file = fake_agent(tmp_path, "setsid")
    daemon = 0
    try:
        result = await run_process(argv, cwd=tmp_path, stdin_data=b"", timeout_s=60)
        daemon = int(pid_file.read_text())
        assert result.exit_code == 0
        assert running(daemon)
        with open(f"/proc/{daemon}/environ", "rb") as handle:
            assert OWNER_ENV.encode() + b"=" not in handle.read()
    finally:
        kill_and_reap([daemon] if daemon else [])


async def test_escaped_process_holding_the_pipes_is_ended(tmp_path: Path) -> None:
    result = await run_process(py("""
        import os, sys, time
        if os.fork() == 0:
            os.setsid()
            print(os.getpid(), flush=True)
            time.sleep(120)
            os._exit(0)
        time.sleep(0.3)
    """), cwd=tmp_path, timeout_s=60, grace_s=0.2, contain=True)
    escaped = pids_from(result.tail)
    try:
        assert result.exit_code == 0 and len(escaped) == 1
        assert gone(escaped[0])
    finally:
        kill_and_reap(escaped)


async def test_scrubbed_environment_in_the_session_or_below_a_daemon(tmp_path: Path) -> None:
    """No marker, but still ours: a process that left the group but not the session, and
    one started (with `env -i`) by a marked daemon."""
    result = await run_process(py("""
        import os, subprocess, sys, time
        # Same session, its own group, an empty environment.
        in_session = subprocess.Popen(["sleep", "120"], env={}, process_group=0)
        # A marked setsid daemon whose child has an empty environment.
        daemon = subprocess.Popen(
            [sys.executable, "-c",
             "import subprocess, time; c = subprocess.Popen(['sleep', '120'], env={}); "
             "print(c.pid, flush=True); time.sleep(120)"],
            start_new_session=True, stdout=subprocess.PIPE)
        below = daemon.stdout.readline().decode().strip()
        print(in_session.pid, daemon.pid, below, flush=True)
    """), cwd=tmp_path, timeout_s=60, contain=True)
    pids = pids_from(result.tail)
    try:
        assert result.exit_code == 0 and len(pids) == 3, result.tail
        for pid in pids:
            assert gone(pid), pid
    finally:
        kill_and_reap(pids)


async def test_concurrent_children_end_only_their_own(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first_argv, first_pid_file = fake_agent(tmp_path / "a", "setsid")
    second_argv, second_pid_file = fake_agent(tmp_path / "b", "setsid", sleep=120)
    daemons: list[int] = []
    rec = Recorder()
    second = asyncio.create_task(run_process(
        second_argv, cwd=tmp_path, stdin_data=b"", timeout_s=None, grace_s=0.5,
        on_output=rec, contain=True))
    try:
        async with asyncio.timeout(60):
            await rec.ready.wait()
        daemons.append(int(second_pid_file.read_text()))
        first = await run_process(first_argv, cwd=tmp_path, stdin_data=b"", timeout_s=60,
                                  contain=True)
        daemons.append(int(first_pid_file.read_text()))
        assert first.exit_code == 0
        assert gone(daemons[1])
        assert running(daemons[0])  # the other child's daemon: not this call's to end
        second.cancel()
        with pytest.raises(asyncio.CancelledError):
            await second
        assert gone(daemons[0])
    finally:
        second.cancel()
        kill_and_reap(daemons)


# -- the marker -------------------------------------------------------------------------------


async def test_marker_in_the_environment_and_nested(tmp_path: Path) -> None:
    command = f'printf "%s" "${OWNER_ENV}"'
    plain = await run_shell(command, cwd=tmp_path, timeout_s=60)
    assert plain.tail == b""
    first = (await run_shell(command, cwd=tmp_path, timeout_s=60, contain=True)).tail.decode()
    owner, seq = first.split(":")
    assert owner == owner_id() and int(seq) >= 1
    # An orchestrator inside a contained child keeps the outer marker: the outer one still
    # ends what the inner one starts.
    nested = await run_shell(command, cwd=tmp_path, timeout_s=60, contain=True,
                             env={OWNER_ENV: "outer-1:7"})
    outer, inner = nested.tail.decode().split(",")
    assert outer == "outer-1:7"
    assert inner.startswith(owner_id() + ":") and inner != first


async def test_no_zombies_after_many_contained_calls(tmp_path: Path) -> None:
    before = zombie_children()
    # Each call leaves: an orphan that exits by itself (a foreign session), a setsid daemon
    # and a double-forked one (both killed by the sweep).
    command = ("(sleep 0.01 &); setsid sleep 120 & "
               "(setsid sh -c 'sleep 120 & exit' &); sleep 0.05")
    for _ in range(20):
        result = await run_shell(command, cwd=tmp_path, timeout_s=60, contain=True)
        assert result.exit_code == 0
    assert zombie_children() - before == set()
    assert not [pid for pid in _children() if _is_sleep_120(pid)]


def _children() -> list[int]:
    me = os.getpid()
    return [int(e) for e in os.listdir("/proc")
            if e.isdigit() and (stat_of(int(e)) or ("", 0))[1] == me]


def _is_sleep_120(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().startswith(b"sleep\0120")
    except OSError:
        return False


# -- the guard --------------------------------------------------------------------------------


async def test_guard_pipe_is_not_inherited(tmp_path: Path) -> None:
    rec = Recorder()
    pids: list[int] = []
    contained = asyncio.create_task(run_shell("echo ready; sleep 120", cwd=tmp_path,
                                              timeout_s=None, on_output=rec, contain=True,
                                              on_start=pids.append, grace_s=0.2))
    try:
        async with asyncio.timeout(60):
            await rec.ready.wait()
            while not pids:  # its output may come before run_process has its pid
                await asyncio.sleep(0.01)
        state = containment._Module.state
        assert state is not None and state.write_fd is not None and state.guard_pid
        pipe = f"pipe:[{os.fstat(state.write_fd).st_ino}]"
        assert _fd_targets(pids[0]).count(pipe) == 0
        uncontained = await run_shell("readlink /proc/$$/fd/*",
                                      cwd=tmp_path, timeout_s=60)
        assert pipe.encode() not in uncontained.tail
        # The guard holds the read end as its stdin, /dev/null as stdout and stderr, and
        # nothing else of ours (no pipe of our caller's that it would keep open).
        assert _fd_targets(state.guard_pid) == [pipe, "/dev/null", "/dev/null"]
    finally:
        contained.cancel()
        with pytest.raises(asyncio.CancelledError):
            await contained


async def test_a_killed_guard_is_replaced(tmp_path: Path,
                                         caplog: pytest.LogCaptureFixture) -> None:
    await run_process(["true"], cwd=tmp_path, timeout_s=60, contain=True)
    state = containment._Module.state
    assert state is not None and state.guard_pid is not None
    old = state.guard_pid
    os.kill(old, signal.SIGKILL)
    assert wait_until(lambda: not running(old), 5)
    with caplog.at_level(logging.WARNING, logger="ralph.proc"):
        await run_process(["true"], cwd=tmp_path, timeout_s=60, contain=True)
    assert f"the guard process {old} is gone" in caplog.text
    new = state.guard_pid
    assert new is not None and new != old and running(new)
    parent = stat_of(new)
    assert parent is not None and parent[1] != os.getpid()  # not our child, even now


def _fd_targets(pid: int) -> list[str]:
    fds = sorted(int(fd) for fd in os.listdir(f"/proc/{pid}/fd"))
    return [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in fds]


ORCHESTRATOR = """
import asyncio, json, sys
from pathlib import Path
from ralph import containment
from ralph.agents.server import AgentServer
from ralph.proc import run_process

CHILD = '''
import os, subprocess, sys, time
daemon = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                          start_new_session=True)
print("ready", os.getpid(), daemon.pid, flush=True)
time.sleep(120)
'''


def say(**fields):
    sys.stdout.write(json.dumps(fields) + "\\n")
    sys.stdout.flush()


async def main(mode, scratch):
    if mode == "exit":
        await run_process(["true"], cwd=scratch, timeout_s=60, contain=True)
        say(guard=containment._Module.state.guard_pid)
        return
    server = AgentServer("srv", [sys.executable, "-m", "http.server", "--bind", "127.0.0.1",
                                 "{port}"], cwd=scratch, env={}, port=0,
                         log_path=scratch / "server.log")
    await server.start()

    seen = b""

    def output(stream, data):
        nonlocal seen
        seen += data
        if seen.startswith(b"ready") and seen.endswith(b"\\n"):
            _, leader, daemon = seen.split()
            say(leader=int(leader), daemon=int(daemon), server=server.pgid,
                guard=containment._Module.state.guard_pid)

    await run_process([sys.executable, "-c", CHILD], cwd=scratch, timeout_s=120,
                      contain=True, on_output=output)


asyncio.run(main(sys.argv[1], Path(sys.argv[2])))
"""


def _start_orchestrator(tmp_path: Path, mode: str) -> subprocess.Popen[bytes]:
    script = tmp_path / "orchestrator.py"
    script.write_text(ORCHESTRATOR)
    return subprocess.Popen([sys.executable, str(script), mode, str(tmp_path)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            start_new_session=True)


def _read_json_line(proc: subprocess.Popen[bytes], timeout_s: float) -> dict[str, int]:
    assert proc.stdout is not None
    line = b""
    deadline = time.monotonic() + timeout_s
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        assert left > 0, f"no line from the orchestrator within {timeout_s} s: {line!r}"
        readable, _, _ = select.select([proc.stdout], [], [], left)
        if readable:
            chunk = os.read(proc.stdout.fileno(), 1)
            assert chunk, f"the orchestrator exited ({proc.poll()}) before saying: {line!r}"
            line += chunk
    return dict(json.loads(line))


def test_sigkilled_orchestrator_leaves_nothing_running(tmp_path: Path) -> None:
    orchestrator = _start_orchestrator(tmp_path, "kill")
    pids: dict[str, int] = {}
    try:
        pids = _read_json_line(orchestrator, 60)
        leader, daemon, server, guard = (pids["leader"], pids["daemon"], pids["server"],
                                         pids["guard"])
        assert all(running(pid) for pid in (leader, daemon, server, guard))
        os.kill(orchestrator.pid, signal.SIGKILL)
        orchestrator.wait(30)
        killed_at = time.monotonic()
        assert wait_until(lambda: not any(running(pid) for pid in pids.values())
                          and not group_members(leader) and not group_members(server), 5), (
            {name: stat_of(pid) for name, pid in pids.items()})
        assert time.monotonic() - killed_at < 5
    finally:
        if orchestrator.poll() is None:
            orchestrator.kill()
        orchestrator.wait(30)
        assert orchestrator.stdout is not None
        orchestrator.stdout.close()
        kill_and_reap(pids.values())


def test_guard_exits_when_the_orchestrator_exits(tmp_path: Path) -> None:
    orchestrator = _start_orchestrator(tmp_path, "exit")
    guard = 0
    try:
        # communicate() returns at EOF: the guard does not hold the orchestrator's stdout.
        out, _ = orchestrator.communicate(timeout=60)
        assert orchestrator.returncode == 0
        guard = json.loads(out)["guard"]
        assert wait_until(lambda: not running(guard), 5)
    finally:
        if orchestrator.poll() is None:
            orchestrator.kill()
            orchestrator.wait(30)
        kill_and_reap([guard] if guard else [])


def test_forked_child_forgets_the_parents_guard() -> None:
    asyncio.run(run_process(["true"], cwd=Path("/"), timeout_s=60, contain=True))
    state = containment._Module.state
    assert state is not None and state.write_fd is not None
    write_fd = state.write_fd
    pid = os.fork()
    if pid == 0:  # the child: the write end must be closed, the state fresh
        code = 0
        try:
            os.fstat(write_fd)
            code = 1
        except OSError:
            pass
        if containment._Module.state is not None:
            code = 2
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    os.fstat(write_fd)  # still open here


# -- kill_owned -------------------------------------------------------------------------------


def test_kill_owned_ends_what_a_dead_orchestrator_left() -> None:
    code = textwrap.dedent("""
        import subprocess, sys, time
        d = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                             start_new_session=True)
        print(d.pid, flush=True)
        time.sleep(120)
    """)

    def start(marker: str) -> tuple[subprocess.Popen[bytes], int]:
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                env={**os.environ, OWNER_ENV: marker},
                                start_new_session=True)
        assert proc.stdout is not None
        return proc, int(proc.stdout.readline())

    dead, dead_daemon = start("4242-deadbeef:3")
    other, other_daemon = start("4242-feedface:3")
    try:
        assert kill_owned("4242-deadbeef:4") == []  # another child's marker
        found = kill_owned("4242-deadbeef")
        assert sorted(found) == sorted([dead.pid, dead_daemon])
        assert dead.wait(5) == -signal.SIGKILL
        assert not running(dead_daemon)
        assert running(other.pid) and running(other_daemon)
        assert kill_owned("4242-feedface:3") == sorted([other.pid, other_daemon])
        assert other.wait(5) == -signal.SIGKILL
        with pytest.raises(ValueError):
            kill_owned("")
        with pytest.raises(ValueError):
            kill_owned("a,b")
    finally:
        for proc in (dead, other):
            proc.kill()
            proc.wait(5)
            assert proc.stdout is not None
            proc.stdout.close()
        kill_and_reap([dead_daemon, other_daemon])


# -- the agent server -------------------------------------------------------------------------


SERVER = """
import http.server, os, subprocess, sys
port = int(sys.argv[1])
daemon = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                          start_new_session=True)
open(sys.argv[2], "w").write(f"{daemon.pid} {os.environ.get('RALPH_OWNER', '')}")
http.server.HTTPServer(("127.0.0.1", port), http.server.SimpleHTTPRequestHandler
                       ).serve_forever()
"""


async def test_agent_server_is_contained(tmp_path: Path) -> None:
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    info = tmp_path / "server.info"
    server = AgentServer("srv", [sys.executable, str(script), "{port}", str(info)],
                         cwd=tmp_path, env={}, port=0, log_path=tmp_path / "server.log")
    daemon = 0
    try:
        await server.start()
        daemon_pid, marker = info.read_text().split()
        daemon = int(daemon_pid)
        assert marker.startswith(owner_id() + ":")
        assert running(daemon)
        pgid = server.pgid
        assert pgid is not None
        await server.stop()
        assert group_members(pgid) == []
        assert gone(daemon)
    finally:
        await server.stop()
        kill_and_reap([daemon] if daemon else [])

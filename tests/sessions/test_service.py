"""ralph.sessions: launch, read, wait for and stop agent sessions, from this process and
others, with command agents (plain text output)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ralph.agents import adapter_for
from ralph.agents.base import AgentError
from ralph.config import ConfigError, load_config
from ralph.containment import owner_id
from ralph.sessions import (
    AgentBusy,
    SessionError,
    SessionInfo,
    SessionService,
    UnknownSession,
    session_stream,
)
from ralph.store import Store
from tests.loop.conftest import kill_guard_of

AGENTS = {
    "echo": ["sh", "-c", "cat; echo; echo finished"],
    "fail": ["sh", "-c", "cat >/dev/null; echo broken >&2; exit 3"],
    # leaves a grandchild in its process group, then waits: stop must end both
    "sleeper": ["sh", "-c", "cat >/dev/null; sleep 300 & echo $! > child.pid; wait"],
    "slow": ["sh", "-c", "cat >/dev/null; sleep 300"],
    "missing": ["/nonexistent/agent-binary"],
    "ticker": ["sh", "-c", "cat >/dev/null; for i in 1 2 3; do echo tick $i; sleep 0.2; done"],
    # ends well when told to stop: a stop must still read as stopped
    "obliging": ["sh", "-c", "trap 'exit 0' TERM; cat >/dev/null; sleep 300 & wait"],
}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    project = tmp_path / "proj"
    (project / ".ralph").mkdir(parents=True)
    toml = "[loop]\ndefault_agent = \"echo\"\n\n" + "".join(
        f"[agents.{name}]\nargv = {json.dumps(argv)}\n\n" for name, argv in AGENTS.items())
    (project / "ralph.toml").write_text(toml + "[agents.slow2]\nargv = [\"sh\", \"-c\", "
                                        "\"cat >/dev/null; sleep 300\"]\ntimeout_seconds = 1\n")
    return project


def service(root: Path, store: Store) -> SessionService:
    return SessionService(root, load_config(root), store)


def test_a_session_runs_to_its_end_and_is_recorded(root: Path, store: Store) -> None:
    async def go() -> None:
        sessions = service(root, store)
        sid = await sessions.launch("hello agent", title="greeting")
        info = await sessions.wait(sid, 30)
        assert info.status == "completed" and info.exit_code == 0
        assert info.agent == "echo" and info.title == "greeting" and info.cwd == str(root)
        assert sessions.text(info.prompt_hash) == "hello agent"
        assert "finished" in sessions.text(info.final_text_hash)
        assert info.argv[:2] == ["sh", "-c"] and info.duration_s is not None
        topics = [f.topic for f in store.read(stream=session_stream(sid))]
        assert topics[0] == "session.started" and topics[-1] == "session.finished"
        assert {"agent.started", "agent.output", "agent.finished"} <= set(topics)
        assert Path(info.log_path).read_text().endswith("finished\n")
        assert sessions.get(sid) == info  # read again: the same

    asyncio.run(go())


def test_a_failing_agent_is_failed_with_its_exit_code(root: Path, store: Store) -> None:
    async def go() -> None:
        sessions = service(root, store)
        info = await sessions.wait(await sessions.launch("x", "fail"), 30)
        assert (info.status, info.exit_code) == ("failed", 3)
        assert info.message

    asyncio.run(go())


def test_an_agent_past_its_timeout_is_timed_out(root: Path, store: Store) -> None:
    async def go() -> None:
        sessions = service(root, store)
        info = await sessions.wait(await sessions.launch("x", "slow2"), 30)
        assert info.status == "timed_out"

    asyncio.run(go())


def test_bad_launches_are_refused_and_record_nothing(root: Path, store: Store) -> None:
    async def go() -> None:
        sessions = service(root, store)
        with pytest.raises(SessionError, match="prompt is empty"):
            await sessions.launch("  \n")
        with pytest.raises(ConfigError, match="unknown agent 'nobody'"):
            await sessions.launch("x", "nobody")
        with pytest.raises(AgentError, match="missing"):
            await sessions.launch("x", "missing")
        with pytest.raises(SessionError, match="not a directory"):
            await sessions.launch("x", cwd=root / "absent")
        assert sessions.list() == []
        with pytest.raises(UnknownSession, match="no agent session 'ses_nope'"):
            sessions.get("ses_nope")
        with pytest.raises(UnknownSession):
            sessions.get("../../etc")

    asyncio.run(go())


def test_one_running_session_per_agent_and_directory_unless_allowed(root: Path,
                                                                   store: Store) -> None:
    async def go() -> None:
        sessions = service(root, store)
        first = await sessions.launch("x", "slow")
        with pytest.raises(AgentBusy, match=f"already running in .*{first}"):
            await sessions.launch("y", "slow")
        second = await sessions.launch("y", "slow", allow_concurrent=True)
        other_dir = root / "sub"
        other_dir.mkdir()
        third = await sessions.launch("z", "slow", cwd=other_dir)
        assert {s.session_id for s in sessions.list(status="running")} == {first, second, third}
        await sessions.aclose()
        assert {s.status for s in sessions.list()} == {"stopped"}

    asyncio.run(go())


def test_stop_ends_the_whole_process_tree(root: Path, store: Store) -> None:
    async def go() -> None:
        sessions = service(root, store)
        sid = await sessions.launch("x", "sleeper")
        pid_file = root / "child.pid"
        for _ in range(200):
            if pid_file.exists() and pid_file.read_text().strip():
                break
            await asyncio.sleep(0.05)
        child = int(pid_file.read_text())
        info = await sessions.stop(sid, by="test")
        assert info.status == "stopped"
        assert not alive(child)
        assert (await sessions.stop(sid)).status == "stopped"  # stopping again: as it is
        stops = [f.meta["by"] for f in store.read(topic="session.stop_requested")]
        assert stops == ["test"]

    asyncio.run(go())


def test_list_is_newest_first_with_filters_and_a_limit(root: Path, store: Store) -> None:
    async def go() -> None:
        sessions = service(root, store)
        ids = []
        for agent in ("echo", "fail", "echo"):
            sid = await sessions.launch("x", agent)
            await sessions.wait(sid, 30)
            ids.append(sid)
        assert [s.session_id for s in sessions.list()] == ids[::-1]
        assert [s.session_id for s in sessions.list(agent="echo")] == [ids[2], ids[0]]
        assert [s.session_id for s in sessions.list(status="failed")] == [ids[1]]
        assert [s.session_id for s in sessions.list(limit=1)] == [ids[2]]

    asyncio.run(go())


OWNER = textwrap.dedent("""\
    import asyncio, sys
    from pathlib import Path
    from ralph.config import load_config
    from ralph.sessions import AgentBusy, SessionService
    from ralph.store import Store

    async def main():
        root = Path(sys.argv[1])
        with Store(root / ".ralph" / "store") as store:
            sessions = SessionService(root, load_config(root), store)
            try:
                sid = await sessions.launch("x", sys.argv[2])
            except AgentBusy:
                print("busy", flush=True)
                return
            print(sid, flush=True)
            info = await sessions.wait(sid)
            print(info.status, flush=True)

    asyncio.run(main())
""")


def owner_process(root: Path, agent: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-c", OWNER, str(root), agent],
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None
    sid = proc.stdout.readline().strip()
    assert sid.startswith("ses_"), sid
    return proc, sid


def test_a_session_of_another_process_is_seen_and_stopped(root: Path, store: Store) -> None:
    proc, sid = owner_process(root, "sleeper")
    try:
        async def go() -> None:
            sessions = service(root, store)
            assert sessions.get(sid).status == "running"
            with pytest.raises(AgentBusy):
                await sessions.launch("x", "sleeper")
            for _ in range(200):  # the agent has started when its group is recorded
                if list(store.read(topic="session.process", stream=session_stream(sid))):
                    break
                await asyncio.sleep(0.05)
            info = await sessions.stop(sid, by="another process")
            assert info.status == "stopped"

        asyncio.run(go())
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "stopped"
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_a_session_whose_owner_died_is_lost_and_its_tree_ended(root: Path,
                                                              store: Store) -> None:
    proc, sid = owner_process(root, "sleeper")
    pid_file = root / "child.pid"
    deadline = time.monotonic() + 30
    while not (pid_file.exists() and pid_file.read_text().strip()):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    child = int(pid_file.read_text())
    started = next(iter(store.read(topic="session.started", stream=session_stream(sid))))
    kill_guard_of(started.meta["owner"])  # the owner's guard would end the child: not here
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert alive(child)  # nobody has cleaned up yet
    try:
        sessions = service(root, store)
        info = sessions.get(sid)
        assert info.status == "lost" and f"pid {proc.pid}" in (info.message or "")
        assert sessions.get(sid).status == "lost"
        assert len(list(store.read(topic="session.finished",
                                   stream=session_stream(sid)))) == 1  # recorded once
        deadline = time.monotonic() + 10
        while alive(child):
            assert time.monotonic() < deadline, "the lost session's agent still runs"
            time.sleep(0.05)
    finally:
        if alive(child):
            os.kill(child, signal.SIGKILL)


def alive(pid: int) -> bool:
    """The process runs (a zombie does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def test_watch_replays_then_follows_live_once_each_and_ends(root: Path, store: Store) -> None:
    async def go() -> None:
        sessions = service(root, store)
        sid = await sessions.launch("x", "ticker")
        frames = [frame async for frame in sessions.watch(sid)]
        assert frames[0].topic == "session.started" and frames[-1].topic == "session.finished"
        seqs = [frame.seq for frame in frames]
        assert seqs == sorted(set(seqs))  # in order, none twice
        said = "".join(f.meta.get("content", "") for f in frames if f.topic == "agent.output")
        assert all(f"tick {n}" in said for n in (1, 2, 3))
        later = [frame async for frame in sessions.watch(sid, after_seq=frames[0].seq)]
        assert later == frames[1:]  # from a seq on, replayed from the store

    asyncio.run(go())


def test_watch_follows_a_session_of_another_process(root: Path, store: Store) -> None:
    proc, sid = owner_process(root, "ticker")
    try:
        async def go() -> list[str]:
            return [frame.topic async for frame in service(root, store).watch(sid)]

        topics = asyncio.run(go())
        assert topics[0] == "session.started" and topics[-1] == "session.finished"
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_watch_ends_when_the_owner_dies(root: Path, store: Store) -> None:
    proc, sid = owner_process(root, "sleeper")
    try:
        async def go() -> str:
            last = ""
            async for frame in service(root, store).watch(sid):
                if frame.topic == "session.process":
                    os.kill(proc.pid, signal.SIGKILL)
                last = frame.meta.get("status", "")
            return last

        assert asyncio.run(asyncio.wait_for(go(), 30)) == "lost"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        pid_file = root / "child.pid"
        if pid_file.exists() and pid_file.read_text().strip():
            child = int(pid_file.read_text())
            deadline = time.monotonic() + 10
            while alive(child):
                assert time.monotonic() < deadline, "the lost session's agent still runs"
                time.sleep(0.05)


def test_a_stop_asked_before_the_agent_runs_reaches_the_owner(root: Path, store: Store) -> None:
    proc, sid = owner_process(root, "slow")
    try:
        info = asyncio.run(service(root, store).stop(sid, by="early"))
        assert info.status == "stopped"
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_an_agent_that_exits_0_when_stopped_is_stopped(root: Path, store: Store) -> None:
    async def go() -> None:
        sessions = service(root, store)
        sid = await sessions.launch("x", "obliging")
        for _ in range(200):
            if list(store.read(topic="session.process", stream=session_stream(sid))):
                break
            await asyncio.sleep(0.05)
        assert (await sessions.stop(sid)).status == "stopped"

    asyncio.run(go())


def test_two_processes_launching_at_once_get_one_session(root: Path) -> None:
    procs = [subprocess.Popen([sys.executable, "-c", OWNER, str(root), "slow"],
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
             for _ in range(2)]
    try:
        firsts = sorted(proc.stdout.readline().strip() for proc in procs if proc.stdout)
        assert firsts[0] == "busy" and firsts[1].startswith("ses_"), firsts
        with Store(root / ".ralph" / "store") as store:
            assert asyncio.run(service(root, store).stop(firsts[1])).status == "stopped"
    finally:
        for proc in procs:
            if proc.poll() is None:
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()


def test_a_deleted_session_folder_does_not_make_a_live_session_lost(root: Path,
                                                                   store: Store) -> None:
    proc, sid = owner_process(root, "slow")
    try:
        shutil.rmtree(root / ".ralph" / "sessions" / sid)
        sessions = service(root, store)
        assert sessions.get(sid).status == "running"  # its owner lives
        assert asyncio.run(sessions.stop(sid)).status == "stopped"
        finished = list(store.read(topic="session.finished", stream=session_stream(sid)))
        assert [f.meta["status"] for f in finished] == ["stopped"]
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_a_session_of_this_process_is_never_taken_for_lost(root: Path, store: Store) -> None:
    store.append("session.started", {"session_id": "ses_mine", "agent": "echo",
                                      "cwd": str(root), "owner_pid": os.getpid(),
                                      "owner": owner_id()}, stream=session_stream("ses_mine"))
    # (as after its end could not be recorded: not running here, its lock free)
    assert service(root, store).get("ses_mine").status == "running"
    assert not list(store.read(topic="session.finished"))


def test_a_launch_that_cannot_be_recorded_leaves_nothing(root: Path, store: Store) -> None:
    async def go() -> None:
        sessions = service(root, store)
        with pytest.raises(SessionError, match="title is not valid text"):
            await sessions.launch("x", title="bad \udcff")
        assert not (root / ".ralph" / "sessions").exists() or not [
            p for p in (root / ".ralph" / "sessions").iterdir() if p.name != "busy"]
        assert (await sessions.wait(await sessions.launch("x"), 30)).status == "completed"

    asyncio.run(go())


def test_list_without_a_filter_reads_only_what_it_shows(root: Path, store: Store,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    async def go() -> list[str]:
        sessions = service(root, store)
        ids = []
        for _ in range(5):
            sid = await sessions.launch("x")
            await sessions.wait(sid, 30)
            ids.append(sid)
        return ids

    ids = asyncio.run(go())
    sessions = service(root, store)
    read: list[str] = []
    original = sessions.get

    def get(session_id: str) -> SessionInfo:
        read.append(session_id)
        return original(session_id)

    monkeypatch.setattr(sessions, "get", get)
    assert [s.session_id for s in sessions.list(limit=2)] == ids[:-3:-1]
    assert read == ids[:-3:-1]


def test_continue_argv_of_each_adapter() -> None:
    def cont(adapter: str, argv: list[str]) -> list[str]:
        return adapter_for(adapter).continue_argv(argv, "C1")

    assert cont("claude", ["claude", "-p", "--verbose"]) == [
        "claude", "-p", "--resume", "C1", "--verbose"]
    assert cont("codex", ["codex", "exec", "--json", "-"]) == [
        "codex", "exec", "--json", "resume", "C1", "-"]
    assert cont("codex", ["codex", "exec", "--json", "{prompt}"]) == [
        "codex", "exec", "--json", "resume", "C1", "{prompt}"]
    assert cont("gemini", ["gemini", "-p", "{prompt}"]) == [
        "gemini", "--resume", "C1", "-p", "{prompt}"]
    assert cont("opencode", ["opencode", "run", "--format", "json"]) == [
        "opencode", "run", "--session", "C1", "--format", "json"]
    with pytest.raises(AgentError, match="'command' cannot continue a conversation"):
        cont("command", ["sh", "-c", "cat"])


def test_a_running_session_cannot_be_continued(root: Path, store: Store) -> None:
    async def go() -> None:
        sessions = service(root, store)
        sid = await sessions.launch("x", "slow")
        with pytest.raises(SessionError, match="still running"):
            await sessions.launch("y", continue_from=sid, allow_concurrent=True)
        await sessions.aclose()

    asyncio.run(go())


def test_watch_from_past_the_end_of_an_ended_session_returns_at_once(root: Path,
                                                                     store: Store) -> None:
    async def go() -> None:
        sessions = service(root, store)
        sid = await sessions.launch("x")
        frames = [frame async for frame in sessions.watch(sid)]
        after = [f async for f in sessions.watch(sid, after_seq=frames[-1].seq)]
        assert after == []

    asyncio.run(asyncio.wait_for(go(), 30))


def test_a_reused_pid_does_not_keep_a_dead_owners_session_running(root: Path,
                                                                  store: Store) -> None:
    """The owner's lock file is there and nobody holds it: the owner died, whatever process
    has its pid now (here: this very test process)."""
    folder = root / ".ralph" / "sessions" / "ses_reused"
    folder.mkdir(parents=True)
    (folder / "owner.lock").write_text("1\n")
    store.append("session.started", {"session_id": "ses_reused", "agent": "echo",
                                     "title": None, "cwd": str(root), "argv": [],
                                     "continue_from": None, "approvals": "auto",
                                     "owner_pid": os.getpid(), "owner": "someone-else",
                                     "log_path": ""}, stream=session_stream("ses_reused"))
    info = service(root, store).get("ses_reused")
    assert info.status == "lost"
    assert info.message == f"the process running it (pid {os.getpid()}) died"

"""Sessions beyond one server: read by a later server from the run's files, stopped from
another server, recorded failed (once, their processes ended) when their server died; and
sessions that run a Ralph agent through its adapter (extension)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ralph.company.files import read_yaml, write_yaml
from ralph.company.session_state import LOCK_FILE, SessionState, now_ms, read_state, write_state
from ralph.proc import process_runs
from tests.company.test_sessions import Sessions, Workspace, events, of_type, started

FAKE_CLAUDE = Path(__file__).parents[1] / "sessions" / "fake_claude.py"


@pytest.fixture
def two(workspace: Workspace) -> Iterator[tuple[Sessions, Sessions]]:
    first, second = Sessions(*workspace), Sessions(*workspace)
    yield first, second
    first.shut()
    second.shut()


def test_a_later_server_reads_an_ended_session_from_its_files(
        two: tuple[Sessions, Sessions]) -> None:
    first, second = two
    run = first.new_run()
    ref = first.launch(run, argv=["sh", "-c", "echo hi"], session_ref="kept")
    done = first.call("session.collect", {"session_ref": ref})
    with pytest.raises(Exception, match="Unknown session_ref: kept"):
        second.call("session.poll", {"session_ref": ref})  # it knows no workspace yet
    polled = second.call("session.poll", {"session_ref": ref, "workspace_dir": second.ws})
    assert polled == {k: done[k] for k in polled}
    assert second.call("session.collect", {"session_ref": ref}) == done
    [row] = second.call("session.list", {"status": "ended"})
    assert (row["session_ref"], row["workspace_dir"]) == (ref, first.ws)
    assert second.call("session.list", {"status": "running"}) == []
    assert second.plane.session_rows(second.ws) == [row]


def test_a_running_session_of_another_server_is_read_and_stopped(
        two: tuple[Sessions, Sessions]) -> None:
    first, second = two
    run = first.new_run()
    ref = first.launch(run, argv=["sleep", "30"])
    first.until(lambda: started(run))
    polled = second.call("session.poll", {"session_ref": ref, "workspace_dir": second.ws})
    assert polled["status"] == "running"  # its owner holds the lock: not lost
    assert second.call("session.stop", {"session_ref": ref})["status"] == "running"
    done = first.call("session.collect", {"session_ref": ref})
    assert (done["status"], done["signal"]) == ("stopped", "SIGTERM")
    assert second.call("session.poll", {"session_ref": ref})["status"] == "stopped"
    assert of_type(run, "run.stopped")[0]["payload"]["stopped"] is True


def test_a_session_whose_server_died_is_failed_once_and_its_processes_ended(
        sessions: Sessions) -> None:
    run = sessions.new_run()
    dead = subprocess.Popen(["true"])
    dead.wait()
    owner = "deadowner-0123abcd"
    left = subprocess.Popen(["sleep", "30"], start_new_session=True,
                            env={**os.environ, "RALPH_OWNER": f"{owner}:1"})
    try:
        (run / LOCK_FILE).write_text(f"{dead.pid}\n")  # there, and held by nobody
        write_state(run, SessionState(
            session_ref="orphan", workspace_dir=sessions.ws, project_id=sessions.ids["proj"],
            run_id=run.name, started_at_ms=now_ms(), argv=["sleep", "30"], pid=left.pid,
            marker=f"{owner}:1", owner=owner, owner_pid=dead.pid))
        fresh = Sessions(sessions.root, sessions.ids)
        try:
            polled = fresh.call("session.poll", {"session_ref": "orphan",
                                                 "workspace_dir": fresh.ws})
            assert polled["status"] == "failed"
            assert polled["error"] == f"the server that ran it ended (pid {dead.pid})"
            assert left.wait(timeout=10) == -9  # ended by its marker
            assert fresh.call("session.poll", {"session_ref": "orphan"}) == polled
            assert fresh.call("session.list", {})[0]["status"] == "failed"
        finally:
            fresh.shut()
        assert read_yaml(run / "run.yaml")["status"] == "failed"
        assert [e["type"] for e in events(run)].count("run.failed") == 1
        with pytest.raises(Exception, match="Run is not in running status"):
            sessions.launch(run, argv=["true"])
    finally:
        left.kill()
        left.wait()


def test_an_agent_session_adds_the_adapters_events(sessions: Sessions, tmp_path: Path) -> None:
    program = tmp_path / "claude-bin"
    program.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_CLAUDE}" "$@"\n')
    program.chmod(0o755)
    write_yaml(sessions.root / ".local/machine.yaml", {
        "schema_version": 1, "type": "machine", "repo_roots": {},
        "provider_bins": {"claude": str(program)}})
    run = sessions.new_run()
    ref = sessions.launch(run, agent="claude", prompt_text="say hello")
    done = sessions.call("session.collect", {"session_ref": ref})
    assert (done["status"], done["exit_code"]) == ("ended", 0)
    kinds = [e["type"] for e in events(run)]
    assert kinds.index("agent.started") < kinds.index("agent.output") < kinds.index(
        "agent.finished") < kinds.index("run.ended")
    assert "provider.raw" in kinds
    started_event = of_type(run, "agent.started")[0]["payload"]
    assert started_event["agent"] == "claude" and started_event["argv"][0] == str(program)
    finished = of_type(run, "agent.finished")[0]["payload"]
    assert (finished["status"], finished["session_id"]) == ("ok", "fake-claude-1")
    texts = [e["payload"]["content"] for e in of_type(run, "agent.output")
             if e["payload"]["kind"] == "text"]
    assert "nothing to do" in texts
    assert (run / "outputs/stdin.txt").read_text() == "say hello"
    assert (run / "prompt.md").read_text() == "say hello"
    assert read_yaml(run / "run.yaml")["spec"]["argv"][0] == str(program)


def test_a_command_agent_and_agents_that_cannot_run(sessions: Sessions) -> None:
    run = sessions.new_run()
    ref = sessions.launch(run, agent="command", argv=["sh", "-c", "cat; echo; exit 4"],
                          prompt_text="the prompt")
    done = sessions.call("session.collect", {"session_ref": ref})
    assert (done["status"], done["exit_code"]) == ("failed", 4)
    assert (run / "outputs/stdout.txt").read_text() == "the prompt\n"
    assert of_type(run, "agent.finished")[0]["payload"]["status"] == "error"
    other = sessions.new_run()
    with pytest.raises(Exception, match="unknown agent 'nobody'"):
        sessions.launch(other, agent="nobody", prompt_text="x")
    with pytest.raises(Exception, match="needs argv"):
        sessions.launch(other, agent="command", prompt_text="x")
    with pytest.raises(Exception, match="Invalid params"):
        sessions.launch(other, agent="command", argv=["cat"])  # no prompt_text
    assert read_state(other) is None and not started(other)
    assert not process_runs(read_state(run).pid or 0)  # type: ignore[union-attr]


@pytest.fixture
def sessions(workspace: Workspace) -> Iterator[Sessions]:
    made = Sessions(*workspace)
    yield made
    made.shut()

"""`session.launch` / `poll` / `collect` / `stop` / `list` with commands: result shapes, the
run's files and events, exit codes and signals, checks before the answer, repositories and
worktrees, and a collect that waits while other requests are answered."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from ralph.company.files import read_yaml, write_yaml
from ralph.company.session_output import Tee
from ralph.company.session_state import read_state
from ralph.company.workspace import validate_workspace
from ralph.proc import process_runs
from tests.company.conftest import Client, RpcFailure

Workspace = tuple[Path, dict[str, str]]


class Sessions(Client):
    """A client whose plane is closed at the end (its sessions stopped), with helpers."""

    def __init__(self, root: Path, ids: dict[str, str]) -> None:
        super().__init__()
        self.root, self.ids, self.ws = root, ids, str(root)

    def new_run(self) -> Path:
        made = self.call("run.create", {"workspace_dir": self.ws, "project_id": self.ids["proj"],
                                        "agent_id": self.ids["agent"], "provider": "codex"})
        return Path(made["run_dir"])

    def launch(self, run: Path, **params: Any) -> str:
        ref: str = self.call("session.launch", {
            "workspace_dir": self.ws, "project_id": self.ids["proj"], "run_id": run.name,
            **params})["session_ref"]
        return ref

    def until(self, check: Any) -> None:
        """Run the event loop until `check()` holds (at most 10 s)."""
        for _ in range(1000):
            if check():
                return
            self.loop.run_until_complete(asyncio.sleep(0.01))
        raise AssertionError("never happened")

    def shut(self) -> None:
        self.loop.run_until_complete(self.plane.close())
        self.close()


@pytest.fixture
def sessions(workspace: Workspace) -> Iterator[Sessions]:
    made = Sessions(*workspace)
    yield made
    made.shut()


def events(run: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (run / "events.jsonl").read_bytes().splitlines()]


def of_type(run: Path, kind: str) -> list[dict[str, Any]]:
    return [e for e in events(run) if e["type"] == kind]


def raw_text(run: Path, stream: str) -> str:
    return "".join(e["payload"]["chunk"] for e in of_type(run, "provider.raw")
                   if e["payload"]["stream"] == stream)


def started(run: Path) -> bool:
    state = read_state(run)
    return state is not None and state.pid is not None


def gone(run: Path) -> bool:
    state = read_state(run)
    return state is not None and state.pid is not None and not process_runs(state.pid)


def test_a_command_runs_with_its_outputs_events_and_run_yaml(sessions: Sessions) -> None:
    run = sessions.new_run()
    ref = sessions.launch(run, argv=["sh", "-c", "printf 'out\\n'; printf 'err' >&2"])
    assert ref == f"local_{run.name}"
    polled = sessions.call("session.poll", {"session_ref": ref})
    assert polled == {"session_ref": ref, "project_id": sessions.ids["proj"],
                      "run_id": run.name, "status": "running", "exit_code": None,
                      "signal": None}
    done = sessions.call("session.collect", {"session_ref": ref})
    outputs = [f"runs/{run.name}/outputs/{n}" for n in ("stderr.txt", "stdout.txt")]
    assert done == {**polled, "status": "ended", "exit_code": 0,
                    "events_relpath": f"runs/{run.name}/events.jsonl",
                    "output_relpaths": outputs}
    assert (run / "outputs/stdout.txt").read_text() == "out\n"
    assert (run / "outputs/stderr.txt").read_text() == "err"
    assert raw_text(run, "stdout") == "out\n" and raw_text(run, "stderr") == "err"
    raw = of_type(run, "provider.raw")[0]
    assert raw["actor"] == sessions.ids["agent"] and raw["visibility"] == "team"
    assert [e["type"] for e in events(run)][:2] == ["run.started", "run.executing"]
    assert events(run)[-1]["type"] == "run.ended"
    assert events(run)[-1]["payload"] == {"exit_code": 0, "signal": None, "stopped": False}
    assert of_type(run, "run.executing")[0]["payload"] == {
        "argv": ["sh", "-c", "printf 'out\\n'; printf 'err' >&2"], "task_id": None,
        "milestone_id": None, "worktree_relpath": None, "worktree_branch": None,
        "stdin_relpath": None}
    doc = read_yaml(run / "run.yaml")
    assert doc["status"] == "ended"
    assert doc["spec"] == {"kind": "command",
                           "argv": ["sh", "-c", "printf 'out\\n'; printf 'err' >&2"]}
    [row] = sessions.call("session.list", {"workspace_dir": sessions.ws})
    assert row == {**polled, "status": "ended", "exit_code": 0,
                   "workspace_dir": sessions.ws, "started_at_ms": row["started_at_ms"],
                   "ended_at_ms": row["ended_at_ms"]}
    assert row["ended_at_ms"] >= row["started_at_ms"]
    assert sessions.plane.session_rows(sessions.ws) == [row]
    assert validate_workspace(sessions.root) == []  # session.json and its lock break nothing
    assert gone(run)


def test_stdin_env_and_a_failing_exit_code(sessions: Sessions) -> None:
    run = sessions.new_run()
    ref = sessions.launch(run, argv=["sh", "-c", 'cat; printf "$SECRET"; exit 3'],
                          stdin_text="fed ", env={"SECRET": "s3cr3t"}, session_ref="mine")
    assert ref == "mine"
    done = sessions.call("session.collect", {"session_ref": "mine"})
    assert (done["status"], done["exit_code"], done["signal"]) == ("failed", 3, None)
    assert f"runs/{run.name}/outputs/stdin.txt" in done["output_relpaths"]
    assert (run / "outputs/stdout.txt").read_text() == "fed s3cr3t"
    assert (run / "outputs/stdin.txt").read_text() == "fed "
    spec = read_yaml(run / "run.yaml")["spec"]
    assert spec["env"] == {"SECRET": "[redacted]"}  # the value is never written
    assert spec["stdin_relpath"] == f"runs/{run.name}/outputs/stdin.txt"
    assert "s3cr3t" not in (run / "run.yaml").read_text()
    assert read_yaml(run / "run.yaml")["status"] == "failed"
    assert events(run)[-1]["type"] == "run.failed"
    # The session's own ref on every event it wrote (the original always wrote
    # local_<run_id>, whatever ref the launch was given); run.started came before it.
    assert {e["session_ref"] for e in events(run)[1:]} == {"mine"}
    assert events(run)[0]["session_ref"] == f"local_{run.name}"


def test_a_character_split_across_reads_arrives_whole(sessions: Sessions) -> None:
    run = sessions.new_run()
    script = ("import os, time\n"
              "for part in (b'caf\\xc3', b'\\xa9 \\xe2\\x82', b'\\xac!', b'\\xff'):\n"
              "    os.write(1, part); time.sleep(0.02)\n")
    ref = sessions.launch(run, argv=[sys.executable, "-c", script])
    sessions.call("session.collect", {"session_ref": ref})
    assert raw_text(run, "stdout") == "café €!\ufffd"
    chunks = [e["payload"]["chunk"] for e in of_type(run, "provider.raw")]
    assert all("\ufffd" not in c for c in chunks[:-1])
    assert (run / "outputs/stdout.txt").read_bytes() == "café €!".encode() + b"\xff"


def test_the_tee_decodes_each_stream_incrementally(tmp_path: Path) -> None:
    run = tmp_path / "run_x"
    run.mkdir()
    lines: list[tuple[str, str, int]] = []
    tee = Tee(run, "run_x", "agent_x", "local_run_x",
              lambda s, line, at: lines.append((s, line, at)))
    for stream, data in (("stdout", b"\xc3"), ("stderr", b"\xe2\x82"), ("stdout", b"\xa9\n2"),
                         ("stderr", b"\xac"), ("stdout", b"\xf0\x9f")):
        tee.feed(stream, data)
    tee.close()
    chunks = [(e["payload"]["stream"], e["payload"]["chunk"]) for e in of_type(run, "provider.raw")]
    assert chunks == [("stdout", "é\n2"), ("stderr", "€"), ("stdout", "\ufffd")]
    assert lines == [("stdout", "é", 0), ("stdout", "2\ufffd", 3), ("stderr", "€", 0)]


def test_stop_ends_the_command_with_sigterm(sessions: Sessions) -> None:
    run = sessions.new_run()
    ref = sessions.launch(run, argv=["sleep", "30"])
    sessions.until(lambda: started(run))
    stopped = sessions.call("session.stop", {"session_ref": ref})
    assert stopped["status"] == "running"  # answered at once
    done = sessions.call("session.collect", {"session_ref": ref})
    assert (done["status"], done["exit_code"], done["signal"]) == ("stopped", None, "SIGTERM")
    assert events(run)[-1]["type"] == "run.stopped"
    assert events(run)[-1]["payload"] == {"exit_code": None, "signal": "SIGTERM",
                                          "stopped": True}
    assert read_yaml(run / "run.yaml")["status"] == "stopped"
    assert gone(run)
    # a finished session's stop changes nothing
    assert sessions.call("session.stop", {"session_ref": ref})["status"] == "stopped"


def test_a_command_that_ignores_sigterm_is_killed(sessions: Sessions) -> None:
    run = sessions.new_run()
    script = ("import signal, sys, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
              "print('ready', flush=True)\ntime.sleep(30)\n")
    ref = sessions.launch(run, argv=[sys.executable, "-c", script])
    out = run / "outputs/stdout.txt"
    sessions.until(lambda: out.is_file() and out.read_text() == "ready\n")
    sessions.call("session.stop", {"session_ref": ref})
    done = sessions.call("session.collect", {"session_ref": ref})
    assert (done["status"], done["signal"]) == ("stopped", "SIGKILL")
    assert gone(run)


def test_a_program_that_is_not_there_fails_the_session_and_the_run(sessions: Sessions) -> None:
    run = sessions.new_run()
    ref = sessions.launch(run, argv=["/nonexistent/program"])
    done = sessions.call("session.collect", {"session_ref": ref})
    assert done["status"] == "failed" and done["exit_code"] is None
    assert "/nonexistent/program" in done["error"]
    assert read_yaml(run / "run.yaml")["status"] == "failed"
    last = events(run)[-1]
    assert last["type"] == "run.failed"
    assert last["payload"]["exit_code"] is None and last["payload"]["error"] == done["error"]


def test_launches_are_checked_before_the_answer(sessions: Sessions) -> None:
    run = sessions.new_run()
    ids = sessions.ids

    def refused(**params: Any) -> RpcFailure:
        with pytest.raises(RpcFailure) as caught:
            sessions.call("session.launch", {"workspace_dir": sessions.ws,
                                             "project_id": ids["proj"], "run_id": run.name,
                                             "argv": ["true"], **params})
        return caught.value

    assert refused(project_id="proj_nope").error["message"] == "Unknown project: proj_nope"
    assert refused(run_id="run_nope").data["run_id"] == "run_nope"
    ended = refused(run_id=ids["run"])  # the fixture's run has ended
    assert ended.error["message"] == "Run is not in running status (status=ended)"
    assert ended.code == -32000 and ended.data["status"] == "ended"
    assert refused(repo_id="nope").error["message"].startswith('Unknown repo_id "nope"')
    write_yaml(sessions.root / ".local/machine.yaml", {
        "schema_version": 1, "type": "machine", "repo_roots": {"r": str(sessions.root)},
        "provider_bins": {}})
    assert "workdir_rel" in refused(repo_id="r", workdir_rel="../etc").error["message"]
    assert refused(repo_id="r", workdir_rel="missing").data["cwd"].endswith("missing")
    assert refused(argv=None).code == -32602
    assert refused(argv=[]).code == -32602
    assert not (run / "session.json").exists()
    assert read_yaml(run / "run.yaml")["status"] == "running"
    ref = sessions.launch(run, argv=["sleep", "30"])
    again = refused()
    assert again.error["message"] == f"Session already running: {ref}"
    other = sessions.new_run()
    with pytest.raises(RpcFailure, match=f"Session already running: {ref}"):
        sessions.launch(other, argv=["true"], session_ref=ref)
    sessions.call("session.stop", {"session_ref": ref})
    assert sessions.call("session.collect", {"session_ref": ref})["status"] == "stopped"


def test_unknown_refs(sessions: Sessions) -> None:
    for method in ("session.poll", "session.collect", "session.stop"):
        with pytest.raises(RpcFailure) as caught:
            sessions.call(method, {"session_ref": "nope"})
        assert (caught.value.code, caught.value.error["message"]) == (
            -32000, "Unknown session_ref: nope")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          cwd=repo, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(sessions: Sessions, tmp_path: Path) -> Path:
    made = tmp_path / "repo"
    (made / "sub").mkdir(parents=True)
    (made / "sub/a.txt").write_text("one\n")
    git(made, "init", "-q")
    git(made, "add", ".")
    git(made, "commit", "-qm", "first")
    write_yaml(sessions.root / ".local/machine.yaml", {
        "schema_version": 1, "type": "machine", "repo_roots": {"app": str(made)},
        "provider_bins": {}})
    return made


def test_a_repo_session_runs_there_and_snapshots_the_dirty_tree(
        sessions: Sessions, repo: Path) -> None:
    (repo / "sub/a.txt").write_text("two\n")
    run = sessions.new_run()
    ref = sessions.launch(run, argv=["pwd"], repo_id="app", workdir_rel="sub")
    assert sessions.call("session.collect", {"session_ref": ref})["status"] == "ended"
    assert (run / "outputs/stdout.txt").read_text().strip() == str(repo / "sub")
    [produced] = of_type(run, "artifact.produced")
    patch = sessions.root / produced["payload"]["relpath"]
    assert "-one\n+two" in patch.read_text()
    assert produced["payload"]["kind"] == "repo_dirty_patch"
    ctx = read_yaml(run / "run.yaml")["context_pack_id"]
    manifest = read_yaml(run.parent.parent / "context_packs" / ctx / "manifest.yaml")
    assert manifest["repo_snapshot"] == {
        "repo_id": "app", "head_sha": git(repo, "rev-parse", "HEAD").strip(), "dirty": True,
        "dirty_patch_artifact_id": produced["payload"]["artifact_id"]}
    [written] = of_type(run, "context_pack.snapshot_written")
    assert written["payload"]["dirty"] is True
    executing = of_type(run, "run.executing")[0]["payload"]
    assert executing["repo_id"] == "app" and executing["workdir_rel"] == "sub"
    assert validate_workspace(sessions.root) == []


def test_a_coding_milestone_gets_its_own_worktree(sessions: Sessions, repo: Path) -> None:
    run, ids = sessions.new_run(), sessions.ids
    ref = sessions.launch(run, argv=["pwd"], repo_id="app", task_id=ids["task"],
                          milestone_id=ids["ms"])
    assert sessions.call("session.collect", {"session_ref": ref})["status"] == "ended"
    rel = f".local/worktrees/{ids['proj']}/{ids['task']}/{run.name}"
    branch = f"ac/{ids['proj']}/{ids['task']}/{run.name}"
    assert (run / "outputs/stdout.txt").read_text().strip() == str(sessions.root / rel)
    assert branch in git(repo, "branch", "--list", branch)
    spec = read_yaml(run / "run.yaml")["spec"]
    assert (spec["worktree_relpath"], spec["worktree_branch"]) == (rel, branch)
    [prepared] = of_type(run, "worktree.prepared")
    assert prepared["payload"] == {"repo_id": "app", "task_id": ids["task"],
                                   "milestone_id": ids["ms"], "worktree_relpath": rel,
                                   "branch": branch}
    with pytest.raises(RpcFailure, match="Milestone not found"):
        sessions.launch(sessions.new_run(), argv=["pwd"], repo_id="app", task_id=ids["task"],
                        milestone_id="ms_nope")


def test_collect_waits_while_other_requests_are_answered(sessions: Sessions) -> None:
    run = sessions.new_run()
    ref = sessions.launch(run, argv=["sleep", "30"])
    sessions.until(lambda: started(run))

    async def ask(method: str, params: dict[str, Any]) -> dict[str, Any]:
        raw = await sessions.dispatcher.handle(orjson.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        assert raw is not None
        answer: dict[str, Any] = orjson.loads(raw)["result"]
        return answer

    async def scenario() -> tuple[dict[str, Any], bool, dict[str, Any], dict[str, Any]]:
        collect = asyncio.ensure_future(ask("session.collect", {"session_ref": ref}))
        polled = await ask("session.poll", {"session_ref": ref})
        listed = await ask("run.list", {"workspace_dir": sessions.ws})
        monitor = await ask("monitor.snapshot", {"workspace_dir": sessions.ws})
        waiting = not collect.done() and len(listed) == 2
        await ask("session.stop", {"session_ref": ref})
        return polled, waiting, monitor, await collect

    polled, waiting, monitor, collected = sessions.loop.run_until_complete(scenario())
    assert polled["status"] == "running" and waiting
    live = {row["run_id"]: row.get("live_status") for row in monitor["rows"]}
    assert live[run.name] == "running"  # the monitor answered, the session still running
    assert (collected["status"], collected["signal"]) == ("stopped", "SIGTERM")
    assert gone(run)


def test_closing_the_server_stops_its_sessions(workspace: Workspace) -> None:
    client = Sessions(*workspace)
    run = client.new_run()
    ref = client.launch(run, argv=["sleep", "30"])
    client.until(lambda: started(run))
    client.shut()
    state = read_state(run)
    assert state is not None and state.session_ref == ref
    assert (state.status, state.signal, state.error) == ("stopped", "SIGTERM",
                                                         "server stopped")
    assert read_yaml(run / "run.yaml")["status"] == "stopped"
    assert not process_runs(state.pid or 0)

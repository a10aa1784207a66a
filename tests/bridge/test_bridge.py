"""`ralph bridge` against ../shared/seeds/vscode-bridge-protocol.md, field by field, with the
fake agent: every method, result field and event; concurrency; pause, resume, stop, EOF."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.bridge.client import BridgeProcess
from tests.loop.conftest import Project
from tests.proc.helpers import group_members
from tests.rpc.test_openrpc import _validator

TICK = {"tick": True, "print": ["done"]}
STEP_FIELDS = {"iteration", "agent", "task_id", "exit_signal", "return_code", "log_path",
               "progress_made", "no_progress_streak", "gates_ok", "repo_clean", "judge_ok",
               "review_ok", "blocked", "attempt_id", "receipts_dir", "context_dir", "task_title"}
# The documented fields, and our extensions (docs/protocols/bridge.md marks them).
STATUS_FIELDS = {"version", "cwd", "prd", "progress", "agents", "prompt", "done", "total",
                 "next", "running", "paused", "activeRunId", "last"} | {
                     "blocked", "cost", "prd_error"}
FINISHED_FIELDS = {"type", "ts", "runId", "iteration", "agent", "task_id", "exitSignal",
                   "returnCode", "repoClean", "gatesOk", "judgeOk", "reviewOk", "blocked",
                   "attemptId", "receiptsDir", "contextDir", "durationSeconds", "logPath"} | {
                       "tokensIn", "tokensOut", "costUsd"}
TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def agent_pgid(project: Project, iteration: int) -> int:
    log = project.root / ".ralph" / "logs" / f"{iteration:06d}.log"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if log.exists() and (match := re.search(r"child-pid (\d+)", log.read_text())):
            return int(match.group(1))
        time.sleep(0.05)
    raise AssertionError("the agent never started")


def test_ping_and_status(project: Project) -> None:
    with BridgeProcess(project.root) as bridge:
        started = bridge.wait_event("bridge_started")
        assert TS.match(started["ts"])
        ping = bridge.call("ping")
        assert set(ping) == {"ok", "version", "cwd", "time"}
        assert ping["ok"] is True and ping["cwd"] == str(project.root) and TS.match(ping["time"])
        status = bridge.call("status", {})
        assert set(status) == STATUS_FIELDS
        assert (status["done"], status["total"], status["running"], status["paused"]) == (
            0, 3, False, False)
        assert status["next"] == {"task_id": "1", "title": "First task", "kind": "build"}
        assert status["activeRunId"] is None and status["last"] is None
        assert (status["prd"], status["prompt"]) == ("PRD.md", "PROMPT_build.md")
        assert bridge.close_stdin() == 0
    assert bridge.events[-1]["type"] == "bridge_stopped"
    assert all(json.loads(line) for line in bridge.raw)  # nothing but JSON on stdout


def test_step_returns_every_documented_field(project: Project) -> None:
    project.plan({"tasks": {"1": [{**TICK, "exit_signal": True}]}})
    project.config(gates=["true"])
    with BridgeProcess(project.root) as bridge:
        result = bridge.call("step", {"agent": "fake"})
        assert set(result) == STEP_FIELDS
        assert result["task_id"] == "1" and result["task_title"] == "First task"
        assert result["exit_signal"] is True and result["return_code"] == 0
        assert result["gates_ok"] is True and result["repo_clean"] is True
        assert result["judge_ok"] is None and result["review_ok"] is None
        assert result["blocked"] is False and result["progress_made"] is True
        assert result["attempt_id"] == "1-1" and result["log_path"] == ".ralph/logs/000001.log"
        started = bridge.wait_event("iteration_started")
        assert set(started) == {"type", "ts", "runId", "iteration", "agent", "task_id",
                                "title"}
        finished = bridge.wait_event("iteration_finished")
        assert set(finished) == FINISHED_FIELDS
        assert finished["gatesOk"] is True and finished["exitSignal"] is True
        assert finished["runId"] == started["runId"]
        status = bridge.call("status")
        last = status["last"]
        assert {"iteration_id", "task_id", "status", "exit_code", "started_at",
                "finished_at"} <= set(last)
        assert (last["task_id"], last["status"], last["exit_code"]) == ("1", "done", 0)
        assert status["done"] == 1
    types = [e["type"] for e in bridge.events]
    # a step reports its iteration, not a run
    assert "run_started" not in types and "run_stopped" not in types


def test_step_default_agent_is_loop_default_agent(project: Project) -> None:
    project.plan({"tasks": {"1": [TICK]}})
    with BridgeProcess(project.root) as bridge:
        assert bridge.call("step")["agent"] == "fake"  # ralph.toml names `fake`
    (project.root / "ralph.toml").write_text("")
    with BridgeProcess(project.root, env={"PATH": "/usr/bin:/bin"}) as bridge:
        error = bridge.error("step")
        assert error["code"] == -32000 and "codex" in error["message"]  # the documented default


def test_run_events_and_completion(project: Project) -> None:
    project.plan({"tasks": {"1": [TICK], "2": [TICK], "3": [TICK]}})
    with BridgeProcess(project.root) as bridge:
        result = bridge.call("run", {"maxIterations": 5})
        assert set(result) == {"runId"}
        run_id = result["runId"]
        started = bridge.wait_event("run_started")
        assert started == {"type": "run_started", "ts": started["ts"], "runId": run_id,
                           "agent": "fake", "maxIterations": 5, "startIteration": 1}
        stopped = bridge.wait_event("run_stopped")
        assert stopped["runId"] == run_id and stopped["reason"] == "complete"
        finished = [e for e in bridge.events if e["type"] == "iteration_finished"]
        assert [e["task_id"] for e in finished] == ["1", "2", "3"]
        assert all(e["runId"] == run_id for e in finished)
        status = bridge.call("status")
        assert (status["done"], status["running"], status["activeRunId"]) == (3, False, None)


def test_one_run_at_a_time(project: Project) -> None:
    project.plan({"tasks": {"1": [{"spawn": 60, "sleep": 60}]}})
    with BridgeProcess(project.root) as bridge:
        run_id = bridge.call("run")["runId"]
        second = bridge.error("run")
        assert second["code"] == -32000 and second["data"]["activeRunId"] == run_id
        step = bridge.error("step")
        assert step["code"] == -32000 and step["data"]["activeRunId"] == run_id
        status = bridge.call("status")
        assert status["running"] is True and status["activeRunId"] == run_id
        assert bridge.call("stop") == {"ok": True, "stopped": True}
        assert bridge.wait_event("run_stopped")["reason"] == "stopped"
        assert bridge.call("stop") == {"ok": True, "stopped": False}


def test_requests_sent_together_are_served_in_order(project: Project) -> None:
    """`run` then `step` in one write: the run, asked for first, gets the loop (its checks
    do not let the step slip in); a stop asked for before the run's first iteration holds."""
    project.plan({"tasks": {"1": [{"spawn": 60, "sleep": 60}]}})
    with BridgeProcess(project.root) as bridge:
        bridge.send_raw(b'{"jsonrpc":"2.0","id":"r","method":"run"}\n'
                        b'{"jsonrpc":"2.0","id":"s","method":"step"}\n'
                        b'{"jsonrpc":"2.0","id":"x","method":"stop"}\n')
        run_id = bridge.response("r")["result"]["runId"]
        step = bridge.response("s")["error"]
        assert step["code"] == -32000 and step["data"]["activeRunId"] == run_id
        assert bridge.response("x")["result"] == {"ok": True, "stopped": True}
        stopped = bridge.wait_event("run_stopped")
        assert stopped["runId"] == run_id and stopped["reason"] == "stopped"
    assert "iteration_started" not in [e["type"] for e in bridge.events]
    assert not (project.root / ".ralph/logs/000001.log").exists()


def test_stop_ends_the_agent_at_once(project: Project) -> None:
    project.plan({"tasks": {"1": [{"spawn": 60, "sleep": 60}]}})
    with BridgeProcess(project.root) as bridge:
        bridge.call("run")
        bridge.wait_event("iteration_started")
        pgid = agent_pgid(project, 1)
        assert group_members(pgid)
        bridge.call("stop")
        stopped = bridge.wait_event("run_stopped", timeout=30)
        assert stopped["reason"] == "stopped"
        assert group_members(pgid) == []


def test_ping_is_answered_while_an_iteration_runs(project: Project) -> None:
    project.plan({"tasks": {"1": [{**TICK, "sleep": 3}]}})
    with BridgeProcess(project.root) as bridge:
        step_id = bridge.send("step")
        bridge.wait_event("iteration_started")
        ping_id = bridge.send("ping")
        assert bridge.response(ping_id, timeout=2)["result"]["ok"] is True
        assert step_id not in bridge.responses  # the step is still running
        assert bridge.response(step_id)["result"]["task_id"] == "1"


def test_pause_and_resume(project: Project) -> None:
    project.plan({"tasks": {"1": [{**TICK, "sleep": 1}], "2": [TICK], "3": [TICK]}})
    with BridgeProcess(project.root) as bridge:
        assert bridge.call("pause") == {"ok": False, "runId": None, "paused": False}
        run_id = bridge.call("run")["runId"]
        bridge.wait_event("iteration_started")
        assert bridge.call("pause") == {"ok": True, "runId": run_id, "paused": True}
        assert bridge.wait_event("run_paused")["runId"] == run_id
        assert len([e for e in bridge.events if e["type"] == "iteration_started"]) == 1
        assert bridge.call("status")["paused"] is True
        assert bridge.call("resume") == {"ok": True, "runId": run_id, "paused": False}
        assert bridge.wait_event("run_resumed")["runId"] == run_id
        assert bridge.wait_event("run_stopped")["reason"] == "complete"


def test_eof_stops_the_run_and_the_bridge(project: Project) -> None:
    project.plan({"tasks": {"1": [{"spawn": 60, "sleep": 60}]}})
    with BridgeProcess(project.root) as bridge:
        bridge.call("run")
        bridge.wait_event("iteration_started")
        pgid = agent_pgid(project, 1)
        started = time.monotonic()
        assert bridge.close_stdin() == 0
        assert time.monotonic() - started < 15
    types = [e["type"] for e in bridge.events]
    assert types[-1] == "bridge_stopped"
    assert types.index("run_stopped") < types.index("bridge_stopped")
    assert [e["reason"] for e in bridge.events if e["type"] == "run_stopped"] == ["stopped"]
    assert group_members(pgid) == []
    assert group_members(bridge.proc.pid) == []


def test_stop_during_the_final_gate_check(project: Project) -> None:
    """Every task marked done: the run checks the gates once more before `complete`; a stop
    then ends that check (and the gate's process group) at once."""
    project.prd(project.read_prd().replace("- [ ]", "- [x]"))
    project.config(gates=["echo gate-pid $$; sleep 60"])
    project.commit("all done")
    with BridgeProcess(project.root) as bridge:
        run_id = bridge.call("run")["runId"]
        receipts = project.root / ".ralph" / "receipts" / "_final" / run_id
        deadline = time.monotonic() + 30
        while not any(p.suffix == ".log" for p in receipts.rglob("*")) and (
                time.monotonic() < deadline):
            time.sleep(0.05)
        started = time.monotonic()
        assert bridge.call("stop") == {"ok": True, "stopped": True}
        stopped = bridge.wait_event("run_stopped", timeout=10)
        assert time.monotonic() - started < 10
        assert stopped["runId"] == run_id and stopped["reason"] == "stopped"
        assert bridge.call("status")["running"] is False
        assert "run_started" in [e["type"] for e in bridge.events]
    assert group_members(bridge.proc.pid) == []


def test_a_step_sent_just_before_eof_is_stopped(project: Project) -> None:
    project.plan({"tasks": {"1": [{"spawn": 60, "sleep": 60}]}})
    with BridgeProcess(project.root) as bridge:
        request = bridge.send("step")
        started = time.monotonic()
        assert bridge.close_stdin() == 0
        assert time.monotonic() - started < 15
        error = bridge.response(request, timeout=1)["error"]
        assert error["code"] == -32000, error
    assert bridge.events[-1]["type"] == "bridge_stopped"
    assert group_members(bridge.proc.pid) == []
    assert json.loads((project.root / ".ralph" / "state.json").read_text())[
        "active_run"] is None


def test_a_run_sent_just_before_eof_is_refused_or_reported(project: Project) -> None:
    """Either the run is refused (the bridge was closing before it started) or the client
    that got its runId also gets its run_stopped, before bridge_stopped."""
    project.plan({"tasks": {"1": [{"spawn": 60, "sleep": 60}]}})
    with BridgeProcess(project.root) as bridge:
        request = bridge.send("run")
        started = time.monotonic()
        assert bridge.close_stdin() == 0
        assert time.monotonic() - started < 15
        reply = bridge.response(request, timeout=1)
    types = [e["type"] for e in bridge.events]
    assert types[-1] == "bridge_stopped"
    if "error" in reply:
        assert reply["error"]["code"] == -32000 and "closing" in reply["error"]["message"]
        assert "run_started" not in types
    else:
        run_id = reply["result"]["runId"]
        assert [e["runId"] for e in bridge.events if e["type"] == "run_stopped"] == [run_id]
    assert group_members(bridge.proc.pid) == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_the_bridge_like_eof(project: Project, sig: int) -> None:
    """Editors end their bridge with SIGTERM: the run and its agent stop, bridge_stopped goes
    out, and state.json is left without an active run."""
    project.plan({"tasks": {"1": [{"spawn": 60, "sleep": 60}]}})
    with BridgeProcess(project.root) as bridge:
        bridge.call("run")
        bridge.wait_event("iteration_started")
        pgid = agent_pgid(project, 1)
        bridge.proc.send_signal(sig)
        assert bridge.proc.wait(timeout=15) == 0
        while bridge._pump(5):
            pass
    types = [e["type"] for e in bridge.events]
    assert types[-1] == "bridge_stopped"
    assert [e["reason"] for e in bridge.events if e["type"] == "run_stopped"] == ["stopped"]
    assert group_members(pgid) == []
    assert json.loads((project.root / ".ralph" / "state.json").read_text())[
        "active_run"] is None


def test_pause_applies_to_a_background_run_only(project: Project) -> None:
    project.plan({"tasks": {"1": [{**TICK, "sleep": 2}]}})
    with BridgeProcess(project.root) as bridge:
        step = bridge.send("step")
        started = bridge.wait_event("iteration_started")
        assert bridge.call("pause") == {"ok": False, "runId": started["runId"],
                                        "paused": False}
        assert bridge.response(step)["result"]["task_id"] == "1"
    assert "run_paused" not in [e["type"] for e in bridge.events]


def test_params_by_position(project: Project) -> None:
    project.plan({"tasks": {"1": [TICK], "2": [TICK], "3": [TICK]}})
    with BridgeProcess(project.root) as bridge:
        assert bridge.call("step", ["fake"])["agent"] == "fake"
        assert bridge.call("step", [])["task_id"] == "2"
        run_id = bridge.call("run", ["fake", 1])["runId"]
        started = bridge.wait_event("run_started", runId=run_id)
        assert (started["agent"], started["maxIterations"]) == ("fake", 1)
        bridge.wait_event("run_stopped", runId=run_id)
        too_many = bridge.error("run", ["fake", 1, 2])
        assert too_many["code"] == -32602


@pytest.mark.parametrize("params", [{"maxIterations": True}, {"maxIterations": "3"},
                                    {"maxIterations": 2.0}, {"maxIterations": 0},
                                    {"agent": ""}, {"agent": 3}])
def test_run_params_are_checked_strictly(project: Project, params: dict[str, Any]) -> None:
    with BridgeProcess(project.root) as bridge:
        error = bridge.error("run", params)
        assert error["code"] == -32602 and error["data"], error
        assert bridge.call("status")["running"] is False
    assert "run_started" not in [e["type"] for e in bridge.events]


def test_application_errors_carry_data(project: Project) -> None:
    """A state.json that cannot be read fails status, step and run alike: -32000 with data."""
    state = project.root / ".ralph" / "state.json"
    state.unlink(missing_ok=True)
    state.mkdir()
    (project.root / "ralph.toml").write_text(
        (project.root / "ralph.toml").read_text().replace(
            "max_iterations = 10", "max_iterations = 10\nrate_limit_per_hour = 5"))
    with BridgeProcess(project.root) as bridge:
        for method in ("status", "step", "run"):
            error = bridge.error(method)
            assert error["code"] == -32000 and error["data"] == {"error": "StateError"}, (
                method, error)
            assert "state.json" in error["message"]


def test_errors_are_json_rpc_errors(project: Project) -> None:
    with BridgeProcess(project.root) as bridge:
        assert bridge.error("nope")["code"] == -32601
        bad = bridge.error("run", {"maxIterations": "many"})
        assert bad["code"] == -32602 and bad["data"]
        assert bridge.error("step", {"agnet": "fake"})["code"] == -32602  # unknown parameter
        assert bridge.error("ping", {"x": 1})["code"] == -32602
        unknown_agent = bridge.error("step", {"agent": "nobody"})
        assert unknown_agent["code"] == -32000 and "unknown agent 'nobody'" in (
            unknown_agent["message"])
        bridge.send_raw(b"{not json\n")
        assert bridge.response(None)["error"]["code"] == -32700


def test_an_error_event_for_a_failing_run(project: Project) -> None:
    (project.root / "PROMPT_build.md").unlink()
    project.commit("no prompt")
    project.plan({"tasks": {"1": [TICK]}})
    with BridgeProcess(project.root) as bridge:
        bridge.call("run")
        error = bridge.wait_event("error")
        assert "PROMPT_build.md" in error["message"] and error["runId"]
        assert bridge.wait_event("run_stopped")["reason"] == "error"


def test_rate_limited_when_the_hourly_cap_is_used_up(project: Project) -> None:
    (project.root / "ralph.toml").write_text(
        (project.root / "ralph.toml").read_text().replace(
            "max_iterations = 10", "max_iterations = 10\nrate_limit_per_hour = 1"))
    state = project.root / ".ralph" / "state.json"
    state.write_text(json.dumps({"version": 1, "agent_starts": [time.time()]}))
    with BridgeProcess(project.root) as bridge:
        error = bridge.error("step")
        assert error["code"] == -32001 and 3500 < error["data"]["retryAfterSeconds"] <= 3600


def test_events_from_a_run_in_another_process(project: Project) -> None:
    """Projections of the store: a `ralph run` in a terminal shows up in the bridge too."""
    project.plan({"tasks": {"1": [TICK], "2": [TICK], "3": [TICK]}})
    with BridgeProcess(project.root) as bridge:
        bridge.wait_event("bridge_started")
        done = subprocess.run([sys.executable, "-m", "ralph", "run", "--quiet"],
                              cwd=project.root, timeout=120, capture_output=True,
                              stdin=subprocess.DEVNULL, check=False)
        assert done.returncode == 0, done.stderr
        assert bridge.wait_event("run_stopped")["reason"] == "complete"


@pytest.mark.parametrize("line", [b"\xff\xfe\n", b"[1, 2]\n", b'{"jsonrpc": "2.0"}\n'])
def test_odd_lines_get_errors_and_the_bridge_lives_on(project: Project, line: bytes) -> None:
    with BridgeProcess(project.root) as bridge:
        bridge.send_raw(line)
        assert bridge.call("ping")["ok"] is True
    for raw in bridge.raw:
        message: Any = json.loads(raw)
        assert isinstance(message, dict | list)


def test_the_example_client(project: Project) -> None:
    project.plan({"tasks": {"1": [TICK], "2": [TICK], "3": [TICK]}})
    example = Path(__file__).resolve().parents[2] / "examples" / "bridge_client.py"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    done = subprocess.run([sys.executable, str(example), str(project.root), "--run"], env=env,
                          capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, check=False)
    assert done.returncode == 0, done.stderr
    assert "ping: {'ok': True" in done.stdout and "status: 0/3 done" in done.stdout
    assert "'type': 'run_stopped'" in done.stdout and "'reason': 'complete'" in done.stdout
    assert done.stdout.rstrip().endswith("'type': 'bridge_stopped'}")


def test_the_bridge_openrpc_document(project: Project) -> None:
    done = subprocess.run([sys.executable, "-m", "ralph", "bridge", "--openrpc"],
                          cwd=project.root, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, check=False)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    _validator().validate(document)
    names = {m["name"] for m in document["methods"]}
    assert {"ping", "status", "step", "run", "stop", "pause", "resume",
            "rpc.discover"} <= names
    methods = {m["name"]: m for m in document["methods"]}
    assert methods["step"]["paramStructure"] == methods["run"]["paramStructure"] == "either"
    [event] = document["x-notifications"]
    assert event["paramsSchema"] == {"$ref": "#/components/schemas/EventParams"}
    assert "params" not in event  # a union of event kinds has no fixed fields
    with BridgeProcess(project.root) as bridge:
        assert bridge.call("rpc.discover") == document

"""`ralph serve`'s loop and notes methods and the loop's events, with a real WebSocket client
on a project with a PRD and the fake agent: loop/status, loop/step and its events, loop/run
with pause, resume and stop, loop/iterations paging, tasks/list, notes/add and notes/list,
bad params; and the loop's events projected from the frames of a real store."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
import websockets

from ralph.bridge import projection
from ralph.loop import LoopService
from ralph.remote.loop_events import EVENT_MODELS, loop_events
from ralph.remote.loop_methods import IterationRecord, iteration_record
from ralph.store import Frame, Store
from tests.cli.helpers import TIMEOUT
from tests.loop.conftest import Project, project
from tests.remote.test_agent import Phone, on_phone
from tests.remote.test_serve import TOKEN, Served, serving, start, wait_served
from tests.rpc.test_openrpc import _validator

TICK = {"tick": True, "print": ["done"]}
STEP_FIELDS = {"iteration", "agent", "task_id", "exit_signal", "return_code", "log_path",
               "progress_made", "no_progress_streak", "gates_ok", "repo_clean", "judge_ok",
               "review_ok", "blocked", "attempt_id", "receipts_dir", "context_dir", "task_title"}
STATUS_FIELDS = {"version", "cwd", "prd", "progress", "agents", "prompt", "done", "total",
                 "next", "running", "paused", "activeRunId", "last", "blocked", "cost",
                 "prd_error"}
FINISHED_FIELDS = {"type", "ts", "runId", "iteration", "agent", "task_id", "exitSignal",
                   "returnCode", "repoClean", "gatesOk", "judgeOk", "reviewOk", "blocked",
                   "attemptId", "receiptsDir", "contextDir", "durationSeconds", "logPath",
                   "tokensIn", "tokensOut", "costUsd", "seq"}
RECORD_FIELDS = FINISHED_FIELDS | {"title", "commit", "status", "verified", "reason"}

__all__ = ["project"]  # the loop tests' project (git, a 3-task PRD, the fake agent)


@pytest.fixture
def served(project: Project) -> Iterator[Served]:
    # (.ralph/serve.json, the server's, is not a change the loop sees in the tree, even
    # when the project's .gitignore does not name it)
    with serving(project.root) as served:
        yield served


def loop_seen(phone: Phone) -> list[dict[str, Any]]:
    """The loop events received so far: {method, **params}."""
    return [{"method": e["method"], **e["params"]} for e in phone.events
            if e.get("method", "").startswith("event/loop_")]


def test_status_and_tasks(served: Served) -> None:
    async def script(phone: Phone) -> None:
        status = (await phone.call("loop/status"))["result"]
        assert set(status) == STATUS_FIELDS
        assert (status["done"], status["total"], status["running"]) == (0, 3, False)
        assert status["next"] == {"task_id": "1", "title": "First task", "kind": "build"}
        tasks = (await phone.call("tasks/list", {}))["result"]
        assert [(t["id"], t["title"], t["status"], t["attempts"], t["blocked_reason"],
                 t["next"]) for t in tasks["tasks"]] == [
            ("1", "First task", "open", 0, None, True),
            ("2", "Second task", "open", 0, None, False),
            ("3", "Third task", "open", 0, None, False)]
        assert tasks["tasks"][1]["depends_on"] == ["1"] and tasks["warnings"] == []
        history = (await phone.call("loop/iterations"))["result"]
        assert history == {"iterations": [], "next_before": None, "total": 0}

    on_phone(served, script)


def test_a_step_and_its_events(served: Served, project: Project) -> None:
    project.plan({"tasks": {"1": [TICK]}})

    async def script(phone: Phone) -> None:
        step = await phone.call("loop/step", {"agent": "fake"})
        result = step["result"]
        assert set(result) == STEP_FIELDS
        assert (result["task_id"], result["task_title"], result["gates_ok"]) == (
            "1", "First task", True)
        started = await phone.until("event/loop_iteration_started")
        finished = await phone.until("event/loop_iteration_finished")
        assert started["type"] == "iteration_started" and started["task_id"] == "1"
        said = await phone.until("event/loop_agent_output", runId=started["runId"])
        assert said["iteration"] == 1 and said["kind"] in ("text", "tool_use", "tool_result")
        assert started["seq"] < said["seq"] < finished["seq"]
        assert started["title"] == "First task" and started["agent"] == "fake"
        assert set(finished) == FINISHED_FIELDS
        assert finished["runId"] == started["runId"] and finished["iteration"] == 1
        assert finished["seq"] > started["seq"]
        # a step is a run of one iteration: its iterations only, as on the bridge
        assert {e["method"] for e in loop_seen(phone)} == {
            "event/loop_iteration_started", "event/loop_agent_output",
            "event/loop_iteration_finished"}
        history = (await phone.call("loop/iterations", {"limit": 5}))["result"]
        assert history["total"] == 1 and history["next_before"] is None
        [item] = history["iterations"]
        assert set(item) == RECORD_FIELDS
        assert {k: item[k] for k in FINISHED_FIELDS} == finished
        assert (item["title"], item["status"], item["verified"], item["reason"]) == (
            "First task", "done", True, None)
        assert isinstance(item["commit"], str) and len(item["commit"]) == 40
        tasks = (await phone.call("tasks/list"))["result"]["tasks"]
        assert (tasks[0]["status"], tasks[0]["attempts"]) == ("done", 1)

    on_phone(served, script)


def test_a_step_goes_on_when_its_client_goes_away(served: Served, project: Project) -> None:
    project.plan({"tasks": {"1": [TICK]}})

    async def script(phone: Phone) -> None:
        async with websockets.connect(served.ws + f"?token={TOKEN}") as gone:
            await gone.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "loop/step",
                                        "params": {"agent": "fake"}}))
            await phone.until("event/loop_iteration_started")
        # its client closed the connection: the iteration ends as it would have
        finished = await phone.until("event/loop_iteration_finished")
        assert finished["gatesOk"] is True and finished["task_id"] == "1"
        history = (await phone.call("loop/iterations", {"limit": 1}))["result"]
        assert history["iterations"][0]["status"] == "done"

    on_phone(served, script)


def test_a_run_paused_resumed_and_stopped(served: Served, project: Project) -> None:
    project.plan({"tasks": {"1": [{**TICK, "sleep": 1}], "2": [TICK],
                            "3": [{"spawn": 60, "sleep": 60}]}})

    async def script(phone: Phone) -> None:
        assert (await phone.call("loop/pause"))["result"] == {
            "ok": False, "runId": None, "paused": False}
        run = await phone.call("loop/run", {"max_iterations": 5})
        run_id = run["result"]["runId"]
        assert run["result"] == {"runId": run_id}
        started = await phone.until("event/loop_run_started", runId=run_id)
        assert (started["agent"], started["maxIterations"], started["startIteration"]) == (
            "fake", 5, 1)
        await phone.until("event/loop_iteration_started", runId=run_id, task_id="1")
        busy = await phone.call("loop/step")
        assert busy["error"]["code"] == -32000
        assert busy["error"]["data"] == {"activeRunId": run_id}
        again = await phone.call("loop/run", {"maxIterations": 2})
        assert again["error"]["data"] == {"activeRunId": run_id}
        assert (await phone.call("loop/pause"))["result"] == {
            "ok": True, "runId": run_id, "paused": True}
        paused = await phone.until("event/loop_run_paused", runId=run_id)
        assert (await phone.call("loop/status"))["result"]["paused"] is True
        assert (await phone.call("loop/resume"))["result"] == {
            "ok": True, "runId": run_id, "paused": False}
        resumed = await phone.until("event/loop_run_resumed", runId=run_id)
        assert resumed["seq"] > paused["seq"]
        await phone.until("event/loop_iteration_started", runId=run_id, task_id="3")
        assert (await phone.call("loop/stop"))["result"] == {"ok": True, "stopped": True}
        stopped = await phone.until("event/loop_run_stopped", runId=run_id)
        assert stopped["reason"] == "stopped" and stopped["type"] == "run_stopped"
        assert (await phone.call("loop/stop"))["result"] == {"ok": True, "stopped": False}
        seen = loop_seen(phone)
        seqs = [e["seq"] for e in seen]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        finished = [e for e in seen if e["method"] == "event/loop_iteration_finished"]
        assert [e["task_id"] for e in finished] == ["1", "2", "3"]
        assert all(set(e) - {"method"} == FINISHED_FIELDS for e in finished)

    on_phone(served, script)


def test_the_current_iteration_for_a_client_that_opens_mid_run(served: Served,
                                                              project: Project) -> None:
    project.plan({"tasks": {"1": [{"print": ["busy"], "hang": 120}]}})

    async def script(phone: Phone) -> None:
        assert (await phone.call("loop/current"))["result"] == {"iteration": None}
        run_id = (await phone.call("loop/run"))["result"]["runId"]
        started = await phone.until("event/loop_iteration_started", runId=run_id)
        current = (await phone.call("loop/current"))["result"]["iteration"]
        assert current == started  # the event itself: type, ts, fields and seq
        assert (await phone.call("loop/stop"))["result"]["stopped"] is True
        await phone.until("event/loop_run_stopped", runId=run_id)
        assert (await phone.call("loop/current"))["result"] == {"iteration": None}

    on_phone(served, script)


def test_the_history_a_page_at_a_time(served: Served, project: Project) -> None:
    project.plan({"tasks": {"1": [TICK], "2": [TICK], "3": [TICK]}})

    async def script(phone: Phone) -> None:
        run_id = (await phone.call("loop/run"))["result"]["runId"]
        stopped = await phone.until("event/loop_run_stopped", runId=run_id)
        assert stopped["reason"] == "complete"
        finished = [e for e in loop_seen(phone)
                    if e["method"] == "event/loop_iteration_finished"]
        first = (await phone.call("loop/iterations", {"limit": 2}))["result"]
        assert first["total"] == 3
        assert [i["iteration"] for i in first["iterations"]] == [3, 2]
        assert first["next_before"] == first["iterations"][-1]["seq"]
        second = (await phone.call("loop/iterations", {"before": first["next_before"],
                                                       "limit": 2}))["result"]
        assert [i["iteration"] for i in second["iterations"]] == [1]
        assert second["next_before"] is None and second["total"] == 3
        items = first["iterations"] + second["iterations"]
        assert [i["seq"] for i in items] == [e["seq"] for e in reversed(finished)]
        assert [i["title"] for i in items] == ["Third task", "Second task", "First task"]
        everything = (await phone.call("loop/iterations"))["result"]
        assert everything["iterations"] == items and everything["next_before"] is None

    on_phone(served, script)


def test_notes(served: Served) -> None:
    async def script(phone: Phone) -> None:
        first = (await phone.call("notes/add", {"type": "learning", "text": "uv is fast"}))
        note = first["result"]
        assert {k: note[k] for k in ("session", "type", "iteration", "text")} == {
            "session": "default", "type": "learning", "iteration": None, "text": "uv is fast"}
        assert set(note) == {"id", "seq", "ts", "session", "type", "iteration", "text",
                         "resolves"}
        second = (await phone.call("notes/add", {"type": "decision", "text": "use sqlite",
                                                 "session": "auth", "iteration": 2}))["result"]
        assert second["seq"] > note["seq"] and second["iteration"] == 2
        # every client is told (an extension): the note as notes/list gives it
        assert await phone.until("event/note_added", seq=note["seq"]) == note
        assert await phone.until("event/note_added", seq=second["seq"]) == second
        every = (await phone.call("notes/list"))["result"]["notes"]
        assert [n["text"] for n in every] == ["use sqlite", "uv is fast"]  # newest first
        assert every[1] == note
        learned = (await phone.call("notes/list", {"type": "learning"}))["result"]["notes"]
        assert [n["text"] for n in learned] == ["uv is fast"]
        auth = (await phone.call("notes/list", {"session": "auth"}))["result"]["notes"]
        assert [n["text"] for n in auth] == ["use sqlite"]
        one = (await phone.call("notes/list", {"limit": 1}))["result"]["notes"]
        assert [n["text"] for n in one] == ["use sqlite"]
        bad = await phone.call("notes/add", {"type": "gossip", "text": "x"})
        assert bad["error"]["code"] == -32602 and bad["error"]["data"][0]["loc"] == ["type"]

    on_phone(served, script)


BAD_PARAMS: list[tuple[str, dict[str, Any]]] = [
    ("loop/run", {"max_iterations": 0}), ("loop/run", {"max_iterations": "3"}),
    ("loop/run", {"maxIterations": True}), ("loop/run", {"max_iteration": 2}),
    ("loop/run", {"max_iterations": 2, "maxIterations": 2}), ("loop/step", {"agent": ""}),
    ("loop/step", {"agent": 3}), ("loop/status", {"x": 1}), ("loop/stop", {"now": True}),
    ("loop/iterations", {"limit": 501}), ("loop/iterations", {"limit": 0}),
    ("loop/iterations", {"before": "x"}), ("loop/iterations", {"before": 0}),
    ("tasks/list", {"all": True}), ("notes/add", {}), ("notes/add", {"type": "learning"}),
    ("notes/add", {"type": "learning", "text": "  "}),
    ("notes/add", {"type": "learning", "text": "x", "session": "no spaces"}),
    ("notes/list", {"limit": 0}), ("notes/list", {"type": "gossip"}),
    ("notes/list", {"session": "../x"})]


def test_bad_params(served: Served) -> None:
    async def script(phone: Phone) -> list[dict[str, Any]]:
        return [await phone.call(method, params) for method, params in BAD_PARAMS]

    for (method, params), answer in zip(BAD_PARAMS, on_phone(served, script), strict=True):
        assert answer["error"]["code"] == -32602 and answer["error"]["data"], (
            method, params, answer)
    assert not list((served.root / ".ralph" / "logs").glob("*.log"))  # nothing ran


def test_the_loops_own_errors(served: Served, project: Project) -> None:
    async def script(phone: Phone) -> None:
        unknown = await phone.call("loop/step", {"agent": "nobody"})
        assert unknown["error"]["code"] == -32000
        assert "unknown agent 'nobody'" in unknown["error"]["message"]
        assert unknown["error"]["data"] == {"error": "ConfigError"}
        (project.root / "PRD.md").write_text("# P\n\n## Tasks\n\n- [] 1. First task\n")
        unreadable = await phone.call("tasks/list")
        assert unreadable["error"]["code"] == -32000
        assert unreadable["error"]["data"] == {"error": "TasksUnreadable", "warnings": [
            {"line": 5, "text": "- [] 1. First task",
             "reason": "the box is empty ('[]'); write '- [ ] Title'"}]}
        status = (await phone.call("loop/status"))["result"]  # an editor opens any folder
        assert status["total"] == 0 and status["prd_error"]

    on_phone(served, script)


def test_rate_limited_with_retry_after(project: Project) -> None:
    (project.root / "ralph.toml").write_text(
        (project.root / "ralph.toml").read_text().replace(
            "max_iterations = 10", "max_iterations = 10\nrate_limit_per_hour = 1"))
    state = project.root / ".ralph" / "state.json"
    state.parent.mkdir(exist_ok=True)
    state.write_text(json.dumps({"version": 1, "agent_starts": [time.time()]}))
    proc = start(project.root, "--token", TOKEN)
    try:
        served = wait_served(proc, project.root)

        async def script(phone: Phone) -> list[dict[str, Any]]:
            return [await phone.call("loop/step"), await phone.call("loop/run")]

        for answer in on_phone(served, script):
            # -32000, as the connection's own rate limit: -32001 is "agent already running"
            assert answer["error"]["code"] == -32000
            assert answer["error"]["message"] == "rate limited"
            data = answer["error"]["data"]
            assert 3500 < data["retry_after"] == data["retryAfterSeconds"] <= 3600
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(TIMEOUT) == 0


def test_the_openrpc_document_has_the_loop(served: Served) -> None:
    status, document = served.get("/api/rpc/discover")
    assert status == 200
    assert not list(_validator().iter_errors(document))
    methods = {m["name"]: m for m in document["methods"]}
    assert {"loop/status", "loop/step", "loop/run", "loop/stop", "loop/pause", "loop/resume",
            "loop/iterations", "tasks/list", "notes/list", "notes/add"} <= set(methods)
    assert [p["name"] for p in methods["loop/run"]["params"]] == ["agent", "max_iterations"]
    assert {e["code"] for e in methods["loop/step"]["errors"]} == {-32000}
    notifications = {n["name"] for n in document["x-notifications"]}
    assert set(EVENT_MODELS) <= notifications
    assert "event/loop_iteration_finished" in notifications


# -- the projection, on the frames of a real store --------------------------------------------

def test_loop_events_are_the_bridges_events_with_their_seq(project: Project) -> None:
    project.plan({"tasks": {"1": [TICK], "2": [TICK], "3": [{"print": ["not yet"]}]}})

    async def go() -> list[Frame]:
        service = LoopService(project.root)
        try:
            await service.step()
            await service.run(max_iterations=2)
        finally:
            await service.aclose()
        with Store(project.root / ".ralph" / "store") as store:
            return list(store.read())

    frames = asyncio.run(go())
    events = [(frame, event) for frame in frames for event in loop_events(frame)
              if event[0] != "event/loop_agent_output"]
    names = [name for _, (name, _) in events]
    assert names == ["event/loop_iteration_started", "event/loop_iteration_finished",
                     "event/loop_run_started",
                     "event/loop_iteration_started", "event/loop_iteration_finished",
                     "event/loop_iteration_started", "event/loop_iteration_finished",
                     "event/loop_run_stopped"]
    for frame, (name, params) in events:
        bridge = project_event(frame)
        assert params == {**bridge, "seq": frame.seq}
        assert name == "event/loop_" + bridge["type"]
        EVENT_MODELS[name].model_validate(params)  # the documented shape
    seqs = [params["seq"] for _, (_, params) in events]
    assert seqs == sorted(seqs)
    stopped = events[-1][1][1]
    assert stopped["reason"] == "max_iterations"
    outputs = [f for f in frames if f.topic == "agent.output"]
    assert outputs and all(f.stream.startswith("runs/") for f in outputs)
    for frame in outputs:  # the iterations' agent output: the bridge's agent_output fields
        [(name, params)] = loop_events(frame)
        assert name == "event/loop_agent_output"
        EVENT_MODELS[name].model_validate(params)
        assert params["seq"] == frame.seq and params["runId"] == frame.meta["run_id"]
        assert params["iteration"] == frame.meta["iteration"]
    # the history's items: the finished events, plus the task's title and outcome
    finished = [f for f in frames if f.topic == "iteration.finished"]
    records = [iteration_record(f) for f in finished]
    assert all(isinstance(r, IterationRecord) for r in records)
    assert [(r.title, r.status) for r in records if r is not None] == [
        ("First task", "done"), ("Second task", "done"), ("Third task", "not_done")]


def project_event(frame: Frame) -> dict[str, Any]:
    event = projection.project(frame)
    assert event is not None
    return event.model_dump()


def test_odd_and_other_frames_give_no_loop_event(store: Store) -> None:
    odd = store.append("iteration.finished", {"run_id": "run_x"}, stream="runs/run_x")
    odd_start = store.append("run.started", {"run_id": "run_x", "agent": "a"},
                             stream="runs/run_x")
    note = store.append("ralph.default.note", {"type": "learning"}, content="x",
                        stream="sessions/default")
    session = store.append("agent.output", {"kind": "text", "content": "hi"},
                           stream="sessions/ses_1")
    step_stop = store.append("run.stopped", {"run_id": "run_y", "reason": "complete",
                                             "mode": "step"}, stream="runs/run_y")
    for frame in (odd, odd_start, note, session, step_stop):
        assert loop_events(frame) == []
    assert iteration_record(odd) is None
    error = store.append("loop.error", {"run_id": "run_z", "message": "no prompt"},
                         stream="runs/run_z")
    assert loop_events(error) == [("event/loop_error", {
        "type": "error", "ts": error.ts, "runId": "run_z", "message": "no prompt",
        "seq": error.seq})]
    blocked = store.append("task.blocked", {"run_id": "run_z", "task_id": "2",
                                            "reason": "3 attempts failed"},
                           stream="runs/run_z")
    [(name, params)] = loop_events(blocked)
    assert name == "event/loop_task_blocked" and params["task_id"] == "2"
    assert params["seq"] == blocked.seq

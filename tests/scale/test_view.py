"""A run by its id (ralph.scale.view): the view both faces show, the bridge's `remoteRun`
and `ralph serve`'s `GET /api/remote-runs/{run_id}`.

The service against stores with a run's frames appended by hand (a file store, and
PostgreSQL where it matters): the status its frames tell, pages of its events, unknown runs
and bad queries; against a real Temporal development server: a run its workflow answers for
(the workflow only, on a worker in this process, with no activity worker: it stays
`starting`), a run Temporal does not know, a Temporal that cannot be reached. Then each face
as a real process with a real client."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowExecutionStatus
from temporalio.worker import Worker

from ralph.bridge.models import RemoteRunResult, RemoteRunStatus
from ralph.bridge.projection import run_event
from ralph.remote.loop_events import loop_events
from ralph.scale import client as runs
from ralph.scale.client import TemporalError
from ralph.scale.model import RunSpec, RunStatus
from ralph.scale.view import (
    MAX_LIMIT,
    STATUS_KEYS,
    BadRunQuery,
    RemoteRuns,
    RemoteSource,
    RunNotFound,
    remote_run,
    status_from_frames,
)
from ralph.scale.workflow import RalphRun
from ralph.store import Frame, Store
from ralph.testing.temporal_dev import TemporalDevServer
from tests.bridge.client import BridgeProcess
from tests.remote.test_serve import serving
from tests.rpc.test_openrpc import _validator

RUNNING = WorkflowExecutionStatus.RUNNING
RUN = "run_03hbview0000000000000001"
OTHER = "run_03hbview0000000000000002"
NO_REMOTE_ENV = {"RALPH_TEMPORAL": "", "RALPH_TEMPORAL_NAMESPACE": "", "RALPH_STORE": ""}
STATUS_FIELDS = {"runId", "phase", "iteration", "maxIterations", "done", "total", "paused",
                 "stopRequested", "lastStatus", "lastTask", "reason", "message", "branch",
                 "repo"}
VIEW_FIELDS = {"runId", "status", "statusSource", "temporalError", "events", "lastSeq", "more"}


def finished(run_id: str, iteration: int, task_id: str, status: str) -> dict[str, Any]:
    """An `iteration.finished` meta as the loop records it (the fields the bridge reads)."""
    return {"run_id": run_id, "iteration": iteration, "agent": "fake", "task_id": task_id,
            "status": status, "exit_signal": False, "return_code": 0, "repo_clean": True,
            "gates_ok": True, "gates_ran": True, "judge_ok": None, "review_ok": None,
            "blocked": False, "attempt_id": f"{task_id}-1", "receipts_dir": None,
            "context_dir": None, "duration_seconds": 1.5, "log_path": None,
            "tokens_in": 10, "tokens_out": 20, "cost_usd": None}


def seed(store: Store, run_id: str = RUN, *, ended: bool = True) -> list[Frame]:
    """A run on Temporal as its workers record it in `runs/<run_id>`: two iterations (the
    second retried), a pause, gates, a warning, output; frames of another run and of
    another stream in between. The run's own frames, in order."""
    stream = f"runs/{run_id}"
    tags = {"on": "temporal", "branch": f"ralph/{run_id}", "worker": "w1"}

    def add(topic: str, meta: dict[str, Any], on: str = stream) -> Frame:
        return store.append(topic, {"run_id": run_id, **meta} if on == stream else meta,
                            stream=on)

    frames = [
        add("run.started", {"agent": "fake", "maxIterations": 5, "startIteration": 1,
                            "mode": "run", **tags}),
        add("iteration.started", {"iteration": 1, "agent": "fake", "task_id": "1",
                                  "title": "First"}),
        add("agent.output", {"iteration": 1, "kind": "text", "content": "working"}),
    ]
    store.append("run.started", {"run_id": OTHER, "agent": "fake", "maxIterations": 1,
                                 "startIteration": 1}, stream=f"runs/{OTHER}")
    store.append("ralph.default.note", {"type": "learning"}, stream="sessions/default")
    frames += [
        add("gate.started", {"iteration": 1, "index": 0, "command": "true"}),
        add("gate.finished", {"iteration": 1, "index": 0, "ok": True}),
        add("iteration.finished", finished(run_id, 1, "1", "done")),
        add("run.paused", {"key": "k1"}),
        add("run.resumed", {"key": "k2"}),
        add("iteration.started", {"iteration": 2, "agent": "fake", "task_id": "2",
                                  "title": "Second"}),
        add("iteration.retried", {"iteration": 2, "attempt": 2, "worker": "w2",
                                  "message": "iteration 2 starts again (attempt 2)"}),
        add("loop.warning", {"message": "the branch moved", "iteration": 2}),
        add("iteration.finished", finished(run_id, 2, "2", "not_done")),
    ]
    if ended:
        frames.append(add("run.stopped", {
            "reason": "max_iterations", "message": "2 iterations of at most 2", "iterations": 2,
            "done": 1, "total": 3, "mode": "run", **tags}))
    return frames


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "store") as opened:
        yield opened


def view(store: Store | str, run_id: str = RUN, **options: Any) -> dict[str, Any]:
    return asyncio.run(remote_run(run_id, temporal=None, namespace="default", store=store,
                                  **options))


# -- the status its frames tell ----------------------------------------------------------------

def test_the_status_of_an_ended_run_from_its_frames(store: Store) -> None:
    seed(store)
    status = view(store)["status"]
    assert status == {"runId": RUN, "phase": "ended", "iteration": 2, "maxIterations": 5,
                      "done": 1, "total": 3, "paused": False, "stopRequested": False,
                      "lastStatus": "not_done", "lastTask": "2", "reason": "max_iterations",
                      "message": "2 iterations of at most 2", "branch": f"ralph/{RUN}",
                      "repo": ""}


def test_a_run_starting_running_paused_resumed_then_ended(store: Store) -> None:
    frames = seed(store)
    phases = [(status.phase, status.paused, status.iteration)
              for status in (status_from_frames(RUN, frames[:n]) for n in range(len(frames) + 1))]
    # before anything, after run.started, iteration 1 ... the pause, the resume, the end
    assert phases[0] == ("starting", False, 0)
    assert phases[1] == ("running", False, 0)
    assert phases[2] == ("running", False, 1)
    paused = [frame.topic for frame in frames].index("run.paused") + 1
    assert phases[paused] == ("paused", True, 1)
    assert phases[paused + 1] == ("running", False, 1)
    assert phases[-2] == ("running", False, 2)
    assert phases[-1] == ("ended", False, 2)


def test_a_pause_before_the_start_frame_and_nothing_after_the_end(store: Store) -> None:
    stream = f"runs/{RUN}"
    store.append("run.paused", {"run_id": RUN}, stream=stream)
    store.append("run.started", {"run_id": RUN, "agent": "fake", "maxIterations": 3,
                                 "startIteration": 1}, stream=stream)
    assert (view(store)["status"]["phase"], view(store)["status"]["paused"]) == ("paused", True)
    store.append("run.stopped", {"run_id": RUN, "reason": "stopped", "message": "asked"},
                 stream=stream)
    store.append("run.resumed", {"run_id": RUN}, stream=stream)  # late: the run has ended
    status = view(store)["status"]
    assert (status["phase"], status["paused"], status["reason"], status["message"]) == (
        "ended", False, "stopped", "asked")


def test_odd_frames_do_not_break_the_status(store: Store) -> None:
    stream = f"runs/{RUN}"
    store.append("run.started", {"run_id": RUN, "maxIterations": "many", "branch": 3},
                 stream=stream)
    store.append("iteration.started", {"run_id": RUN, "iteration": True}, stream=stream)
    store.append("iteration.finished", {"run_id": RUN, "iteration": 4, "status": ["x"]},
                 stream=stream)
    store.append("run.stopped", {"run_id": RUN, "done": None, "reason": 1}, stream=stream)
    got = view(store)
    assert got["status"] == {**got["status"], "phase": "ended", "iteration": 4,
                             "maxIterations": 0, "branch": "", "lastStatus": None,
                             "reason": None, "done": 0}
    assert [e["topic"] for e in got["events"]] == [
        "run.started", "iteration.started", "iteration.finished", "run.stopped"]
    # as bridge events: the frames that cannot be one are left out, the page goes on
    shown = view(store, project=run_event)
    assert [e["type"] for e in shown["events"]] == ["run_stopped"]
    assert shown["events"][0]["reason"] == "unknown"
    assert shown["lastSeq"] == got["lastSeq"]


def test_the_status_keys_are_run_status_fields_in_camel_case() -> None:
    assert set(STATUS_KEYS) == {f.name for f in dataclasses.fields(RunStatus)}
    assert set(STATUS_KEYS.values()) == STATUS_FIELDS == set(RemoteRunStatus.model_fields)
    assert set(RemoteRunResult.model_fields) == VIEW_FIELDS


# -- pages of its events ------------------------------------------------------------------------

def test_the_events_are_the_run_streams_frames_a_page_at_a_time(store: Store) -> None:
    frames = seed(store)
    whole = view(store)
    assert set(whole) == VIEW_FIELDS
    assert (whole["runId"], whole["statusSource"], whole["temporalError"]) == (
        RUN, "store", None)
    assert whole["events"] == [frame.to_dict() for frame in frames]
    assert (whole["lastSeq"], whole["more"]) == (frames[-1].seq, False)
    json.dumps(whole)  # JSON-ready

    pages: list[list[int]] = []
    after = 0
    while True:
        page = view(store, events_after=after, limit=4)
        pages.append([event["seq"] for event in page["events"]])
        after = page["lastSeq"]
        if not page["more"]:
            break
    assert pages == [[f.seq for f in frames[i:i + 4]] for i in range(0, len(frames), 4)]
    assert after == frames[-1].seq
    # past the end: nothing, and the same position
    assert view(store, events_after=after) == {**whole, "events": [], "lastSeq": after}


def test_the_events_as_the_faces_show_them(store: Store) -> None:
    frames = seed(store)
    shown = view(store, project=run_event)
    assert [e["type"] for e in shown["events"]] == [
        "run_started", "iteration_started", "agent_output", "iteration_finished",
        "run_paused", "run_resumed", "iteration_started", "iteration_finished",
        "run_stopped"]
    # exactly ralph serve's event/loop_* params (the bridge's events with their seq)
    served = {params["seq"]: params for frame in frames for _, params in loop_events(frame)}
    assert shown["events"] == [served[event["seq"]] for event in shown["events"]]
    assert all(event["runId"] == RUN for event in shown["events"])
    started = shown["events"][0]
    assert {k: started[k] for k in ("agent", "maxIterations", "startIteration")} == {
        "agent": "fake", "maxIterations": 5, "startIteration": 1}
    # a page that holds only frames with no event still moves on
    gates = [f.seq for f in frames if f.topic.startswith("gate.")]
    page = view(store, project=run_event, events_after=gates[0] - 1, limit=2)
    assert (page["events"], page["lastSeq"], page["more"]) == ([], gates[1], True)
    RemoteRunResult.model_validate(shown)  # the bridge's documented result


def test_a_store_named_by_its_location(store: Store, tmp_path: Path) -> None:
    seed(store)
    store.flush()
    assert view(str(tmp_path / "store")) == view(store)


def test_runs_in_a_postgresql_store(pg_url: str) -> None:
    with Store(pg_url) as store:
        frames = seed(store, ended=False)
        page = view(store, limit=3)
        assert [e["seq"] for e in page["events"]] == [f.seq for f in frames[:3]]
        assert page["more"] is True
    by_url = view(pg_url, project=run_event)
    assert by_url["status"]["phase"] == "running"
    assert by_url["events"][-1]["type"] == "iteration_finished"
    assert by_url["lastSeq"] == frames[-1].seq


# -- unknown runs and bad queries ---------------------------------------------------------------

def test_an_unknown_run(store: Store) -> None:
    seed(store)
    with pytest.raises(RunNotFound) as caught:
        view(store, "run_nobody")
    assert caught.value.run_id == "run_nobody"
    assert str(caught.value) == ("unknown run run_nobody: the store has no events of it and "
                                 "no Temporal server was named")
    assert view(store, OTHER)["status"]["phase"] == "running"  # one frame is enough


@pytest.mark.parametrize("options", [
    {"run_id": "../etc"}, {"run_id": ""}, {"run_id": "runs/x"}, {"run_id": "a" * 201},
    {"events_after": -1}, {"limit": 0}, {"limit": MAX_LIMIT + 1}])
def test_bad_queries(store: Store, options: dict[str, Any]) -> None:
    seed(store)
    run_id = options.pop("run_id", RUN)
    with pytest.raises(BadRunQuery) as caught:
        view(store, run_id, **options)
    assert "\n" not in str(caught.value) and isinstance(caught.value, ValueError)


# -- where the faces ask ------------------------------------------------------------------------

def test_the_source_from_the_environment() -> None:
    url = "postgresql://ralph:secret@db.example:5432/ralph"
    assert RemoteSource.from_env({}) == RemoteSource(None, "default", None)
    assert RemoteSource.from_env({"RALPH_TEMPORAL": "t:7233", "RALPH_TEMPORAL_NAMESPACE": "ns",
                                  "RALPH_STORE": url}) == RemoteSource("t:7233", "ns", url)
    # a directory is not the shared store: the face's own store is used
    assert RemoteSource.from_env({"RALPH_STORE": "/tmp/store"}).store is None
    assert RemoteSource.from_env({"RALPH_STORE": "postgres://h/db"}).store == "postgres://h/db"
    assert RemoteSource.from_env(NO_REMOTE_ENV) == RemoteSource()


def test_a_face_reads_the_shared_store_not_its_own(store: Store, pg_url: str) -> None:
    local_run = "run_03hbview000000000000000l"  # a run the face's own store only knows
    store.append("run.started", {"run_id": local_run}, stream=f"runs/{local_run}")

    async def go() -> tuple[dict[str, Any], dict[str, Any]]:
        with Store(pg_url) as shared:
            seed(shared)
        remote = RemoteRuns.from_env(lambda: store, {"RALPH_STORE": pg_url})
        local = RemoteRuns.from_env(lambda: store, {"RALPH_STORE": "/elsewhere"})
        try:
            with pytest.raises(RunNotFound):
                await remote.view(local_run)
            with pytest.raises(RunNotFound):
                await local.view(RUN)
            return await remote.view(RUN, limit=2), await local.view(local_run)
        finally:
            remote.close()
            local.close()

    shared, own = asyncio.run(go())
    assert shared["status"]["phase"] == "ended" and len(shared["events"]) == 2
    assert own["runId"] == local_run and own["status"]["phase"] == "running"


# -- Temporal ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def temporal() -> Iterator[TemporalDevServer]:
    with TemporalDevServer() as server:
        yield server


def closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
async def workflow(temporal: TemporalDevServer) -> AsyncIterator[str]:
    """A RalphRun that Temporal runs, on a worker of this process with the workflow only:
    its start activity is never taken, so it stays `starting` and answers its queries."""
    client = await runs.connect(temporal.address)
    queue = f"view-{uuid.uuid4().hex[:8]}"
    run_id = f"run_{uuid.uuid4().hex[:20]}"
    async with Worker(client, task_queue=queue, workflows=[RalphRun]):
        await runs.start(client, RunSpec(run_id=run_id, repo="/nowhere/repo.git",
                                         branch=f"ralph/{run_id}"), queue)
        try:
            yield run_id
        finally:
            if (await runs.handle(client, run_id).describe()).status == RUNNING:
                await runs.handle(client, run_id).terminate("the test is over")


async def test_the_status_from_the_runs_workflow(temporal: TemporalDevServer, store: Store,
                                                 workflow: str) -> None:
    seed(store, workflow, ended=False)  # its events, as its workers would record them
    got = await remote_run(workflow, temporal=temporal.address, namespace="default",
                           store=store, project=run_event)
    assert (got["statusSource"], got["temporalError"]) == ("temporal", None)
    assert got["status"] == {"runId": workflow, "phase": "starting", "iteration": 0,
                             "maxIterations": 0, "done": 0, "total": 0, "paused": False,
                             "stopRequested": False, "lastStatus": None, "lastTask": None,
                             "reason": None, "message": None, "branch": f"ralph/{workflow}",
                             "repo": "/nowhere/repo.git"}
    assert got["events"][0]["type"] == "run_started"
    assert await runs.signal(await runs.connect(temporal.address), workflow, "pause")
    for _ in range(100):  # the signal reaches the workflow, then its answers say so
        paused = await remote_run(workflow, temporal=temporal.address, namespace="default",
                                  store=store, limit=1)
        if paused["status"]["paused"]:
            break
        await asyncio.sleep(0.1)
    assert paused["status"]["paused"] is True and len(paused["events"]) == 1


async def test_a_run_temporal_knows_with_no_events_yet(temporal: TemporalDevServer,
                                                       store: Store, workflow: str) -> None:
    got = await remote_run(workflow, temporal=temporal.address, namespace="default",
                           store=store)
    assert (got["statusSource"], got["events"], got["lastSeq"], got["more"]) == (
        "temporal", [], 0, False)
    assert got["status"]["phase"] == "starting"


async def test_an_ended_run_is_not_asked_of_its_closed_workflow(
        temporal: TemporalDevServer, store: Store, workflow: str) -> None:
    """Its workflow closed and its end recorded: the store's status is final (a query of a
    closed workflow would wait for a worker to replay it)."""
    await runs.handle(await runs.connect(temporal.address), workflow).terminate("done")
    seed(store, workflow)  # with its run.stopped
    got = await remote_run(workflow, temporal=temporal.address, namespace="default",
                           store=store)
    assert (got["statusSource"], got["temporalError"]) == ("store", None)
    assert (got["status"]["phase"], got["status"]["reason"]) == ("ended", "max_iterations")


async def test_a_run_temporal_does_not_know(temporal: TemporalDevServer,
                                            store: Store) -> None:
    with pytest.raises(RunNotFound) as caught:
        await remote_run("run_nobody", temporal=temporal.address, namespace="default",
                         store=store)
    assert str(caught.value) == (f"unknown run run_nobody: the store has no events of it and "
                                 f"Temporal at {temporal.address} (namespace default) does "
                                 f"not know it")
    seed(store)  # the store knows it (Temporal forgot it, or it ran elsewhere): its frames say
    got = await remote_run(RUN, temporal=temporal.address, namespace="default", store=store)
    assert (got["statusSource"], got["status"]["phase"]) == ("store", "ended")
    assert got["temporalError"] == f"Temporal at {temporal.address} does not know run {RUN}"


async def test_a_temporal_that_cannot_be_reached(store: Store) -> None:
    address = closed_port()
    with pytest.raises(TemporalError) as caught:
        await remote_run(RUN, temporal=address, namespace="default", store=store)
    assert str(caught.value) == f"cannot reach Temporal at {address}: connection refused"
    seed(store)
    got = await remote_run(RUN, temporal=address, namespace="default", store=store)
    assert (got["statusSource"], got["status"]["phase"]) == ("store", "ended")
    assert got["temporalError"] == str(caught.value)


# -- the bridge: `remoteRun` --------------------------------------------------------------------

@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / ".ralph").mkdir(parents=True)
    return root


def test_the_bridge_shows_a_run_by_id(project: Path) -> None:
    with Store(project / ".ralph" / "store") as store:
        frames = seed(store)
    with BridgeProcess(project, env=NO_REMOTE_ENV) as bridge:
        got = bridge.call("remoteRun", {"runId": RUN})
        assert set(got) == VIEW_FIELDS and got["statusSource"] == "store"
        assert got["status"]["phase"] == "ended" and got["status"]["lastTask"] == "2"
        assert [e["type"] for e in got["events"]] == [
            "run_started", "iteration_started", "agent_output", "iteration_finished",
            "run_paused", "run_resumed", "iteration_started", "iteration_finished",
            "run_stopped"]
        assert got["events"] == [e for e in map(run_event, frames) if e is not None]
        # after the output: the two gate frames (no event) and the iteration's end
        page = bridge.call("remoteRun", {"runId": RUN, "afterSeq": frames[2].seq, "limit": 3})
        assert [(e["type"], e["seq"]) for e in page["events"]] == [
            ("iteration_finished", frames[5].seq)]
        assert (page["lastSeq"], page["more"]) == (frames[5].seq, True)

        unknown = bridge.error("remoteRun", {"runId": "run_nobody"})
        assert unknown["code"] == -32000
        assert unknown["data"] == {"error": "RunNotFound", "runId": "run_nobody"}
        assert unknown["message"].startswith("unknown run run_nobody: ")
        for bad in ({}, {"runId": "../x"}, {"runId": RUN, "limit": 0},
                    {"runId": RUN, "limit": MAX_LIMIT + 1}, {"runId": RUN, "afterSeq": -1},
                    {"runId": RUN, "afterSeq": "3"}, {"runId": RUN, "after": 3}):
            error = bridge.error("remoteRun", bad)
            assert error["code"] == -32602 and error["data"], (bad, error)

        document = bridge.call("rpc.discover")
        _validator().validate(document)
        method = {m["name"]: m for m in document["methods"]}["remoteRun"]
        assert [p["name"] for p in method["params"]] == ["runId", "afterSeq", "limit"]
        assert {e["code"] for e in method["errors"]} == {-32000}
        assert bridge.call("ping")["ok"] is True
    assert bridge.proc.returncode == 0


async def test_the_bridge_asks_the_temporal_and_store_its_environment_names(
        project: Path, temporal: TemporalDevServer, workflow: str, pg_url: str) -> None:
    with Store(pg_url) as shared:
        frames = seed(shared, workflow, ended=False)
    env = {"RALPH_TEMPORAL": temporal.address, "RALPH_TEMPORAL_NAMESPACE": "default",
           "RALPH_STORE": pg_url}

    def ask() -> tuple[dict[str, Any], dict[str, Any], int | None]:
        with BridgeProcess(project, env=env) as bridge:
            got = bridge.call("remoteRun", {"runId": workflow})
            unknown = bridge.error("remoteRun", {"runId": "run_nobody"})
        return got, unknown, bridge.proc.returncode

    # (in a thread: this loop runs the workflow's worker, which answers the bridge's query)
    got, unknown, code = await asyncio.to_thread(ask)
    assert (got["statusSource"], got["status"]["phase"]) == ("temporal", "starting")
    assert got["status"]["repo"] == "/nowhere/repo.git"  # what Temporal alone knows
    assert got["lastSeq"] == frames[-1].seq  # the shared store's frames
    assert "Temporal at" in unknown["message"] and unknown["data"]["error"] == "RunNotFound"
    assert code == 0
    assert not (project / ".ralph" / "store").exists()  # its own store was never needed


# -- ralph serve: GET /api/remote-runs/{run_id} ------------------------------------------------

def test_serve_shows_a_run_by_id(project: Path) -> None:
    (project / "ralph.toml").write_text('[agents.echo]\nargv = ["sh", "-c", "cat"]\n')
    with Store(project / ".ralph" / "store") as store:
        frames = seed(store)
    env = {**os.environ, **NO_REMOTE_ENV}
    with serving(project, env=env) as served:
        status, got = served.get(f"/api/remote-runs/{RUN}")
        assert status == 200 and set(got) == VIEW_FIELDS
        assert got["events"] == [e for e in map(run_event, frames) if e is not None]
        assert got["status"]["phase"] == "ended" and got["statusSource"] == "store"
        status, page = served.get(f"/api/remote-runs/{RUN}?after={frames[0].seq}&limit=1")
        assert status == 200
        assert [e["type"] for e in page["events"]] == ["iteration_started"]
        assert (page["lastSeq"], page["more"]) == (frames[1].seq, True)

        assert served.get(f"/api/remote-runs/{RUN}", token=None)[0] == 401
        assert served.get(f"/api/remote-runs/{RUN}", token="wrong-token")[0] == 401
        status, body = served.get("/api/remote-runs/run_nobody")
        assert status == 404 and set(body) == {"error"}
        assert body["error"].startswith("unknown run run_nobody: ")
        for query in ("?after=-1", "?after=x", "?limit=0", f"?limit={MAX_LIMIT + 1}",
                      "?limit=1.5"):
            status, body = served.get(f"/api/remote-runs/{RUN}{query}")
            assert status == 400 and set(body) == {"error"}, (query, body)
        status, body = served.get("/api/remote-runs/.hidden")
        assert status == 400 and "invalid run id" in body["error"]
    assert served.proc.returncode == 0

"""`events.subscribe` / `unsubscribe` / `ack` against a real `ac server:start`: events
appended by other processes arrive live, filters apply, an unsubscribed subscription goes
quiet, and a subscription made again after a restart resumes after its last ack."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from ralph.company.events import append_event, envelope
from ralph.controlplane.methods import build_registry
from ralph.controlplane.plane import Plane
from ralph.controlplane.subscriptions import Filters, Sub
from ralph.rpc import Dispatcher
from tests.company.fixtures import populated
from tests.company.server import AC, AcServer, Failure


def events_file(root: Path, ids: dict[str, str]) -> Path:
    return root / "work/projects" / ids["proj"] / "runs" / ids["run"] / "events.jsonl"


def note(root: Path, ids: dict[str, str], n: int, type_: str = "note") -> None:
    """An event appended by this test's process (not the server's); its ts_monotonic_ms is
    its own (events written in one millisecond share one, which acks treat at least once)."""
    event = envelope(ids["run"], type_, {"n": n})
    event["ts_monotonic_ms"] = 1_000 + n
    append_event(events_file(root, ids), event)


async def test_events_from_other_processes_arrive_filtered(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    ids = populated(root)
    note(root, ids, 0)  # history: not sent without a backfill
    server = await AcServer.start()
    try:
        everything = await server.call("events.subscribe", {"workspace_dir": str(root),
                                                            "subscription_id": "all"})
        assert everything == {"subscription_id": "all"}
        await server.call("events.subscribe", {"workspace_dir": str(root),
                                               "subscription_id": "runs",
                                               "event_types": ["run.started"]})
        note(root, ids, 1)
        first = await server.next_notification()
        assert first["subscription_id"] == "all" and first["project_id"] == ids["proj"]
        assert first["event"]["payload"] == {"n": 1}
        # A run made by another process (`ac rpc:call`): both subscriptions see run.started.
        made = subprocess.run([AC, "rpc:call", "--method", "run.create", "--params",
                               orjson.dumps({"workspace_dir": str(root),
                                             "project_id": ids["proj"],
                                             "agent_id": ids["agent"],
                                             "provider": "p"}).decode()],
                              capture_output=True, text=True, timeout=60, check=True)
        run_id = orjson.loads(made.stdout)["run_id"]
        got = [await server.next_notification(), await server.next_notification()]
        assert sorted(n["subscription_id"] for n in got) == ["all", "runs"]
        assert {n["event"]["type"] for n in got} == {"run.started"}
        assert {n["event"]["run_id"] for n in got} == {run_id}

        assert await server.call("events.unsubscribe", {"subscription_id": "runs"}) == {
            "removed": True}
        assert await server.call("events.unsubscribe", {"subscription_id": "runs"}) == {
            "removed": False}
        note(root, ids, 2, "run.started")
        after = await server.next_notification()  # only "all" is left to hear it
        assert after["subscription_id"] == "all" and after["event"]["payload"] == {"n": 2}
        assert server.notifications.empty()
    finally:
        assert await server.stop() == 0


async def test_a_subscription_made_again_resumes_after_its_last_ack(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    ids = populated(root)
    params = {"workspace_dir": str(root), "subscription_id": "desk"}
    server = await AcServer.start()
    try:
        await server.call("events.subscribe", params)
        for n in range(3):
            note(root, ids, n)
        got = [(await server.next_notification())["event"] for _ in range(3)]
        assert [e["payload"]["n"] for e in got] == [0, 1, 2]
        # The client has handled events 0 and 1, not 2.
        assert await server.call("events.ack", {
            "subscription_id": "desk",
            "last_ack_ts_monotonic_ms": got[1]["ts_monotonic_ms"]}) == {"ok": True}
    finally:
        assert await server.stop() == 0
    note(root, ids, 3)  # while no server runs
    again = await AcServer.start()
    try:
        await again.call("events.subscribe", params)
        resumed = [(await again.next_notification())["event"]["payload"]["n"]
                   for _ in range(2)]
        assert resumed == [2, 3]
        note(root, ids, 4)
        assert (await again.next_notification())["event"]["payload"] == {"n": 4}
        await again.call("events.ack", {"subscription_id": "desk"})  # everything so far
    finally:
        assert await again.stop() == 0
    third = await AcServer.start()
    try:
        await third.call("events.subscribe", params)
        note(root, ids, 5)
        assert (await third.next_notification())["event"]["payload"] == {"n": 5}
        try:
            await third.call("events.ack", {"subscription_id": "other"})
        except Failure as failure:
            assert failure.error == {"code": -32000,
                                     "message": "Unknown subscription_id: other",
                                     "data": {"subscription_id": "other"}}
        else:
            raise AssertionError("an unknown subscription was acknowledged")
    finally:
        assert await third.stop() == 0
    assert asyncio.get_running_loop()  # (the servers ended with the loop still running)


def test_an_ack_never_reaches_past_the_first_event_of_its_millisecond() -> None:
    sub = Sub("s", None, Filters())
    for ts, start in ((5, 0), (7, 10), (7, 20), (9, 30)):
        sub.unacked.append((ts, "p/r", start))
    sub.acknowledge(7)
    assert [start for _ts, _key, start in sub.unacked] == [20, 30]
    sub.acknowledge(8)  # none is 8: up to the last below it
    assert [start for _ts, _key, start in sub.unacked] == [30]
    sub.acknowledge(None)
    assert not sub.unacked


async def test_backfill_sends_the_most_recent_matches_oldest_first(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    ids = populated(root)
    for n in range(30):
        note(root, ids, n, "tick" if n % 3 else "tock")  # tock: 0, 3, 6, ..., 27
    server = await AcServer.start()
    try:
        await server.call("events.subscribe", {
            "workspace_dir": str(root), "subscription_id": "b", "event_types": ["tock"],
            "backfill_limit": 4})
        got = [await server.next_notification() for _ in range(4)]
        # The original sent the oldest 4 events and then filtered them: [0, 3] only.
        assert [n["event"]["payload"]["n"] for n in got] == [18, 21, 24, 27]
        assert {n["project_id"] for n in got} == {ids["proj"]}
        note(root, ids, 30, "tock")
        assert (await server.next_notification())["event"]["payload"] == {"n": 30}
    finally:
        assert await server.stop() == 0


WRITER = """
import sys, time
from pathlib import Path
from ralph.company.events import append_event, envelope
path, run, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
for n in range(count):
    append_event(path, envelope(run, "tick", {"n": n}))
    time.sleep(0.002)
"""


async def test_backfill_and_live_meet_without_a_gap_or_a_repeat(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    ids = populated(root)
    path = events_file(root, ids)
    count = 400
    writer = await asyncio.create_subprocess_exec(
        sys.executable, "-c", WRITER, str(path), ids["run"], str(count))
    server = await AcServer.start()
    try:
        while path.read_bytes().count(b"\n") < 40:  # the writer is well under way
            await asyncio.sleep(0.01)
        await server.call("events.subscribe", {"workspace_dir": str(root),
                                               "backfill_limit": 25})
        seen: list[int] = []
        while not seen or seen[-1] != count - 1:
            seen.append((await server.next_notification())["event"]["payload"]["n"])
        assert len(seen) >= 25
        assert seen == list(range(seen[0], count)), "a gap or a repeat"
    finally:
        await writer.wait()
        assert await server.stop() == 0


async def wait_until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(30):
        while not condition():
            await asyncio.sleep(0.01)


async def call(dispatcher: Dispatcher, method: str, params: dict[str, Any]) -> Any:
    raw = await dispatcher.handle(orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": method,
                                                "params": params}))
    assert raw is not None
    answer = orjson.loads(raw)
    assert "result" in answer, answer
    return answer["result"]


async def test_an_ack_while_a_batch_is_being_sent_keeps_the_rest_for_a_resume(
        tmp_path: Path) -> None:
    root = tmp_path / "ws"
    ids = populated(root)
    plane = Plane()
    dispatcher = Dispatcher(build_registry(plane))
    sent: list[int] = []
    gate = asyncio.Event()

    async def slow_client(_method: str, params: dict[str, Any]) -> None:
        sent.append(params["event"]["payload"]["n"])
        if len(sent) == 10:
            await gate.wait()  # the client stops reading in the middle of the batch

    plane.notify = slow_client
    params = {"workspace_dir": str(root), "subscription_id": "s"}
    await call(dispatcher, "events.subscribe", params)
    for n in range(100):
        note(root, ids, n)
    await wait_until(lambda: len(sent) == 10)
    # Events 0..8 were sent; 9 is being sent; the rest were read from the file, not sent.
    assert await call(dispatcher, "events.ack", {"subscription_id": "s"}) == {"ok": True}
    gate.set()
    await plane.close()

    again = Plane()
    resumed: list[int] = []

    async def client(_method: str, params: dict[str, Any]) -> None:
        resumed.append(params["event"]["payload"]["n"])

    again.notify = client
    await call(Dispatcher(build_registry(again)), "events.subscribe", params)
    await wait_until(lambda: bool(resumed) and resumed[-1] == 99)
    await again.close()
    assert resumed == list(range(9, 100))


async def test_a_subscription_without_a_workspace_follows_each_one_named(
        tmp_path: Path) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    ids_one, ids_two = populated(first), populated(second)
    plane = Plane()
    dispatcher = Dispatcher(build_registry(plane))
    got: list[tuple[str, str]] = []

    async def client(_method: str, params: dict[str, Any]) -> None:
        got.append((params["project_id"], params["event"]["type"]))

    plane.notify = client
    await call(dispatcher, "events.subscribe", {"subscription_id": "everything"})
    await call(dispatcher, "run.list", {"workspace_dir": str(first)})
    note(first, ids_one, 1)
    # The run.started of a run made by the first request that names the second workspace.
    made = await call(dispatcher, "run.create", {
        "workspace_dir": str(second), "project_id": ids_two["proj"],
        "agent_id": ids_two["agent"], "provider": "p"})
    await wait_until(lambda: len(got) == 2)
    await plane.close()
    assert sorted(got) == sorted([(ids_one["proj"], "note"), (ids_two["proj"], "run.started")])
    assert made["run_id"]


async def test_two_subscribes_with_one_id_leave_one_subscription(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    ids = populated(root)
    plane = Plane()
    dispatcher = Dispatcher(build_registry(plane))
    got: list[int] = []

    async def client(_method: str, params: dict[str, Any]) -> None:
        got.append(params["event"]["payload"]["n"])

    plane.notify = client
    params = {"workspace_dir": str(root), "subscription_id": "twice"}
    await asyncio.gather(call(dispatcher, "events.subscribe", params),
                         call(dispatcher, "events.subscribe", params))
    note(root, ids, 1)
    await wait_until(lambda: got == [1])
    assert await call(dispatcher, "events.unsubscribe", {"subscription_id": "twice"}) == {
        "removed": True}
    note(root, ids, 2)
    await call(dispatcher, "events.subscribe", {"workspace_dir": str(root),
                                                "subscription_id": "witness"})
    note(root, ids, 3)
    await wait_until(lambda: 3 in got)
    await plane.close()
    assert got == [1, 3]  # once each, and nothing from the removed one


async def test_stdin_closed_while_a_collect_waits_stops_the_session_and_answers(
        tmp_path: Path) -> None:
    root = tmp_path / "ws"
    ids = populated(root)
    server = await AcServer.start()
    made = await server.call("run.create", {"workspace_dir": str(root),
                                            "project_id": ids["proj"],
                                            "agent_id": ids["agent"], "provider": "p"})
    ref = (await server.call("session.launch", {
        "workspace_dir": str(root), "project_id": ids["proj"], "run_id": made["run_id"],
        "argv": ["sleep", "30"]}))["session_ref"]
    state_file = Path(made["run_dir"]) / "session.json"
    await wait_until(lambda: state_file.exists()
                     and orjson.loads(state_file.read_bytes())["pid"] is not None)
    collect = asyncio.create_task(server.call("session.collect", {"session_ref": ref}))
    await asyncio.sleep(0)  # (the request is written before stdin closes)
    assert await server.stop() == 0
    done = await collect
    assert done["status"] == "stopped" and done["signal"] == "SIGTERM"
    state = orjson.loads(state_file.read_bytes())
    assert state["status"] == "stopped" and state["error"] == "server stopped"

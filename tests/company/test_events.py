"""`events.subscribe` / `unsubscribe` / `ack` against a real `ac server:start`: events
appended by other processes arrive live, filters apply, an unsubscribed subscription goes
quiet, and a subscription made again after a restart resumes after its last ack."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import orjson

from ralph.company.events import append_event, envelope
from ralph.controlplane.subscriptions import Filters, Sub
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
                                             "project_id": ids["proj"], "agent_id": "a",
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

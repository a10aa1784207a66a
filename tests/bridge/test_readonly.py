"""A bridge that has not written anything yet leaves no `.ralph/store` behind; its first
step creates the store, and the step's events still reach the client."""

from __future__ import annotations

import shutil

from tests.bridge.client import BridgeProcess
from tests.loop.conftest import Project


def test_a_bridge_that_only_looks_creates_no_store(project: Project) -> None:
    store = project.root / ".ralph" / "store"
    shutil.rmtree(store, ignore_errors=True)
    with BridgeProcess(project.root) as bridge:
        bridge.wait_event("bridge_started")
        assert bridge.call("ping")["ok"] is True
        assert bridge.call("status", {})["total"] == 3
        assert bridge.close_stdin() == 0
    assert bridge.events[-1]["type"] == "bridge_stopped"
    assert not store.exists()


def test_the_first_step_creates_the_store_and_its_events_arrive(project: Project) -> None:
    store = project.root / ".ralph" / "store"
    shutil.rmtree(store, ignore_errors=True)
    project.plan({"tasks": {"1": [{"tick": True, "print": ["done"]}]}})
    with BridgeProcess(project.root) as bridge:
        bridge.wait_event("bridge_started")
        result = bridge.call("step", {})
        assert result["task_id"] == "1"
        bridge.wait_event("iteration_finished")
        assert bridge.close_stdin() == 0
    assert (store / "streams").is_dir()


def test_a_bridge_that_only_looks_leaves_the_empty_store_of_init_empty(
        project: Project) -> None:
    """`ralph init` makes an empty `.ralph/store/`: a bridge asked only ping, status, stop,
    pause and resume (no run to act on) writes nothing into it."""
    store = project.root / ".ralph" / "store"
    assert store.is_dir() and list(store.iterdir()) == []  # as `ralph init` left it
    with BridgeProcess(project.root) as bridge:
        bridge.wait_event("bridge_started")
        assert bridge.call("ping")["ok"] is True
        assert bridge.call("status", {})["running"] is False
        assert bridge.call("stop") == {"ok": True, "stopped": False}
        for method in ("pause", "resume"):
            reply = bridge.call(method)
            assert (reply["ok"], reply["paused"]) == (False, False), (method, reply)
        assert bridge.close_stdin() == 0
    assert bridge.events[-1]["type"] == "bridge_stopped"
    assert list(store.iterdir()) == []

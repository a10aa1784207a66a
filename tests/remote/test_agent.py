"""`ralph serve`'s agent methods and events with a real WebSocket client: agent/run,
agent/stop, agent/respond (a permission request answered from the phone), session/list,
and the document's error codes."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import websockets

from tests.cli.helpers import RALPH, TIMEOUT
from tests.remote.test_serve import TOKEN, Served, serving

FAKE_CLAUDE = Path(__file__).parents[1] / "sessions" / "fake_claude.py"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    root = tmp_path / "proj"
    (root / ".ralph").mkdir(parents=True)
    (root / "ralph.toml").write_text(
        '[loop]\ndefault_agent = "echo"\n\n'
        '[agents.echo]\nargv = ["sh", "-c", "cat; echo; echo finished"]\n\n'
        '[agents.slow]\nargv = ["sh", "-c", "cat >/dev/null; exec sleep 300"]\n\n'
        '[agents.missing]\nargv = ["/nonexistent/agent"]\n\n'
        f'[agents.hooked]\nadapter = "claude"\n'
        f"argv = {json.dumps([sys.executable, str(FAKE_CLAUDE), '-p'])}\n")
    with serving(root) as served:
        yield served


class Phone:
    """A connected client: calls, and the notifications it received meanwhile."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.events: list[dict[str, Any]] = []
        self._id = 0

    async def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self._id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self._id, "method": method}
        if params is not None:
            message["params"] = params
        await self.ws.send(json.dumps(message))
        while True:
            answer = json.loads(await asyncio.wait_for(self.ws.recv(), TIMEOUT))
            if answer.get("id") == self._id:
                return dict(answer)
            self.events.append(answer)

    async def until(self, method: str, **match: Any) -> dict[str, Any]:
        """The first notification `method` whose params have `match` (seen or to come)."""
        while True:
            for event in self.events:
                if event.get("method") == method and all(
                        event["params"].get(k) == v for k, v in match.items()):
                    return dict(event["params"])
            self.events.append(json.loads(await asyncio.wait_for(self.ws.recv(), TIMEOUT)))


def on_phone(served: Served, script: Any) -> Any:
    async def go() -> Any:
        async with websockets.connect(served.ws + f"?token={TOKEN}") as ws:
            return await script(Phone(ws))

    return asyncio.run(go())


def test_an_agent_runs_and_every_client_sees_it(served: Served) -> None:
    async def script(phone: Phone) -> dict[str, Any]:
        started = await phone.call("agent/run", {"prompt": "say hello"})
        session_id = started["result"]["session_id"]
        assert started["result"] == {"status": "started", "session_id": session_id,
                                     "agent_type": "echo"}
        begun = await phone.until("event/agent_started", session_id=session_id)
        assert begun["agent_type"] == "echo" and begun["prompt"] == "say hello"
        stopped = await phone.until("event/agent_stopped", session_id=session_id)
        # the lines the agent printed at once may come merged into one event
        outputs = [e["params"] for e in phone.events
                   if e.get("method") == "event/agent_output"]
        assert "\n".join(o["content"] for o in outputs).split("\n")[-1] == "finished"
        assert {o["type"] for o in outputs} == {"text"}
        assert begun["seq"] < outputs[0]["seq"] < stopped["seq"]
        assert stopped["reason"] == "completed"
        await phone.until("event/agent_status", session_id=session_id, state="idle")
        status = (await phone.call("status/get"))["result"]
        assert status["session_id"] == session_id and status["agent_state"] == "idle"
        listed = (await phone.call("session/list", {"limit": 5}))["result"]
        return dict(listed)

    listed = on_phone(served, script)
    assert listed["total"] >= 1
    [mine] = [s for s in listed["sessions"] if s["kind"] == "ralph"]
    assert mine["agent_type"] == "echo" and mine["summary"] == "say hello"
    assert mine["status"] == "completed"


def test_one_agent_at_a_time_and_stop(served: Served) -> None:
    async def script(phone: Phone) -> None:
        first = (await phone.call("agent/run", {"prompt": "wait", "agent_type": "slow"}))
        session_id = first["result"]["session_id"]
        busy = await phone.call("agent/run", {"prompt": "again"})
        assert busy["error"]["code"] == -32001
        assert busy["error"]["message"] == "Agent already running"
        assert busy["error"]["data"]["session_id"] == session_id
        assert (await phone.call("agent/stop"))["result"] == {"status": "stopped"}
        stopped = await phone.until("event/agent_stopped", session_id=session_id)
        assert stopped["reason"] == "stopped"
        again = await phone.call("agent/stop")
        assert again["error"]["code"] == -32002
        assert again["error"]["message"] == "Agent not running"
        respond = await phone.call("agent/respond", {"tool_use_id": "x", "response": "ok"})
        assert respond["error"]["code"] == -32002

    on_phone(served, script)


def test_the_documents_error_codes(served: Served) -> None:
    async def script(phone: Phone) -> None:
        unknown = await phone.call("agent/run", {"prompt": "x", "agent_type": "nobody"})
        assert unknown["error"]["code"] == -32004
        assert unknown["error"]["data"]["agent_type"] == "nobody"
        missing = await phone.call("agent/run", {"prompt": "x", "agent_type": "missing"})
        assert missing["error"]["code"] == -32004
        assert missing["error"]["data"]["reason"] == "/nonexistent/agent does not exist"
        no_id = await phone.call("agent/run", {"prompt": "x", "mode": "continue"})
        assert no_id["error"]["code"] == -32602 and "session_id" in no_id["error"]["data"]
        gone = await phone.call("agent/run", {"prompt": "x", "mode": "continue",
                                              "session_id": "ses_nope"})
        assert gone["error"]["code"] == -32012
        assert gone["error"]["data"] == {"session_id": "ses_nope"}
        empty = await phone.call("agent/run", {"prompt": ""})
        assert empty["error"]["code"] == -32602

    on_phone(served, script)


def test_a_permission_request_is_answered_from_the_phone(served: Served) -> None:
    async def script(phone: Phone) -> None:
        started = await phone.call("agent/run", {
            "prompt": "RUN: echo yes > yes.txt\nRUN: echo no > no.txt",
            "agent_type": "hooked", "approvals": "ask"})
        session_id = started["result"]["session_id"]
        asked = await phone.until("event/agent_output", session_id=session_id,
                                  type="permission_request")
        assert (asked["tool_use_id"], asked["tool_name"]) == ("toolu_1", "Bash")
        assert asked["input"] == {"command": "echo yes > yes.txt"}
        await phone.until("event/agent_status", session_id=session_id, state="waiting")
        assert (await phone.call("status/get"))["result"]["agent_state"] == "waiting"
        # what a client that connects now shows (an extension)
        pending = (await phone.call("agent/pending"))["result"]["requests"]
        assert pending == [{"session_id": session_id, "agent_type": "hooked",
                            "tool_use_id": "toolu_1", "tool_name": "Bash",
                            "input": {"command": "echo yes > yes.txt"},
                            "seq": asked["seq"], "ts": pending[0]["ts"]}]
        sent = await phone.call("agent/respond", {"tool_use_id": "toolu_1",
                                                  "response": "approved"})
        assert sent["result"] == {"status": "sent", "tool_use_id": "toolu_1",
                                  "decision": "allow"}
        twice = await phone.call("agent/respond", {"tool_use_id": "toolu_1",
                                                   "response": "approved"})
        assert twice["error"]["code"] == -32003
        await phone.until("event/agent_output", session_id=session_id,
                          type="permission_request", tool_use_id="toolu_2")
        refused = await phone.call("agent/respond", {"tool_use_id": "toolu_2",
                                                     "response": "not on a Friday"})
        assert refused["result"]["decision"] == "deny"
        final = await phone.until("event/agent_stopped", session_id=session_id)
        assert final["reason"] == "completed"
        assert (await phone.call("agent/pending"))["result"] == {"requests": []}
        text = await phone.until("event/agent_output", session_id=session_id,
                                 type="text")
        assert text["content"].startswith("ran: echo yes > yes.txt")
        assert "not on a Friday" in text["content"]

    on_phone(served, script)
    assert (served.root / "yes.txt").exists() and not (served.root / "no.txt").exists()


def _until_pending(root: Path, session_id: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        shown = subprocess.run([*RALPH, "agent", "show", session_id, "--json"], cwd=root,
                               capture_output=True, text=True, timeout=TIMEOUT, check=True)
        if json.loads(shown.stdout)["pending_approvals"]:
            return
        time.sleep(0.1)
    raise AssertionError(f"session {session_id} asked nothing")


def test_continuing_takes_the_sessions_agent_and_a_terminals_request_is_answered(
        served: Served) -> None:
    """`continue` without agent_type continues with the session's own agent; a permission
    request of a session started in a terminal is answered from the phone (found by its
    tool_use_id); stopping the server stops its agents before the clients are told."""
    detached = subprocess.run([*RALPH, "agent", "run", "RUN: echo t > t.txt", "--agent",
                               "hooked", "--approvals", "ask", "--detach"], cwd=served.root,
                              capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert detached.returncode == 0, detached.stderr
    terminal_session = detached.stdout.strip()

    async def script(phone: Phone) -> None:
        first = await phone.call("agent/run", {"prompt": "one", "agent_type": "slow"})
        first_id = first["result"]["session_id"]
        await phone.call("agent/stop")
        again = await phone.call("agent/run", {"prompt": "two", "mode": "continue",
                                               "session_id": first_id})
        # the session's own agent (slow, not the default echo) was asked: it cannot continue
        assert again["error"]["code"] == -32003
        assert again["error"]["data"]["agent_type"] is None
        assert "its agent 'slow' reported no conversation id" in \
            again["error"]["data"]["reason"]
        # Its request may have come before this client connected (events are not replayed
        # without since_seq): look for it in the store, as `ralph agent show` does.
        await asyncio.to_thread(_until_pending, served.root, terminal_session)
        sent = await phone.call("agent/respond", {"tool_use_id": "toolu_1",
                                                  "response": "approved"})
        assert sent["result"]["decision"] == "allow"
        await phone.until("event/agent_stopped", session_id=terminal_session)
        third = await phone.call("agent/run", {"prompt": "three", "agent_type": "slow"})
        await phone.call("shutdown")
        # the agent's end comes before the server closes the connection
        stopped = await phone.until("event/agent_stopped",
                                    session_id=third["result"]["session_id"])
        assert stopped["reason"] == "stopped"

    try:
        on_phone(served, script)
    finally:  # the terminal's session, whatever happened
        subprocess.run([*RALPH, "agent", "stop", terminal_session], cwd=served.root,
                       capture_output=True, timeout=TIMEOUT, check=False)
    assert (served.root / "t.txt").exists()
    assert served.proc.wait(TIMEOUT) == 0

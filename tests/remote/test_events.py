"""`ralph serve`'s event stream with a real WebSocket client: a client that reconnects with
`since_seq` catches up with no gap and no duplicate; `session/watch` replays a Ralph
session's history and follows a CLI's own conversation; the legacy command format and its
event shape."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import websockets

from ralph.store import Store
from tests.cli.helpers import TIMEOUT
from tests.remote.test_agent import Phone
from tests.remote.test_serve import TOKEN, Served, serving


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    root = tmp_path / "proj"
    (root / ".ralph").mkdir(parents=True)
    (root / "ralph.toml").write_text(
        '[loop]\ndefault_agent = "echo"\n\n'
        '[agents.echo]\nargv = ["sh", "-c", "cat; echo; echo finished"]\n\n'
        '[agents.noisy]\nargv = ["sh", "-c", "cat >/dev/null; echo warning: low disk >&2; '
        'echo the answer"]\n')
    claude_home = tmp_path / "claude-home"
    folder = claude_home / "projects" / "".join(
        c if c.isalnum() else "-" for c in str(root))
    folder.mkdir(parents=True)
    with serving(root, env={**os.environ, "CLAUDE_CONFIG_DIR": str(claude_home)}) as served:
        served.claude_folder = folder  # type: ignore[attr-defined]
        yield served


async def connect(served: Served) -> Any:
    return await websockets.connect(served.ws + f"?token={TOKEN}")


async def run_to_end(phone: Phone, prompt: str) -> str:
    session_id = (await phone.call("agent/run", {"prompt": prompt}))["result"]["session_id"]
    await phone.until("event/agent_stopped", session_id=session_id)
    await phone.until("event/agent_status", session_id=session_id, state="idle")  # its last
    return str(session_id)


def seqs(events: list[dict[str, Any]]) -> list[int]:
    return [e["params"]["seq"] for e in events
            if "method" in e and "seq" in e.get("params", {})]


def others(events: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [(e["method"], e["params"]) for e in events
            if e["method"] != "event/agent_output"]


def output_text(events: list[dict[str, Any]]) -> str:
    return "\n".join(e["params"]["content"] for e in events
                     if e["method"] == "event/agent_output")


async def drain(ws: Any, quiet_s: float = 0.5) -> list[dict[str, Any]]:
    """What arrives until nothing has for `quiet_s`."""
    got: list[dict[str, Any]] = []
    while True:
        try:
            got.append(json.loads(await asyncio.wait_for(ws.recv(), quiet_s)))
        except TimeoutError:
            return got


def test_a_client_that_reconnects_catches_up_without_gap_or_duplicate(
        served: Served) -> None:
    async def go() -> None:
        watcher = Phone(await connect(served))
        first = (await watcher.call("initialize", {}))["result"]
        assert first["replayed"] == 0 and isinstance(first["last_seq"], int)
        one = await run_to_end(watcher, "first")
        seen = seqs(watcher.events)
        await watcher.ws.close()  # it goes away; a session runs meanwhile
        other = Phone(await connect(served))
        two = await run_to_end(other, "second")
        missed = [e for e in other.events if e.get("method", "").startswith("event/agent")]
        await other.ws.close()

        back = Phone(await connect(served))
        answer = (await back.call("initialize", {"since_seq": max(seen)}))["result"]
        replayed = [e for e in back.events if "seq" in e.get("params", {})]
        assert answer["replayed"] == len(replayed)
        # the same events, in order (live, output that came at once is merged into one
        # event: a replay sends it piece by piece)
        assert others(replayed) == others(missed)
        assert output_text(replayed) == output_text(missed)
        assert seqs(replayed)[-1] == seqs(missed)[-1]
        assert {e["params"]["session_id"] for e in replayed} == {two}
        assert seqs(replayed) == sorted(seqs(replayed)) and min(seqs(replayed)) > max(seen)
        three = await run_to_end(back, "third")  # then live, after the replay
        live = [e for e in back.events[len(replayed):] if "seq" in e.get("params", {})]
        assert live and {e["params"]["session_id"] for e in live} == {three}
        assert min(seqs(live)) > max(seqs(replayed))
        await back.ws.close()
        assert one != two != three

    asyncio.run(go())


def test_a_reconnect_with_the_position_initialize_gave_misses_nothing(
        served: Served) -> None:
    async def go() -> None:
        first = Phone(await connect(served))
        position = (await first.call("initialize"))["result"]["last_seq"]
        await first.ws.close()  # no event came: initialize's last_seq is where to resume
        other = Phone(await connect(served))
        session_id = await run_to_end(other, "meanwhile")
        await other.ws.close()
        back = Phone(await connect(served))
        answer = (await back.call("initialize", {"since_seq": position}))["result"]
        assert answer["replayed"] > 0
        assert back.events[0]["method"] == "event/agent_started"
        assert back.events[0]["params"]["session_id"] == session_id
        again = (await back.call("initialize", {"since_seq": position}))["result"]
        assert again["replayed"] == 0  # what it has had already is not sent twice
        bad = await back.call("initialize", {"since_seq": -1})
        assert bad["error"]["code"] == -32602 and "since_seq" in json.dumps(bad["error"])
        await back.ws.close()

    asyncio.run(go())


def test_session_watch_replays_a_sessions_history_and_unwatch(served: Served) -> None:
    async def go() -> None:
        runner = Phone(await connect(served))
        session_id = await run_to_end(runner, "history please")
        await runner.ws.close()
        phone = Phone(await connect(served))
        watched = (await phone.call("session/watch", {"session_id": session_id}))["result"]
        history = [e for e in phone.events if e.get("params", {}).get("replay")]
        assert watched == {"status": "watching", "session_id": session_id,
                           "watching": True, "replayed": len(history)}
        methods = [e["method"] for e in history]
        assert methods[0] == "event/agent_started" and "event/agent_stopped" in methods
        assert any(e["params"].get("content") == "finished" for e in history)
        assert {e["params"]["session_id"] for e in history} == {session_id}
        missing = await phone.call("session/watch", {"session_id": "nope"})
        assert missing["error"]["code"] == -32012
        assert missing["error"]["data"] == {"session_id": "nope"}
        empty = await phone.call("session/watch", {"session_id": ""})
        assert empty["error"]["code"] == -32602
        assert (await phone.call("session/unwatch"))["result"] == {
            "status": "unwatched", "session_id": session_id, "watching": False}
        assert (await phone.call("session/unwatch"))["result"]["session_id"] is None
        await phone.ws.close()

    asyncio.run(go())


def claude_line(kind: str, text: str, stamp: str) -> str:
    return json.dumps({"type": kind, "timestamp": stamp,
                       "message": {"role": kind, "content": text}}) + "\n"


def test_session_watch_follows_a_clis_own_conversation(served: Served) -> None:
    conversation = "0b8f6f0e-1111-4222-8333-944445555666"
    transcript = served.claude_folder / f"{conversation}.jsonl"  # type: ignore[attr-defined]
    transcript.write_text(claude_line("user", "fix the bug", "2026-11-27T10:00:00Z")
                          + claude_line("assistant", "Looking.", "2026-11-27T10:00:01Z"))

    async def go() -> None:
        phone = Phone(await connect(served))
        session_id = f"claude:{conversation}"
        watched = (await phone.call("session/watch", {"session_id": session_id}))["result"]
        assert watched["replayed"] == 2
        assert [(e["method"], e["params"]["role"], e["params"]["content"],
                 e["params"]["replay"]) for e in phone.events] == [
            ("event/agent_message", "user", "fix the bug", True),
            ("event/agent_message", "assistant", "Looking.", True)]
        with transcript.open("a") as handle:  # the CLI goes on, a line at a time
            handle.write(claude_line("assistant", "Fixed it.", "2026-11-27T10:00:02Z"))
        live = await phone.until("event/agent_message", content="Fixed it.")
        assert live == {"session_id": session_id, "role": "assistant",
                        "content": "Fixed it.", "timestamp": "2026-11-27T10:00:02Z"}
        await phone.call("session/unwatch")
        with transcript.open("a") as handle:
            handle.write(claude_line("assistant", "After.", "2026-11-27T10:00:03Z"))
        later = await drain(phone.ws, 1.5)
        assert not [e for e in later if e.get("params", {}).get("content") == "After."]
        await phone.ws.close()

    asyncio.run(go())


async def legacy_answer(ws: Any) -> dict[str, Any]:
    """The next message that is not an event every client gets (a file's change: the
    project's directory is watched)."""
    while True:
        message = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
        if message.get("event") not in ("file_changed", "git_status_changed", "heartbeat"):
            return dict(message)


def test_legacy_commands_get_legacy_answers_and_events(served: Served) -> None:
    async def go() -> None:
        ws = await connect(served)
        await ws.send(json.dumps({"command": "get_status", "request_id": "r1"}))
        warning = await legacy_answer(ws)
        assert warning["event"] == "deprecation_warning"
        assert warning["payload"]["migration"]["run_claude"] == "agent/run"
        status = await legacy_answer(ws)
        assert status["event"] == "status_response" and status["request_id"] == "r1"
        assert status["payload"]["repo_path"] == str(served.root)
        assert status["payload"]["claude_state"] == status["payload"]["agent_state"]
        assert "timestamp" in status

        await ws.send(json.dumps({"command": "get_file", "payload": {"path": "../x"},
                                  "request_id": 2}))
        error = await legacy_answer(ws)
        assert error["event"] == "error" and error["request_id"] == 2
        assert error["payload"]["code"] == "FILE_NOT_FOUND"
        assert error["payload"]["details"] == {"path": "../x"}

        (served.root / "hello.txt").write_text("hi\n")
        await ws.send(json.dumps({"command": "get_file", "payload": {"path": "hello.txt"},
                                  "request_id": "f"}))
        content = await legacy_answer(ws)
        assert (content["event"], content["request_id"]) == ("file_content", "f")
        assert content["payload"] == {"path": "hello.txt", "content": "hi\n", "size": 3,
                                      "truncated": False, "encoding": "utf-8"}

        await ws.send(json.dumps({"command": "fly", "request_id": "r3"}))
        unknown = await legacy_answer(ws)
        assert unknown["payload"] == {"code": "UNKNOWN_COMMAND",
                                      "message": "Unknown command: fly",
                                      "request_id": "r3"}

        await ws.send(json.dumps({"command": "run_claude", "payload": {"prompt": ""}}))
        invalid = await legacy_answer(ws)
        assert invalid["event"] == "error" and invalid["payload"]["code"] == "INVALID_PAYLOAD"
        assert invalid["payload"]["rpc_code"] == -32602

        await ws.send(json.dumps({"command": "run_claude", "payload": {"prompt": "hi"},
                                  "request_id": "r4"}))
        names: list[str] = []
        session_id = None
        while True:  # run_claude: no answer, the events say it
            message = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
            assert set(message) >= {"event", "timestamp", "payload"}, message
            names.append(message["event"])
            session_id = session_id or message["payload"].get("session_id")
            if "agent_stopped" in names and message["event"] == "agent_status":
                break
        assert names[0] == "agent_started" and "agent_output" in names

        await ws.send(json.dumps({"command": "stop_claude", "request_id": "r5"}))
        not_running = await legacy_answer(ws)
        assert not_running["payload"]["code"] == "CLAUDE_NOT_RUNNING"

        await ws.send(json.dumps({"command": "respond_to_claude", "request_id": "r6",
                                  "payload": {"tool_use_id": "toolu_9",
                                              "response": "approved"}}))
        not_asked = await legacy_answer(ws)
        assert not_asked["event"] == "error" and not_asked["request_id"] == "r6"
        assert not_asked["payload"]["code"] == "CLAUDE_NOT_RUNNING"

        await ws.send(json.dumps({"command": "watch_session", "request_id": "r7",
                                  "payload": {"session_id": session_id}}))
        history = []
        while True:  # its history first (this connection saw it live: nothing is older)
            message = await legacy_answer(ws)
            if message["event"] == "session_watch_started":
                break
            history.append(message)
        assert all(m["payload"].get("replay") for m in history)
        assert message["request_id"] == "r7"
        assert message["payload"] == {"status": "watching", "session_id": session_id,
                                      "watching": True, "replayed": len(history)}
        await ws.send(json.dumps({"command": "watch_session",
                                  "payload": {"session_id": "nope"}}))
        missing = await legacy_answer(ws)
        assert missing["payload"]["code"] == "SESSION_NOT_FOUND"

        await ws.send(json.dumps({"command": "unwatch_session"}))
        stopped = await legacy_answer(ws)
        assert stopped["event"] == "session_watch_stopped"
        assert stopped["payload"] == {"status": "unwatched", "session_id": session_id,
                                      "watching": False, "reason": "client_request"}

        # a JSON-RPC request from this client is still answered in JSON-RPC; the events
        # keep the shape its first message fixed
        await ws.send(json.dumps({"jsonrpc": "2.0", "id": 9, "method": "status/get"}))
        answer = await legacy_answer(ws)
        assert answer["id"] == 9 and "result" in answer
        await ws.close()

    asyncio.run(go())


def test_a_json_rpc_client_gets_events_as_notifications_with_a_heartbeat(
        served: Served) -> None:
    async def go() -> None:
        phone = Phone(await connect(served))
        await phone.call("initialize")
        await run_to_end(phone, "hello")
        assert all(e.get("jsonrpc") == "2.0" and "event" not in e for e in phone.events)
        await phone.ws.close()

    asyncio.run(go())


def test_a_client_that_stops_reading_is_cut_off_and_the_others_keep_up(
        served: Served) -> None:
    """Real clients: one pauses reading (its TCP window fills), the other reads; the store
    gets ~30 MB of agent output. The stuck one is disconnected, the other gets it all."""
    pieces = 30_000

    async def go() -> tuple[int, int | None]:
        reader = Phone(await connect(served))
        await reader.call("initialize")
        # a small receive buffer (else the kernel would hold up to 32 MB for it here)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        host, port = served.ws.removeprefix("ws://").split("/")[0].rsplit(":", 1)
        sock.connect((host, int(port)))
        sock.setblocking(False)
        stuck = await websockets.connect(served.ws + f"?token={TOKEN}", max_queue=1,
                                         sock=sock)
        await stuck.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize"}))
        await asyncio.sleep(0.5)
        stuck.transport.pause_reading()

        def write() -> None:
            # random text: the connection compresses (permessage-deflate), "xxx" would be
            # next to nothing on the wire
            noise = base64.b64encode(os.urandom(750 * 64)).decode()
            with Store(served.root / ".ralph" / "store", durability="never") as store:
                for n in range(pieces):
                    start = (n * 7919) % (len(noise) - 1000)
                    store.append("agent.output", {"kind": "text", "content": f"{n} "
                                                  + noise[start:start + 1000]},
                                 stream="sessions/ses_flood")

        writing = asyncio.ensure_future(asyncio.to_thread(write))
        last = -1
        while last < pieces - 1:
            message = json.loads(await asyncio.wait_for(reader.ws.recv(), TIMEOUT))
            if message.get("method") == "event/agent_output":
                numbers = [int(line.split(" ", 1)[0])
                           for line in message["params"]["content"].split("\n")]
                assert numbers[0] == last + 1  # in order, nothing lost
                last = numbers[-1]
        await writing
        stuck.transport.resume_reading()
        with pytest.raises(websockets.ConnectionClosed):
            while True:  # what it had buffered, then the end
                await asyncio.wait_for(stuck.recv(), TIMEOUT)
        code = stuck.close_code
        await reader.ws.close()
        return last, code

    last, code = asyncio.run(go())
    assert last == pieces - 1
    assert code in (4008, 1006)  # told it is too slow, or cut once it read nothing for 5 s


def flood(root: Path, count: int, size: int = 500, stream: str = "sessions/ses_old") -> None:
    """`count` pieces of agent output (of incompressible text) in the project's store."""
    noise = base64.b64encode(os.urandom(size * 4)).decode()
    with Store(root / ".ralph" / "store", durability="never") as store:
        for n in range(count):
            store.append("agent.output", {"kind": "text",
                                          "content": f"{n} " + noise[n % size:n % size + size]},
                         stream=stream)


def test_answers_during_a_long_catch_up_come_and_nothing_twice(served: Served) -> None:
    """A replay that fills the client's queue does not crowd out the answers to its other
    requests (they wait for room), and two catch-ups at once send each event once."""
    flood(served.root, 4000, size=1500)

    async def go() -> None:
        ws = await connect(served)
        for n, (method, params) in enumerate([("initialize", {"since_seq": 0}),
                                              ("initialize", {"since_seq": 0}),
                                              ("status/get", None)], 1):
            message: dict[str, Any] = {"jsonrpc": "2.0", "id": n, "method": method}
            if params is not None:
                message["params"] = params
            await ws.send(json.dumps(message))
        answers: dict[int, dict[str, Any]] = {}
        numbers: list[int] = []
        while len(answers) < 3 or numbers[-1:] != [3999]:
            message = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
            if "id" in message:
                answers[message["id"]] = message
            elif message.get("method") == "event/agent_output":
                # (the frames the server had not published yet when the client came come
                # live, merged: a piece a line)
                numbers += [int(line.split(" ", 1)[0])
                            for line in message["params"]["content"].split("\n")]
        assert numbers == list(range(4000))  # each once, in order
        replayed = sorted([answers[1]["result"]["replayed"], answers[2]["result"]["replayed"]])
        assert replayed[0] == 0 and replayed[1] > 0
        assert answers[3]["result"]["repo_name"] == "proj"
        await ws.close()

    asyncio.run(go())


def test_batches_are_bounded_and_counted_however_they_are_written(served: Served) -> None:
    async def go() -> None:
        ws = await connect(served)
        too_many = [{"jsonrpc": "2.0", "id": n, "method": "status/get"} for n in range(51)]
        await ws.send(json.dumps(too_many))
        refused = json.loads(await ws.recv())
        assert refused["error"]["code"] == -32600 and refused["id"] is None
        assert "at most 50" in refused["error"]["data"]["reason"]
        # a key written with an escape is the same key: 12 batches of 50 are the minute's 600
        batch = "[" + ",".join('{"\\u006asonrpc":"2.0","id":' + str(n)
                               + ',"method":"initialized"}' for n in range(50)) + "]"
        for _ in range(12):
            await ws.send(batch)
            answer = json.loads(await ws.recv())
            assert isinstance(answer, list) and len(answer) == 50
        await ws.send(batch)
        limited = json.loads(await ws.recv())
        assert limited["error"]["code"] == -32000 and "retry_after" in limited["error"]["data"]
        await ws.close()

    asyncio.run(go())


def test_a_legacy_command_is_told_by_its_shape_not_its_text(served: Served) -> None:
    (served.root / "jsonrpc").write_text("a file named so\n")

    async def go() -> None:
        ws = await connect(served)
        await ws.send(json.dumps({"command": "get_file", "payload": {"path": "jsonrpc"},
                                  "request_id": 1}))
        assert (await legacy_answer(ws))["event"] == "deprecation_warning"
        content = await legacy_answer(ws)
        assert content["event"] == "file_content"
        assert content["payload"]["content"] == "a file named so\n"
        await ws.close()

    asyncio.run(go())


def test_stderr_comes_as_agent_log_and_the_final_answer_as_agent_message(
        served: Served) -> None:
    async def go() -> None:
        phone = Phone(await connect(served))
        started = await phone.call("agent/run", {"prompt": "go", "agent_type": "noisy"})
        session_id = started["result"]["session_id"]
        logged = await phone.until("event/agent_log", session_id=session_id)
        assert logged["stream"] == "stderr" and logged["line"] == "warning: low disk"
        final = await phone.until("event/agent_message", session_id=session_id)
        assert final["role"] == "assistant" and "the answer" in final["content"]
        stopped = await phone.until("event/agent_stopped", session_id=session_id)
        assert final["seq"] == stopped["seq"]  # (one frame: the end, with its last words)
        outputs = [e["params"]["content"] for e in phone.events
                   if e.get("method") == "event/agent_output"]
        assert not any("low disk" in text for text in outputs)  # a diagnostic, not output
        await phone.ws.close()

    asyncio.run(go())

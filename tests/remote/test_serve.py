"""`ralph serve` as a real process, with a real WebSocket client (`websockets`) and HTTP:
authentication, the origin check, the lifecycle methods and `status/get`, JSON-RPC's
errors and batches, the limits, the heartbeat, and a clean end (SIGTERM, `shutdown`)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import websockets

from tests.cli.helpers import RALPH, TIMEOUT

TOKEN = "a-test-token"
NOTIFICATIONS = ["event/heartbeat", "event/agent_started", "event/agent_output",
                 "event/agent_stopped", "event/agent_status", "event/agent_log",
                 "event/agent_message",
                 "event/file_changed", "event/git_status_changed", "event/note_added",
                 "event/loop_run_started", "event/loop_run_stopped", "event/loop_run_paused",
                 "event/loop_run_resumed", "event/loop_iteration_started",
                 "event/loop_iteration_finished", "event/loop_task_blocked",
                 "event/loop_error", "event/loop_agent_output"]


class Served:
    def __init__(self, proc: subprocess.Popen[str], root: Path) -> None:
        self.proc = proc
        self.root = root
        info = json.loads((root / ".ralph" / "serve.json").read_text())
        self.ws: str = info["ws"]
        self.http: str = info["http"]
        self.info = info

    def get(self, path: str, token: str | None = TOKEN, *,
            header: bool = True) -> tuple[int, Any]:
        url = self.http + path
        headers = {}
        if token is not None and header:
            headers["Authorization"] = f"Bearer {token}"
        elif token is not None:
            url += f"?token={token}"
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                        timeout=TIMEOUT) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")


def start(root: Path, *args: str, env: dict[str, str] | None = None
          ) -> subprocess.Popen[str]:
    return subprocess.Popen([*RALPH, "serve", "--port", "0", *args], cwd=root,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env=env)


def wait_served(proc: subprocess.Popen[str], root: Path) -> Served:
    deadline = time.monotonic() + TIMEOUT
    while not (root / ".ralph" / "serve.json").exists():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "ralph serve did not start"
        time.sleep(0.05)
    return Served(proc, root)


@contextmanager
def serving(root: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[Served]:
    """`ralph serve --token TOKEN ARGS` in `root` while the block runs; then SIGTERM (and
    SIGKILL if it does not end)."""
    (root / ".ralph").mkdir(parents=True, exist_ok=True)
    proc = start(root, "--token", TOKEN, *args, env=env)
    try:
        yield wait_served(proc, root)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(TIMEOUT)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    project = tmp_path / "proj"
    (project / ".ralph").mkdir(parents=True)
    (project / "ralph.toml").write_text('[agents.echo]\nargv = ["sh", "-c", "cat"]\n')
    return project


@pytest.fixture
def served(root: Path) -> Iterator[Served]:
    proc = start(root, "--token", TOKEN, "--heartbeat", "0.3")
    try:
        yield wait_served(proc, root)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(TIMEOUT)


def rpc(served: Served, *messages: Any, query: str = f"?token={TOKEN}",
        **connect: Any) -> list[Any]:
    """Send each message (a JSON value, or raw text) and read one answer to each."""

    async def go() -> list[Any]:
        async with websockets.connect(served.ws + query, **connect) as ws:
            answers: list[Any] = []
            for message in messages:
                await ws.send(message if isinstance(message, str) else json.dumps(message))
                while True:  # the answer, not a notification (the heartbeat) meanwhile
                    answer = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
                    if isinstance(answer, list) or "id" in answer:
                        break
                answers.append(answer)
            return answers

    return asyncio.run(go())


def refused(served: Served, query: str, **connect: Any) -> int:
    """The HTTP status of a refused upgrade."""

    async def go() -> int:
        with pytest.raises(websockets.InvalidStatus) as caught:
            async with websockets.connect(served.ws + query, **connect):
                pass
        return caught.value.response.status_code

    return asyncio.run(go())


def test_http_needs_the_token_but_for_health(served: Served) -> None:
    assert served.get("/health", None) == (200, {"status": "ok"})
    for token, header in ((None, True), ("wrong", True), ("wrong", False)):
        status, body = served.get("/api/status", token, header=header)
        assert status == 401 and "Bearer" in body["error"]
    status, body = served.get("/api/status")
    assert status == 200 and body["repo_path"] == str(served.root)
    assert served.get("/api/status", TOKEN, header=False)[0] == 200
    status, document = served.get("/api/rpc/discover")
    assert status == 200 and document["servers"][0]["url"] == served.ws
    assert {"initialize", "initialized", "shutdown", "status/get", "git/status", "git/diff",
            "file/get", "session/watch", "session/unwatch", "agent/run"} <= {
        m["name"] for m in document["methods"]}
    assert [n["name"] for n in document["x-notifications"]] == NOTIFICATIONS
    assert served.info["token"] == TOKEN and served.info["pid"] == served.proc.pid
    assert (served.root / ".ralph" / "serve.json").stat().st_mode & 0o777 == 0o600


def test_a_websocket_needs_the_token_and_the_servers_own_origin(served: Served) -> None:
    assert refused(served, "") == 403
    assert refused(served, "?token=wrong") == 403
    assert refused(served, "", additional_headers={"Authorization": "Bearer wrong"}) == 403
    assert refused(served, f"?token={TOKEN}", origin="http://evil.example") == 403
    [answer] = rpc(served, {"jsonrpc": "2.0", "id": 1, "method": "status/get"}, query="",
                   additional_headers={"Authorization": f"Bearer {TOKEN}"})
    assert answer["result"]["connected_clients"] == 1
    own = served.http  # the page the server itself serves
    [answer] = rpc(served, {"jsonrpc": "2.0", "id": 1, "method": "status/get"}, origin=own)
    assert "result" in answer


def test_an_allowed_origin_and_no_auth_on_loopback(root: Path) -> None:
    proc = start(root, "--no-auth", "--allow-origin", "http://phone.local:3000")
    try:
        served = wait_served(proc, root)
        assert served.info["token"] is None
        assert served.get("/api/status", None)[0] == 200
        [answer] = rpc(served, {"jsonrpc": "2.0", "id": 1, "method": "status/get"},
                       query="", origin="http://phone.local:3000")
        assert "result" in answer
        assert refused(served, "", origin="http://other.local") == 403
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(TIMEOUT) == 0


def test_initialize_and_status_get_as_the_document_writes_them(served: Served) -> None:
    init, status = rpc(served, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                "params": {"protocolVersion": "1.0",
                                           "clientInfo": {"name": "t", "version": "1"}}},
                       {"jsonrpc": "2.0", "id": "s", "method": "status/get"})
    result = init["result"]
    assert result["protocolVersion"] == "1.0" and result["serverInfo"]["name"] == "ralph"
    capabilities = result["capabilities"]
    assert capabilities["notifications"] == NOTIFICATIONS
    assert "echo" in capabilities["supportedAgents"]  # sh is found
    assert capabilities["agent"]["run"] is True
    assert capabilities["agent"]["sessionWatch"] is True
    assert capabilities["git"]["commit"] is False  # claims only what works
    assert capabilities["file"]["get"] is True
    assert capabilities["git"]["status"] is False  # the project is no git repository
    assert capabilities["loop"]["step"] is True
    assert capabilities["file"]["maxFileSize"] == 10 * 1024 * 1024
    assert status["id"] == "s"
    assert set(status["result"]) == {
        "session_id", "agent_session_id", "agent_state", "agent_type", "connected_clients",
        "repo_path", "repo_name", "uptime_seconds", "version", "watcher_enabled",
        "git_enabled"}
    assert status["result"]["agent_state"] == "idle"
    assert status["result"]["repo_name"] == "proj"


def test_json_rpc_errors_batches_and_notifications(served: Served) -> None:
    parse, invalid, unknown, batch = rpc(
        served, "{not json", {"jsonrpc": "2.0", "id": 1},
        {"jsonrpc": "2.0", "id": 2, "method": "no/such"},
        [{"jsonrpc": "2.0", "id": 3, "method": "status/get"},
         {"jsonrpc": "2.0", "method": "initialized"},
         {"jsonrpc": "2.0", "id": 4, "method": "initialize",
          "params": {"protocolVersion": 5}}])
    assert parse["error"]["code"] == -32700 and parse["id"] is None
    assert invalid["error"]["code"] == -32600 and invalid["id"] == 1
    assert unknown["error"]["code"] == -32601
    assert [a["id"] for a in batch] == [3, 4]
    assert batch[1]["error"]["code"] == -32602 and "data" in batch[1]["error"]


def test_the_heartbeat_reaches_every_client(served: Served) -> None:
    async def go() -> dict[str, Any]:
        async with websockets.connect(served.ws + f"?token={TOKEN}") as ws:
            return dict(json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT)))

    beat = asyncio.run(go())
    assert beat["method"] == "event/heartbeat" and "id" not in beat
    assert set(beat["params"]) == {"server_time", "sequence", "agent_status",
                                   "uptime_seconds"}
    assert beat["params"]["sequence"] >= 1 and beat["params"]["server_time"].endswith("Z")


def test_the_rate_limit_answers_minus_32000_with_retry_after(served: Served) -> None:
    async def go() -> list[dict[str, Any]]:
        async with websockets.connect(served.ws + f"?token={TOKEN}") as ws:
            for n in range(601):
                await ws.send(json.dumps({"jsonrpc": "2.0", "id": n, "method": "status/get"}))
            answers: list[dict[str, Any]] = []
            while len(answers) < 601:
                message = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
                if "id" in message:
                    answers.append(message)
            return answers

    answers = asyncio.run(go())
    limited = [a for a in answers if "error" in a]
    assert len(limited) == 1 and limited[0]["id"] == 600
    assert limited[0]["error"]["code"] == -32000
    assert limited[0]["error"]["message"] == "rate limited"
    assert 0 < limited[0]["error"]["data"]["retry_after"] <= 60


def test_a_message_over_16_mib_closes_the_connection(served: Served) -> None:
    async def go() -> int | None:
        ws = await websockets.connect(served.ws + f"?token={TOKEN}", max_size=None)
        try:
            # closed while it is still being sent, or once it is: either way, 1009
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await ws.send("x" * (16 * 1024 * 1024 + 1))
                while True:
                    await asyncio.wait_for(ws.recv(), TIMEOUT)
            return closed.value.rcvd.code if closed.value.rcvd else None
        finally:
            ws.transport.abort()

    assert asyncio.run(go()) == 1009  # message too big
    [answer] = rpc(served, {"jsonrpc": "2.0", "id": 1, "method": "status/get"})
    assert "result" in answer  # the server goes on


def test_sigterm_and_shutdown_end_the_server_cleanly(root: Path, served: Served) -> None:
    async def told() -> int | None:
        async with websockets.connect(served.ws + f"?token={TOKEN}") as ws:
            await ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "shutdown"}))
            while True:
                try:
                    message = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
                except websockets.ConnectionClosed as exc:
                    return exc.rcvd.code if exc.rcvd else None
                if message.get("id") == 1:
                    assert message["result"] == {"success": True}

    assert asyncio.run(told()) == 1001  # going away
    assert served.proc.wait(TIMEOUT) == 0
    assert not (root / ".ralph" / "serve.json").exists()
    again = start(root, "--token", TOKEN)
    wait_served(again, root)
    again.send_signal(signal.SIGTERM)
    assert again.wait(TIMEOUT) == 0
    assert not (root / ".ralph" / "serve.json").exists()


def test_another_host_name_is_refused_on_loopback(served: Served) -> None:
    """A page of another name resolving to 127.0.0.1 (DNS rebinding) must not reach it."""
    port = served.http.rsplit(":", 1)[1]
    request = urllib.request.Request(served.http + "/api/status", headers={
        "Authorization": f"Bearer {TOKEN}", "Host": f"evil.example:{port}"})
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=TIMEOUT)
    assert caught.value.code == 421
    evil = Served.__new__(Served)  # the same server under the other name
    evil.ws = f"ws://evil.example:{port}/ws"
    assert refused(evil, f"?token={TOKEN}", origin=f"http://evil.example:{port}",
                   host="127.0.0.1", port=int(port)) == 403
    [answer] = rpc(served, {"jsonrpc": "2.0", "id": 1, "method": "status/get"},
                   origin=f"http://localhost:{port}")  # its own names are fine
    assert "result" in answer


def test_bad_starts_are_one_line_errors(root: Path) -> None:
    for args, words in [(["--no-auth", "--token", "abcdefghij"], "opposite things"),
                        (["--token", "short"], "--token is too short")]:
        bad = subprocess.run([*RALPH, "serve", *args], cwd=root, capture_output=True,
                             text=True, timeout=TIMEOUT, check=False)
        assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and words in bad.stderr
    no_auth = subprocess.run([*RALPH, "serve", "--no-auth", "--host", "0.0.0.0"], cwd=root,
                             capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert no_auth.returncode == 2
    assert no_auth.stderr.startswith("error: --no-auth is refused with --host 0.0.0.0")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = subprocess.run([*RALPH, "serve", "--port", str(port)], cwd=root,
                              capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert busy.returncode == 2
    assert busy.stderr == (f"error: port {port} on 127.0.0.1 is already in use (choose "
                           "another with --port)\n")
    assert not (root / ".ralph" / "serve.json").exists()

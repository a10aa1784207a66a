"""stdio_streams in a real child process: pipes, regular files, stdout kept for the protocol."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from tests.rpc.pipes import GUARD_S

SERVER = Path(__file__).with_name("stdio_server.py")


def _line(method: str, request_id: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "method": method, "id": request_id}).encode() + b"\n"


async def test_stdio_over_pipes_keeps_stdout_for_the_protocol() -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(SERVER),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        process.stdin.write(_line("ping", 1) + _line("stray", 2) + b"\xff\n")
        await process.stdin.drain()
        process.stdin.close()  # EOF: the server answers what it has and exits
        async with asyncio.timeout(GUARD_S):
            stdout, stderr = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0, stderr.decode(errors="replace")
    lines = stdout.split(b"\n")
    assert lines[-1] == b"", "every line ends with a newline"
    messages = [json.loads(line) for line in lines[:-1]]
    assert messages[0] == {"jsonrpc": "2.0", "method": "event", "params": {"type": "started"}}
    assert messages[-1] == {"jsonrpc": "2.0", "method": "event", "params": {"type": "stopped"}}
    responses = {json.dumps(message.get("id")): message for message in messages[1:-1]}
    assert responses["1"]["result"] == {"ok": True}
    assert responses["2"]["result"] == "strayed"
    assert responses["null"]["error"]["code"] == -32700
    assert len(messages) == 5
    assert b"stray print from the server" in stderr
    assert b"stray output from a child" in stderr


def test_stdio_on_regular_files(tmp_path: Path) -> None:
    requests = tmp_path / "requests.jsonl"
    responses = tmp_path / "responses.jsonl"
    requests.write_bytes(b"".join(_line("ping", index) for index in range(50)))
    with requests.open("rb") as stdin, responses.open("wb") as stdout:
        result = subprocess.run(
            [sys.executable, str(SERVER)],
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.PIPE,
            timeout=GUARD_S,
            check=False,
        )
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    messages = [json.loads(line) for line in responses.read_bytes().splitlines()]
    assert messages[0]["params"] == {"type": "started"}
    assert messages[-1]["params"] == {"type": "stopped"}
    assert sorted(message["id"] for message in messages[1:-1]) == list(range(50))
    assert all(message["result"] == {"ok": True} for message in messages[1:-1])

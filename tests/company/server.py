"""`ac server:start` as a real process, driven over its stdin/stdout by an asyncio client
that matches answers to requests and keeps the notifications in arrival order."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections import deque
from pathlib import Path
from typing import Any

import orjson

AC = str(Path(sys.executable).with_name("ac"))
WAIT_S = 30.0


class Failure(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error["message"])
        self.error = error


class AcServer:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.notifications: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._answers: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._n = 0
        self.stderr: deque[bytes] = deque(maxlen=200)  # its last log lines (drained, so that
        # a talkative server never blocks on a full pipe)
        self._reader = asyncio.create_task(self._read())
        self._logs = asyncio.create_task(self._read_stderr())

    @classmethod
    async def start(cls) -> AcServer:
        proc = await asyncio.create_subprocess_exec(
            AC, "server:start", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=True, limit=64 * 1024 * 1024)
        return cls(proc)

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            message = orjson.loads(line)
            if "id" not in message:
                await self.notifications.put(message)
            elif message["id"] in self._answers:
                self._answers.pop(message["id"]).set_result(message)
            else:  # an answer to no request of ours (id null: a line it could not read)
                raise AssertionError(f"unexpected answer: {message}")

    async def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        while line := await self.proc.stderr.readline():
            self.stderr.append(line)

    async def call(self, method: str, params: Any = None) -> Any:
        self._n += 1
        n = self._n
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": n, "method": method}
        if params is not None:
            message["params"] = params
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._answers[n] = future
        assert self.proc.stdin is not None
        self.proc.stdin.write(orjson.dumps(message) + b"\n")
        await self.proc.stdin.drain()
        answer = await asyncio.wait_for(future, WAIT_S)
        if "error" in answer:
            raise Failure(answer["error"])
        return answer["result"]

    async def next_notification(self) -> dict[str, Any]:
        message = await asyncio.wait_for(self.notifications.get(), WAIT_S)
        assert message["method"] == "events.notification"
        params: dict[str, Any] = message["params"]
        return params

    async def stop(self) -> int:
        """Close stdin (the server ends after answering), then wait for it."""
        assert self.proc.stdin is not None
        with contextlib.suppress(ConnectionError):
            self.proc.stdin.close()
        try:
            code = await asyncio.wait_for(self.proc.wait(), WAIT_S)
        finally:
            if self.proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, 9)
                await self.proc.wait()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
                await self._logs
        return code

"""A test client for `ralph bridge`: a subprocess speaking NDJSON JSON-RPC on its stdio."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

TIMEOUT = 60.0


class BridgeProcess:
    def __init__(self, root: Path, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ralph", "bridge"], cwd=root, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
            env={**os.environ, **(env or {})})
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.raw: list[bytes] = []  # every stdout line, for "nothing but JSON" checks
        self.responses: dict[Any, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self.stderr = b""
        self._next_id = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._err = threading.Thread(target=self._read_err, daemon=True)
        self._err.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.raw.append(line)
            self.lines.put(line)
        self.lines.put(b"")

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read()

    def _pump(self, timeout: float) -> bool:
        """Take one line; False at EOF."""
        line = self.lines.get(timeout=timeout)
        if not line:
            self.lines.put(b"")
            return False
        message = json.loads(line)
        if isinstance(message, list):
            for item in message:
                self.responses[item.get("id")] = item
        elif "id" in message:
            self.responses[message["id"]] = message
        else:
            assert message["method"] == "event", message
            self.events.append(message["params"])
        return True

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, method: str, params: Any = None, *, request_id: Any = None) -> Any:
        if request_id is None:
            self._next_id += 1
            request_id = self._next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send_raw(json.dumps(message).encode() + b"\n")
        return request_id

    def response(self, request_id: Any, timeout: float = TIMEOUT) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while request_id not in self.responses:
            left = deadline - time.monotonic()
            if left <= 0 or not self._pump(left):
                raise AssertionError(f"no response to {request_id!r}; stderr: "
                                     f"{self.stderr.decode(errors='replace')[-2000:]}")
        return self.responses.pop(request_id)

    def call(self, method: str, params: Any = None, timeout: float = TIMEOUT) -> Any:
        reply = self.response(self.send(method, params), timeout)
        assert "result" in reply, reply
        return reply["result"]

    def error(self, method: str, params: Any = None) -> dict[str, Any]:
        reply = self.response(self.send(method, params))
        assert "error" in reply, reply
        return dict(reply["error"])

    def wait_event(self, kind: str, timeout: float = TIMEOUT, **fields: Any) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for event in self.events[seen:]:
                if event["type"] == kind and all(event.get(k) == v for k, v in fields.items()):
                    return event
            seen = len(self.events)
            left = deadline - time.monotonic()
            if left <= 0 or not self._pump(left):
                raise AssertionError(f"no {kind} event; saw {[e['type'] for e in self.events]}")

    def close_stdin(self) -> int:
        """EOF: the bridge must stop and exit on its own."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        code = self.proc.wait(timeout=30)
        while self._pump(5):
            pass
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def __enter__(self) -> BridgeProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self.proc.poll() is None and self.proc.stdin and not self.proc.stdin.closed:
                self.close_stdin()
        finally:
            self.kill()

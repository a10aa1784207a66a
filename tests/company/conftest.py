"""An in-process client of the control plane: requests go through the same dispatcher and
methods `ac server:start` serves, without a process per test."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from ralph.controlplane.methods import build_registry
from ralph.controlplane.plane import Plane
from ralph.rpc import Dispatcher
from tests.company.fixtures import populated


class RpcFailure(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error["message"])
        self.error = error
        self.code: int = error["code"]
        self.data: Any = error.get("data")


class Client:
    """`call(method, params)` → the result, or RpcFailure with the error object."""

    def __init__(self) -> None:
        self.plane = Plane()
        self.dispatcher = Dispatcher(build_registry(self.plane))
        self.loop = asyncio.new_event_loop()
        self._n = 0

    def answer(self, method: str, params: Any = None) -> dict[str, Any]:
        self._n += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self._n, "method": method}
        if params is not None:
            message["params"] = params
        # (json, not orjson: a fuzzed integer may not fit in 64 bits)
        raw = self.loop.run_until_complete(self.dispatcher.handle(json.dumps(message).encode()))
        assert raw is not None
        answer: dict[str, Any] = orjson.loads(raw)
        return answer

    def call(self, method: str, params: Any = None) -> Any:
        answer = self.answer(method, params)
        if "error" in answer:
            raise RpcFailure(answer["error"])
        return answer["result"]

    def close(self) -> None:
        self.loop.run_until_complete(self.plane.close())
        self.loop.close()


@pytest.fixture
def client() -> Iterator[Client]:
    made = Client()
    yield made
    made.close()


@pytest.fixture
def workspace(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A workspace with one of each file (fixtures.populated) and its ids."""
    root = tmp_path / "ws"
    return root, populated(root)

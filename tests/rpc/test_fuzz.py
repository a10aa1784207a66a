"""Hypothesis: whatever arrives, Dispatcher.handle answers valid JSON (or nothing), never raises."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ralph.rpc import Dispatcher
from tests.rpc.helpers import SpecApi

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
METHODS = st.sampled_from(["subtract", "sum", "notify_hello", "get_data", "rpc.discover", "nope"])
IDS = st.none() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()


@st.composite
def near_requests(draw: st.DrawFn) -> dict[str, Any]:
    """Objects that are mostly requests, with any member missing or of any type."""
    message: dict[str, Any] = {}
    if draw(st.booleans()):
        message["jsonrpc"] = draw(st.sampled_from(["2.0", "2.0"]) | JSON_VALUES)
    if draw(st.booleans()):
        message["method"] = draw(METHODS | JSON_VALUES)
    if draw(st.booleans()):
        message["id"] = draw(IDS | JSON_VALUES)
    if draw(st.booleans()):
        message["params"] = draw(
            st.lists(st.integers(), max_size=4)
            | st.dictionaries(st.sampled_from(["minuend", "subtrahend", "values", "value"]),
                              st.integers() | JSON_VALUES, max_size=3)
            | JSON_VALUES
        )
    return message


MESSAGES = near_requests() | st.lists(near_requests() | JSON_VALUES, max_size=5) | JSON_VALUES


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    event_loop = asyncio.new_event_loop()
    yield event_loop
    event_loop.close()


@pytest.fixture(scope="module")
def dispatcher() -> Dispatcher:
    return SpecApi().dispatcher


def _check_response(response: Any) -> None:
    assert isinstance(response, dict)
    assert response["jsonrpc"] == "2.0"
    assert "id" in response
    assert ("result" in response) != ("error" in response)
    if "error" in response:
        assert isinstance(response["error"]["code"], int)
        assert isinstance(response["error"]["message"], str)


def _check_output(raw: bytes | None) -> None:
    if raw is None:
        return
    assert b"\n" not in raw
    answer = json.loads(raw.decode("utf-8"))
    if isinstance(answer, list):
        assert answer, "a batch answer is never an empty array"
        for response in answer:
            _check_response(response)
    else:
        _check_response(answer)


FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(raw=st.binary(max_size=200))
def test_arbitrary_bytes(
    loop: asyncio.AbstractEventLoop, dispatcher: Dispatcher, raw: bytes
) -> None:
    _check_output(loop.run_until_complete(dispatcher.handle(raw)))


@FUZZ
@given(text=st.text(max_size=200))
def test_arbitrary_text(loop: asyncio.AbstractEventLoop, dispatcher: Dispatcher, text: str) -> None:
    _check_output(loop.run_until_complete(dispatcher.handle(text)))


@FUZZ
@given(message=MESSAGES)
def test_arbitrary_json_values(
    loop: asyncio.AbstractEventLoop, dispatcher: Dispatcher, message: Any
) -> None:
    raw = json.dumps(message).encode()
    output = loop.run_until_complete(dispatcher.handle(raw))
    _check_output(output)
    if isinstance(message, dict) and "id" in message and output is not None:
        answer = json.loads(output)
        if isinstance(message["id"], str | int | float) and not isinstance(message["id"], bool):
            assert answer["id"] == message["id"], "a readable id is echoed"


@FUZZ
@given(message=near_requests(), junk=st.binary(min_size=1, max_size=20))
def test_corrupted_json(
    loop: asyncio.AbstractEventLoop, dispatcher: Dispatcher, message: Any, junk: bytes
) -> None:
    raw = json.dumps(message).encode()
    cut = len(raw) // 2
    _check_output(loop.run_until_complete(dispatcher.handle(raw[:cut] + junk + raw[cut:])))

"""Arbitrary bytes and JSON values sent to the bridge: it answers what deserves an answer,
writes nothing but JSON lines, and still answers ping afterwards."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.bridge.client import BridgeProcess
from tests.loop.conftest import Project

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=10)
_requestish = st.fixed_dictionaries(
    {"jsonrpc": st.sampled_from(["2.0", "1.0", 2]),
     "method": st.sampled_from(["ping", "status", "pause", "resume", "nope", "rpc.discover"])
     | st.integers(),
     "id": st.none() | st.integers() | st.text(max_size=8) | st.floats(allow_nan=False)},
    optional={"params": _json})
_line = (st.binary(max_size=60).map(lambda b: b.replace(b"\n", b" "))
         | _json.map(lambda v: json.dumps(v).encode())
         | _requestish.map(lambda v: json.dumps(v).encode())
         | st.lists(_requestish, max_size=4).map(lambda v: json.dumps(v).encode()))


@settings(max_examples=12, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(lines=st.lists(_line, min_size=1, max_size=25))
def test_the_bridge_survives_anything(project: Project, lines: list[bytes]) -> None:
    with BridgeProcess(project.root) as bridge:
        for line in lines:
            bridge.send_raw(line + b"\n")
        # An id no fuzzed request can have (their text ids are at most 8 characters): a
        # fuzzed `{"id": 1.0}` would otherwise answer for the client's own request 1.
        reply = bridge.response(bridge.send("ping", request_id="ping-after-the-fuzz"), 30)
        assert reply["result"]["ok"] is True
        assert bridge.close_stdin() == 0
    for raw in bridge.raw:
        message: Any = json.loads(raw)  # every line is JSON...
        items = message if isinstance(message, list) else [message]
        for item in items:  # ...and a JSON-RPC message
            assert item["jsonrpc"] == "2.0"
            assert ("result" in item) != ("error" in item) or item.get("method") == "event"
    assert bridge.proc.returncode == 0

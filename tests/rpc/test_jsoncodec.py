"""JSON in and out: exact integers of any size, strictness, compact output."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from ralph.rpc import SupportsWrite, Writer
from ralph.rpc.jsoncodec import DecodeError, dumps, loads


@pytest.mark.parametrize(
    "text",
    [
        "123456789012345678901234567890",
        '{"a": [-98765432109876543210, 1.5, "x"]}',
        "0.1234567890123456789012",
        '"1234567890123456789012"',
        "18446744073709551615",
    ],
)
def test_reads_like_the_standard_library(text: str) -> None:
    for raw in (text, text.encode()):
        value = loads(raw)
        assert value == json.loads(text)
        assert type(value) is type(json.loads(text))


@pytest.mark.parametrize(
    "text", ["NaN", "Infinity", "1e400", "[" * 1025 + "]" * 1025, '"\\ud800"', "{'a': 1}"]
)
def test_refuses_what_is_not_strict_json(text: str) -> None:
    with pytest.raises(DecodeError):
        loads(text)


def test_deep_nesting_with_long_numbers_is_still_read() -> None:
    text = "[" * 1000 + "12345678901234567890123" + "]" * 1000
    value: Any = loads(text)
    for _ in range(1000):
        value = value[0]
    assert isinstance(value, int | float)


def test_writes_compact_json_without_raw_newlines() -> None:
    value = {"text": "a\nb\r\u2028", "big": -(2**90), "nested": [1.5, None, True]}
    encoded = dumps(value)
    assert b"\n" not in encoded
    assert b"\r" not in encoded
    assert b": " not in encoded and b", " not in encoded
    assert json.loads(encoded) == value


def test_stream_writer_is_a_writer() -> None:
    """Static check (mypy): an asyncio StreamWriter fits both writer protocols."""

    def accepts(writer: asyncio.StreamWriter) -> tuple[Writer, SupportsWrite]:
        return writer, writer

    assert callable(accepts)

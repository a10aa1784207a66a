"""JSON in and out: orjson on the hot path, exact where orjson would lose precision.

orjson reads an integer beyond 64 bits as a float and refuses to write one. JSON has no such
limit and JSON-RPC ids must be echoed exactly, so a message with a run of 19 or more digits
(the only way to spell such an integer) is read again with the standard library, which keeps
every integer exact, and a value orjson cannot write goes through pydantic-core's encoder.
Both are rare paths; the common message never pays for them.
"""

from __future__ import annotations

import json
import re
from typing import Any, NoReturn

import orjson
import pydantic_core
from pydantic import BaseModel

__all__ = ["DecodeError", "dumps", "loads"]

_LONG_DIGITS_BYTES = re.compile(rb"\d{19}")
_LONG_DIGITS_STR = re.compile(r"\d{19}")
_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_UTC_Z  # UTC as "Z", as pydantic writes it


class DecodeError(ValueError):
    """The input is not JSON (or, as bytes, not UTF-8); the message says where."""


def loads(raw: bytes | str) -> Any:
    """Parse one JSON text strictly (no NaN, no lone surrogates), keeping big integers exact."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        reason = str(exc)
        if reason.startswith("str is not valid UTF-8"):
            reason = "the input is not valid UTF-8"  # orjson's wording is about its internals
        raise DecodeError(reason) from None
    long_digits = (
        _LONG_DIGITS_BYTES.search(raw) if isinstance(raw, bytes) else _LONG_DIGITS_STR.search(raw)
    )
    if long_digits is None:
        return value
    # orjson accepted the text, so it is valid UTF-8 and strict JSON: the standard library
    # reads it the same way, except that integers stay exact.
    text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        return value  # nested deeper than the standard library goes: keep orjson's reading


def _reject_constant(name: str) -> NoReturn:
    raise DecodeError(f"{name} is not JSON")  # unreachable after orjson, kept for safety


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON without raw newlines; pydantic models by alias, nothing excluded.

    Raises ValueError (pydantic-core's PydanticSerializationError) for a value that has no
    JSON form.
    """
    try:
        return orjson.dumps(value, default=_default, option=_OPTIONS)
    except orjson.JSONEncodeError:
        # integers beyond 64 bits, among other things orjson refuses: pydantic-core writes
        # them exactly, and fails with its own clear error for what has no JSON form.
        return pydantic_core.to_json(value, by_alias=True)


def _default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    try:
        return pydantic_core.to_jsonable_python(value, by_alias=True)
    except pydantic_core.PydanticSerializationError as exc:
        raise TypeError(str(exc)) from None

"""A run's events: the envelope AgentCompany persists, one JSON object a line in the run's
`events.jsonl`, appended whole.

Keys are written in the original's order (`schema_version`, `ts_wallclock`, `run_id`,
`session_ref`, `actor`, `visibility`, `type`, `payload`, `ts_monotonic_ms`). The original's
`ts_monotonic_ms` counts from the start of the process that wrote the event, so two
processes' events cannot be ordered by it; ours is the machine's monotonic clock
(CLOCK_MONOTONIC, milliseconds since boot), the same in every process, so it orders events
from every writer on the machine and `events.ack` can name a position with it.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ralph.company.workspace import now_iso
from ralph.store.streams import ends_torn

SCHEMA_VERSION = 1
VISIBILITIES = ("private_agent", "team", "managers", "org")


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def local_session_ref(run_id: str) -> str:
    return f"local_{run_id}"


def envelope(run_id: str, type_: str, payload: Any, *, actor: str = "system",
             visibility: str = "org", session_ref: str | None = None,
             ts_wallclock: str | None = None) -> dict[str, Any]:
    """A new event, its keys in the order AgentCompany writes them."""
    return {
        "schema_version": SCHEMA_VERSION,
        "ts_wallclock": ts_wallclock or now_iso(),
        "run_id": run_id,
        "session_ref": session_ref or local_session_ref(run_id),
        "actor": actor,
        "visibility": visibility,
        "type": type_,
        "payload": payload,
        "ts_monotonic_ms": monotonic_ms(),
    }


def encode_event(event: dict[str, Any]) -> bytes:
    """One line, as JSON.stringify writes it (compact, UTF-8), with its newline."""
    return orjson.dumps(event) + b"\n"


def append_event(events_path: Path, event: dict[str, Any]) -> None:
    """Append `event` to a run's events file as one whole line (made if missing).

    One write with O_APPEND: concurrent writers (this server, another one, an agent) never
    interleave within a line. A line a crashed writer left without its newline is closed
    first, so that it stays one bad line and does not swallow this event."""
    line = encode_event(event)
    # (read and write: the torn-line check reads the last byte through the same descriptor)
    fd = os.open(events_path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        if ends_torn(fd, os.fstat(fd).st_size):
            line = b"\n" + line
        view = memoryview(line)
        while view:
            written = os.write(fd, view)
            view = view[written:]
    finally:
        os.close(fd)


@dataclass(frozen=True)
class EventLine:
    """One non-blank line of an events file: its event, or why it is not one."""

    seq: int  # 1-based among the non-blank lines, as the index numbers them
    raw: str
    event: dict[str, Any] | None
    error: str | None


def parse_json(text: str) -> Any:
    """A line's JSON value as JavaScript's JSON.parse reads it (ValueError if it is not
    JSON): orjson first (fast), the standard library for what orjson refuses and JSON.parse
    takes (a lone surrogate escape, 1e400, nesting deeper than 1024)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as fast:
        try:
            return _without_surrogates(json.loads(text, parse_constant=_no_constant))
        except (ValueError, RecursionError):
            raise ValueError(str(fast)) from None


def _without_surrogates(value: Any) -> Any:
    """A lone surrogate (`"\\ud800"`) becomes U+FFFD: no UTF-8 file or database holds one
    (the line itself keeps the escape)."""
    if isinstance(value, str):
        return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in value) \
            if any("\ud800" <= c <= "\udfff" for c in value) else value
    if isinstance(value, list):
        return [_without_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_without_surrogates(k): _without_surrogates(v) for k, v in value.items()}
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # NaN, Infinity: Python takes them, JSON does not


def parse_line(raw: str) -> tuple[dict[str, Any] | None, str | None]:
    try:
        value = parse_json(raw)
    except ValueError as exc:
        return None, str(exc)
    if not isinstance(value, dict):
        # JSON.parse takes any value; the original then indexes it as a typeless event.
        return None, "the line is JSON but not an object"
    return value, None


def read_event_lines(events_path: Path) -> list[EventLine]:
    """Every non-blank line of an events file (OSError if it cannot be read). A last line
    without its newline is read too: the original reads it, and a reader of a finished run
    should see a crashed writer's last words as a bad line rather than nothing."""
    text = events_path.read_bytes().decode("utf-8", "replace")
    lines: list[EventLine] = []
    for raw in text.split("\n"):
        if not raw.strip():
            continue
        event, error = parse_line(raw)
        lines.append(EventLine(len(lines) + 1, raw, event, error))
    return lines

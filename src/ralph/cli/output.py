"""What the CLI writes: JSON lines on stdout, one-line errors and warnings on stderr."""

from __future__ import annotations

import logging
import re
import sys
from typing import Any

import orjson

from ralph.records import declared_fields


def write_json_line(value: Any) -> None:
    """One compact JSON value and a newline on stdout, flushed (followers read it live)."""
    out = sys.stdout.buffer
    out.write(orjson.dumps(value) + b"\n")
    out.flush()


def write_json(value: Any) -> None:
    """One indented JSON document on stdout (summaries meant to be read by people too).
    Dataclasses (the loop's records) with their fields in declared order."""
    sys.stdout.buffer.write(orjson.dumps(
        value, default=declared_fields,
        option=orjson.OPT_INDENT_2 | orjson.OPT_PASSTHROUGH_DATACLASS) + b"\n")
    sys.stdout.buffer.flush()


# C0 controls, DEL and C1 controls: an escape sequence in recorded text (a note, an agent's
# output) must not drive the terminal it is shown on; nor may the invisible characters that
# reorder or hide text (bidirectional overrides and isolates, zero-width characters, line and
# paragraph separators) make it read otherwise than it is.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")


def terminal_safe(text: str) -> str:
    """`text` on one line with control characters shown as `\\xNN` (`\\uNNNN`) instead of
    acting."""
    return _CONTROLS.sub(_shown, text)


def _shown(match: re.Match[str]) -> str:
    char = match.group()
    if char in "\n\r\t":
        return " "
    return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"


def exit_text(code: object) -> str:
    """`exit N`, or `no exit code` (the process never ran, or was ended)."""
    return f"exit {code}" if code is not None else "no exit code"


def piped_content() -> bytes | None:
    """Content piped on stdin (a terminal means none); empty input means no content."""
    stdin = sys.stdin
    if stdin is None or stdin.closed or stdin.isatty():
        return None
    data = stdin.buffer.read()
    return data or None


def error_line(message: str) -> None:
    sys.stderr.write(f"error: {message}\n")
    sys.stderr.flush()


class _OneLine(logging.Formatter):
    """`warning: <message>`, with any newlines folded so each record stays one line."""

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage().replace("\n", " ")
        return f"{record.levelname.lower()}: {text}"


def setup_logging(level: int = logging.WARNING) -> None:
    """Route the library's log records to stderr as one line each."""
    root = logging.getLogger("ralph")
    for existing in root.handlers:
        if getattr(existing, "_ralph_cli", False) and isinstance(existing,
                                                                 logging.StreamHandler):
            # run() called again: write to today's stderr, not a replaced (maybe closed) one.
            existing.stream = sys.stderr
            return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_OneLine())
    handler._ralph_cli = True  # type: ignore[attr-defined]  # marks our own handler
    root.addHandler(handler)
    root.setLevel(level)
    root.propagate = False


def argument_or_stdin(value: str, what: str) -> str:
    """A command's text argument, or stdin's text for `-`; one line and exit 2 if stdin is
    not UTF-8 (`what` names the argument: "the prompt")."""
    if value != "-":
        return value
    try:
        return sys.stdin.buffer.read().decode("utf-8")
    except UnicodeDecodeError:
        error_line(f"{what} on stdin is not valid UTF-8")
        raise SystemExit(2) from None

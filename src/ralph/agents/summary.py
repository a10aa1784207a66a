"""A tool call on one line, for people: the faces show agents' tool calls this way."""

from __future__ import annotations

import re

import orjson

TOOL_SUMMARY_CHARS = 120  # a tool call's input, on its line
# The keys that say best what a tool call does, in order of preference.
_TOOL_KEYS = ("command", "cmd", "file_path", "path", "filePath", "pattern", "query", "url",
              "description", "prompt")
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def tool_summary(tool: str | None, content: str) -> str:
    """A tool call on one line: its name and what best says what it does (the command, the
    path, the pattern), cut to TOOL_SUMMARY_CHARS."""
    what = content
    try:
        value = orjson.loads(content) if content.lstrip().startswith("{") else None
    except orjson.JSONDecodeError:
        value = None
    if isinstance(value, dict):
        for key in _TOOL_KEYS:
            if isinstance(value.get(key), str | list) and value[key]:
                found = value[key]
                what = " ".join(map(str, found)) if isinstance(found, list) else found
                break
    what = " ".join(_CONTROLS.sub(' ', what).split())
    if len(what) > TOOL_SUMMARY_CHARS:
        what = what[:TOOL_SUMMARY_CHARS - 1] + "…"
    return f"{tool or 'tool'}: {what}" if what else (tool or "tool")

"""Lines of a markdown file as stored: each keeps its own ending, so a rewrite that touches one
line leaves every other byte of the file (CRLF, a missing final newline) exactly as it was."""

from __future__ import annotations

import re
from collections.abc import Sequence

# \r\n, \n and a lone \r end a line; nothing else does (unlike str.splitlines, which would also
# split at \x0b, \x1c or \u2028 and so misnumber lines and change bytes on rewrite).
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
_FENCE = re.compile(r"[ \t]*(?P<fence>`{3,}|~{3,})")
TAB_WIDTH = 4


def split_lines(text: str) -> list[str]:
    """`text` cut into lines with their endings; "".join() of the result is `text`."""
    return _LINE.findall(text)


def content(line: str) -> str:
    """The line without its ending."""
    return line.rstrip("\r\n")


def ending(line: str) -> str:
    """The line's ending: "\\r\\n", "\\n", "\\r", or "" for a last line without one."""
    return line[len(content(line)) :]


def first_ending(lines: Sequence[str]) -> str:
    """The ending new lines should use: the file's own, or "\\n" when it has none."""
    return next((ending(line) for line in lines if ending(line)), "\n")


def indent_width(text: str) -> int:
    """Columns of leading whitespace, a tab reaching the next multiple of TAB_WIDTH."""
    width = 0
    for char in text:
        if char == " ":
            width += 1
        elif char == "\t":
            width += TAB_WIDTH - width % TAB_WIDTH
        else:
            break
    return width


def fence_opened(body: str) -> str | None:
    """The fence (```` ``` ```` or `~~~`, at least three) that `body` opens, else None.

    Text inside a fenced block is an example, not a heading or a task, so parsing skips it.
    """
    match = _FENCE.match(body)
    return match.group("fence") if match else None


def fence_closed(fence: str, body: str) -> bool:
    """Whether `body` closes `fence`: the same character, at least as many, nothing after."""
    stripped = body.strip()
    return (
        len(stripped) >= len(fence)
        and stripped[0] == fence[0]
        and stripped == fence[0] * len(stripped)
    )

"""A plain text table for listings printed often (`ralph tasks`): columns sized to their
content, the flexible ones wrapped to the terminal's width, styles only on a terminal.

Rich draws the same in about 70 ms more (importing its console and rendering through its
segment pipeline), most of `ralph tasks`' start-up budget (see the CLI benchmark). Widths are
counted in terminal cells with Rich's own table (rich.cells, cheap to import), so wide
characters line up as they do in Rich's tables.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

from rich.cells import cell_len, chop_cells

Span = tuple[str, str]  # (text, style): style "" or names from STYLES joined by spaces
Cell = Sequence[Span]  # a cell's spans; a "\n" in a span's text starts a new line

STYLES = {"bold": "1", "red": "31", "green": "32", "yellow": "33"}
COLOURS = {"red", "green", "yellow"}  # dropped under NO_COLOR; bold stays, as with Rich
GAP = "   "
MIN_WRAPPED = 10  # wrapped columns give way to this width first, then to HARD_MIN
HARD_MIN = 4
DEFAULT_WIDTH = 80


@dataclass(frozen=True)
class Column:
    header: str
    wrap: bool = False  # gives way (its text wrapped at spaces) when the table is too wide
    right: bool = False  # right-justified (numbers)


def uses_colour(stream: TextIO) -> bool:
    """Styles on a terminal (or wherever FORCE_COLOR is set), never when TERM is dumb or
    unknown: the rules Rich follows for the rest of the CLI. NO_COLOR drops colours, not
    bold (see `styled`)."""
    if os.environ.get("TERM", "").lower() in ("dumb", "unknown"):
        return False
    return bool(os.environ.get("FORCE_COLOR")) or stream.isatty()


def terminal_width() -> int:
    """$COLUMNS, else the width of the terminal on stdout, stderr or stdin (so `ralph tasks |
    less` is as wide as the terminal, as with Rich), else 80."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    for fd in (1, 2, 0):
        try:
            return os.get_terminal_size(fd).columns or DEFAULT_WIDTH
        except OSError:
            continue
    return DEFAULT_WIDTH


def render(columns: Sequence[Column], rows: Sequence[Sequence[Cell]], *,
           width: int | None = None, colour: bool = False, unicode: bool = True) -> str:
    """The table as text: a header, a rule, then the rows (a row as tall as its tallest
    cell), each line without trailing spaces. `unicode` false: the rule is drawn with `-`."""
    width = width or terminal_width()
    table = [[_lines(cell) for cell in row] for row in rows]
    widths = [max([cell_len(column.header)] +
                  [_span_len(line) for row in table for line in row[i]])
              for i, column in enumerate(columns)]
    _fit(columns, widths, width)
    rule = "\u2500" if unicode else "-"
    out = [_line([[(c.header, "bold")] for c in columns], columns, widths, colour),
           rule * (sum(widths) + len(GAP) * (len(widths) - 1))]
    for row in table:
        cells = [_wrap(lines, widths[i]) if columns[i].wrap else lines
                 for i, lines in enumerate(row)]
        for n in range(max(len(lines) for lines in cells)):
            out.append(_line([lines[n] if n < len(lines) else [] for lines in cells],
                             columns, widths, colour))
    return "\n".join(out) + "\n"


def print_table(columns: Sequence[Column], rows: Sequence[Sequence[Cell]],
                stream: TextIO | None = None) -> None:
    """The table on `stream` (stdout): in its encoding, with `?` for what it cannot write
    (a terminal or pipe that is not UTF-8), never an error."""
    stream = stream or sys.stdout
    encoding = getattr(stream, "encoding", None) or "utf-8"
    unicode = encoding.lower().replace("-", "").replace("_", "") in ("utf8", "utf16", "utf32")
    text = render(columns, rows, colour=uses_colour(stream), unicode=unicode)
    if not unicode:
        text = text.encode(encoding, errors="replace").decode(encoding)
    stream.write(text)


def _fit(columns: Sequence[Column], widths: list[int], width: int) -> None:
    """Narrow the wrapped columns until the table fits `width`: each in proportion to its
    width, none below MIN_WRAPPED while another can give, then none below HARD_MIN."""
    for floor in (MIN_WRAPPED, HARD_MIN):
        excess = sum(widths) + len(GAP) * (len(widths) - 1) - width
        while excess > 0:
            able = [i for i, column in enumerate(columns)
                    if column.wrap and widths[i] > floor]
            if not able:
                break
            room = sum(widths[i] - floor for i in able)
            for i in able:
                share = max(1, (widths[i] - floor) * excess // room)
                cut = min(share, widths[i] - floor, excess)
                widths[i] -= cut
                excess -= cut


def _lines(cell: Cell) -> list[list[Span]]:
    lines: list[list[Span]] = [[]]
    for text, style in cell:
        first, *more = text.split("\n")
        if first:
            lines[-1].append((first, style))
        for part in more:
            lines.append([(part, style)] if part else [])
    return lines


def _wrap(lines: list[list[Span]], width: int) -> list[list[Span]]:
    """Each line word-wrapped to `width` cells (a word longer than that is cut)."""
    wrapped: list[list[Span]] = []
    for line in lines:
        current: list[Span] = []
        used = 0
        for text, style in line:
            for spaced in _words(text):
                word, size = spaced, cell_len(spaced)
                if used + size > width and used:
                    wrapped.append(_rstrip(current))
                    current, used = [], 0
                    word = word.lstrip(" ")
                    size = cell_len(word)
                if not used and not word.strip(" "):
                    continue  # spaces where a line breaks (or starts) show as nothing
                while size > width:  # a word wider than the column: cut it
                    head, *rest = chop_cells(word, width)
                    wrapped.append([(head, style)])
                    word = "".join(rest)
                    size = cell_len(word)
                if word:
                    current.append((word, style))
                    used += size
        wrapped.append(_rstrip(current))
    return wrapped


def _words(text: str) -> list[str]:
    """`text` as words, each with the spaces before it."""
    words: list[str] = []
    for n, part in enumerate(text.split(" ")):
        if n == 0:
            words.append(part)
        elif words and not words[-1].strip(" "):
            words[-1] += " " + part
        else:
            words.append(" " + part)
    return [word for word in words if word]


def _rstrip(line: list[Span]) -> list[Span]:
    while line and not line[-1][0].rstrip(" "):
        line = line[:-1]
    if line:
        text, style = line[-1]
        line = [*line[:-1], (text.rstrip(" "), style)]
    return line


def _span_len(line: list[Span]) -> int:
    return sum(cell_len(text) for text, _ in line)


def _line(cells: Sequence[list[Span]], columns: Sequence[Column], widths: Sequence[int],
          colour: bool) -> str:
    parts = []
    for line, column, width in zip(cells, columns, widths, strict=True):
        pad = " " * max(0, width - _span_len(line))
        text = "".join(styled(text, style, colour) for text, style in line)
        parts.append(pad + text if column.right else text + pad)
    return GAP.join(parts).rstrip(" ")


def styled(text: str, style: str, colour: bool) -> str:
    """`text` in `style` (names from STYLES) when `colour`, else as it is; under NO_COLOR
    without its colours."""
    names = style.split() if colour else []
    if names and os.environ.get("NO_COLOR"):
        names = [name for name in names if name not in COLOURS]
    codes = [STYLES[name] for name in names if name in STYLES]
    return f"\x1b[{';'.join(codes)}m{text}\x1b[0m" if codes else text

"""ralph.cli.texttable: the plain table `ralph tasks` prints."""

from __future__ import annotations

import io
import os

import pytest
from rich.cells import cell_len

from ralph.cli.texttable import Column, print_table, render, terminal_width, uses_colour

COLUMNS = [Column("id"), Column("title", wrap=True), Column("n", right=True)]


def plain(*texts: str) -> list[list[tuple[str, str]]]:
    return [[(text, "")] for text in texts]


def test_columns_are_as_wide_as_their_widest_cell_and_numbers_align_right() -> None:
    text = render(COLUMNS, [plain("1", "Short", "7"), plain("10", "A longer title", "12")],
                  width=80)
    assert text.splitlines() == [
        "id   title             n",
        "────────────────────────",
        "1    Short             7",
        "10   A longer title   12",
    ]


def test_a_wrapped_column_gives_way_to_fit_the_width() -> None:
    title = "one two three four five six seven eight nine ten eleven twelve"
    lines = render(COLUMNS, [plain("1", title, "3")], width=30).splitlines()
    assert all(cell_len(line) <= 30 for line in lines)
    body = lines[2:]
    assert len(body) > 1
    assert body[0].startswith("1    one two") and body[0].endswith("3")
    assert " ".join(line[5:].rsplit("   ", 1)[0].strip() for line in body) == title
    assert all(line == line.rstrip() for line in lines)


def test_a_word_wider_than_the_column_is_cut() -> None:
    word = "x" * 40
    lines = render(COLUMNS, [plain("1", word, "0")], width=25).splitlines()
    assert all(cell_len(line) <= 25 for line in lines)
    assert "".join(line[5:].split("   ")[0] for line in lines[2:]) == word


def test_wide_characters_are_counted_in_cells() -> None:
    lines = render(COLUMNS, [plain("1", "日本語のタスク", "2"), plain("2", "ascii", "3")],
                   width=80).splitlines()
    assert len({cell_len(line) for line in lines[2:]}) == 1  # the counts line up


def test_a_newline_in_a_cell_makes_the_row_taller() -> None:
    row = [[("1", "")], [("Title", ""), ("\nblocked: why", "red")], [("0", "")]]
    assert render(COLUMNS, [row], width=80).splitlines()[2:] == [
        "1    Title          0",
        "     blocked: why",
    ]


def test_colours_only_when_asked() -> None:
    row = [[("1", "")], [("done", "green"), (" (next)", "bold")], [("0", "")]]
    assert "\x1b[" not in render(COLUMNS, [row], width=80)
    coloured = render(COLUMNS, [row], width=80, colour=True)
    assert "\x1b[32mdone\x1b[0m\x1b[1m (next)\x1b[0m" in coloured
    assert coloured.startswith("\x1b[1mid\x1b[0m")


def test_styles_follow_the_terminal_and_richs_conventions(
        monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    for name in ("FORCE_COLOR", "NO_COLOR", "TERM"):
        monkeypatch.delenv(name, raising=False)
    assert uses_colour(Tty()) and not uses_colour(io.StringIO())
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert uses_colour(io.StringIO())  # forced onto a pipe
    monkeypatch.setenv("TERM", "dumb")
    assert not uses_colour(Tty()) and not uses_colour(io.StringIO())  # but never dumb
    monkeypatch.delenv("TERM")
    monkeypatch.delenv("FORCE_COLOR")
    monkeypatch.setenv("NO_COLOR", "1")  # colours go, bold stays
    row = [[("1", "")], [("done", "green"), (" (next)", "bold")], [("0", "")]]
    out = render(COLUMNS, [row], width=80, colour=uses_colour(Tty()))
    assert "\x1b[1m (next)\x1b[0m" in out and "\x1b[32m" not in out


def test_an_encoding_that_is_not_unicode_gets_a_plain_rule_and_no_error() -> None:
    out = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    print_table(COLUMNS, [plain("1", "caf\u00e9 \u65e5\u672c", "2")], out)
    out.flush()
    text = out.buffer.getvalue().decode("ascii")
    assert text.splitlines()[1] == "-" * len(text.splitlines()[0])
    assert "caf?" in text


def test_wrapped_columns_give_way_in_proportion_and_fit_narrow_terminals() -> None:
    columns = [Column("id"), Column("title", wrap=True), Column("deps", wrap=True)]
    title = "word " * 12
    deps = ", ".join(str(n) for n in range(1, 13))
    lines = render(columns, [plain("1", title.strip(), deps)], width=60).splitlines()
    assert all(cell_len(line) <= 60 for line in lines)
    assert len(lines[2:]) == 3  # both wrapped; the title alone at 10 columns took 6 lines
    assert lines[2].endswith("9,") and lines[3].endswith("10, 11, 12")
    narrow = render(columns, [plain("1", title.strip(), deps)], width=30).splitlines()
    assert all(cell_len(line) <= 30 for line in narrow)


def test_a_space_at_a_line_break_adds_no_empty_line() -> None:
    lines = render(COLUMNS, [plain("1", "x" * 10 + " ", "2")], width=22).splitlines()
    assert all(line.strip() for line in lines)


def test_the_width_is_columns_else_a_terminal_on_any_standard_stream(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "123")
    assert terminal_width() == 123
    monkeypatch.delenv("COLUMNS")
    sizes = {0: os.terminal_size((150, 40))}

    def size(fd: int = 1) -> os.terminal_size:
        if fd in sizes:
            return sizes[fd]
        raise OSError("not a terminal")

    monkeypatch.setattr(os, "get_terminal_size", size)
    assert terminal_width() == 150  # stdout piped, stdin a terminal
    sizes.clear()
    assert terminal_width() == 80

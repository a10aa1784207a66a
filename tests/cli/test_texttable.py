"""ralph.cli.texttable: the plain table `ralph tasks` prints."""

from __future__ import annotations

import io

import pytest
from rich.cells import cell_len

from ralph.cli.texttable import Column, print_table, render, uses_colour

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


def test_colour_follows_the_terminal_and_the_conventions(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    for name in ("FORCE_COLOR", "NO_COLOR", "TERM"):
        monkeypatch.delenv(name, raising=False)
    assert uses_colour(Tty()) and not uses_colour(io.StringIO())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not uses_colour(Tty())
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setenv("TERM", "dumb")
    assert not uses_colour(Tty())
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert uses_colour(io.StringIO())
    out = io.StringIO()
    print_table(COLUMNS, [plain("1", "t", "2")], out)
    assert "\x1b[1mid" in out.getvalue()

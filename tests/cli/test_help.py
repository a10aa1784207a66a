"""Every `--help` reads as plain text: arguments by name, no type labels, no range noise, and
no pointer to a file a user of an installed Ralph does not have."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer

import ralph
from ralph.cli.app import app
from ralph.cli.helpfmt import HelpCommand
from tests.cli.helpers import Cli, assert_error

# What typer writes by itself: `{text}` for a required argument, a type label (`<str>`,
# `<int range>`, `<path>`), and the bounds of min=/max= (`[1<=x<=9223372036854775807]`).
NOISE = re.compile(r"\{\w+\}|<(?:str|int|float|path|int range|bool)>|<=x|x>=|x<=|\d{12,}")
# Places only a checkout of Ralph's sources has.
ELSEWHERE = re.compile(r"docs/|\.\./|shared/|seeds?\b|reference/")


def command_paths() -> list[list[str]]:
    """Every command and group of `ralph`, as the words that name it."""
    paths: list[list[str]] = []

    def walk(command: typer.core.TyperGroup | typer.core.TyperCommand, path: list[str]) -> None:
        paths.append(path)
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])  # type: ignore[arg-type]
    return paths


def test_every_command_is_covered() -> None:
    names = {" ".join(path) for path in command_paths()}
    assert {"", "tasks", "status", "store gc", "notes add", "bridge", "init"} <= names
    assert len(names) > 20


@pytest.mark.parametrize("path", command_paths(), ids=lambda p: " ".join(p) or "ralph")
def test_help_reads_cleanly(cli: Cli, path: list[str]) -> None:
    result = cli(*path, "--help")
    assert result.code == 0 and result.err == "", result
    assert not NOISE.findall(result.out), (NOISE.findall(result.out), result.out)
    assert not ELSEWHERE.findall(result.out), result.out


def test_every_leaf_command_formats_its_help_with_helpcommand() -> None:
    leaves = [path for path in command_paths() if path]
    root = typer.main.get_command(app)
    for path in leaves:
        command = root
        for name in path:
            command = command.commands[name]  # type: ignore[attr-defined]
        if not hasattr(command, "commands"):
            assert isinstance(command, HelpCommand), path


@pytest.mark.parametrize(("args", "usage", "rows"), [
    (["store", "get"], "Usage: ralph store get [OPTIONS] ID", ["  ID  Frame id.  [required]"]),
    (["store", "last"], "Usage: ralph store last [OPTIONS] TOPIC [N]",
     ["  N      How many frames.  [default: 1]"]),
    (["notes", "add"], "Usage: ralph notes add [OPTIONS] TEXT", ["  TEXT  The note.  [required]"]),
    (["run"], "Usage: ralph run [OPTIONS]",
     ["  --agent NAME           Agent from ralph.toml [agents.<name>] (default:",
      "  --max-iterations N     Stop after N iterations (default:",
      "  --temporal HOST:PORT   The Temporal server (default: $RALPH_TEMPORAL)."]),
])
def test_arguments_and_values_by_name(cli: Cli, args: list[str], usage: str,
                                      rows: list[str]) -> None:
    lines = cli(*args, "--help").out.splitlines()
    assert lines[0] == usage
    for row in rows:
        assert row in lines, (row, lines)


def test_the_note_types_are_listed_in_the_help(cli: Cli) -> None:
    text = " ".join(cli("notes", "add", "--help").out.split())
    assert ("--type TYPE What kind of note: completed, in_progress, blocked, remaining, "
            "learning, decision. [required]") in text


def test_a_missing_choice_lists_the_choices_on_one_line(cli: Cli) -> None:
    line = assert_error(cli("notes", "add", "text"), "missing option", "--type")
    assert "\t" not in line and "  " not in line
    assert line == ("error: Missing option '--type'. Choose from: completed, in_progress, "
                    "blocked, remaining, learning, decision (see 'ralph notes add --help')")
    bad = assert_error(cli("notes", "add", "text", "--type", "bad"), "--type", "'bad'")
    assert "Value error" not in bad


@pytest.mark.parametrize(("args", "message"), [
    (["store", "last", "t", "0"], "Invalid value for 'N': 0 is not greater than or equal to 1"),
    (["store", "cat", "--limit", "-1"], "Invalid value for '--limit': -1 is not greater than "
                                        "or equal to 0"),
    (["store", "cat", "--after", "9223372036854775808"], "Invalid value for '--after': "
     "9223372036854775808 is not less than or equal to 9223372036854775807"),
    (["notes", "add", "x", "--type", "learning", "--iteration", "0"],
     "Invalid value for '--iteration': 0 is not greater than or equal to 1"),
])
def test_bounds_are_still_checked(cli: Cli, args: list[str],
                                  message: str) -> None:
    line = assert_error(cli(*args), message)
    assert line.startswith(f"error: {message} (see 'ralph ")
    assert cli(*args).code == 2


SRC = Path(ralph.__file__).parent


def test_no_user_facing_text_points_at_files_users_lack() -> None:
    """Help, messages and docstrings of an installed Ralph: no workspace paths anywhere, and
    no docs/ page from the commands (an installed package has no docs/)."""
    for path in sorted(SRC.rglob("*")):
        if path.suffix not in (".py", ".tmpl", ".md"):
            continue
        text = path.read_text()
        assert not re.search(r"\.\./shared|shared/seeds|seeds/|/reference/", text), path
        if path.parent.name == "cli":
            assert "docs/" not in text, path

"""The read-only commands editors, prompts and scripts call most, run without Typer.

`ralph status`, `ralph tasks` and `ralph notes list` answer in a fraction of a second, and
importing Typer (with the pydantic adapters it builds for every option it parses) was a
sixth of that. When the command line is one of their plain forms (known options, each given
once, a value where one is expected) this module calls the command's work directly, as its
Typer declaration would; anything else (`--help`, an unknown or repeated option, a value that
is missing, empty, looks like an option or is not a choice, `--opt=value`, shell completion)
goes through Typer, which answers as it always has. Each form's options must be exactly the
declared command's (tests/cli/test_startup.py compares them), so a new option only has to be
added here to be fast: until then it takes the Typer path.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

Options = Mapping[str, str | bool]


@dataclass(frozen=True)
class Form:
    """A command's plain form: its flags, its options taking one value, and the values some
    of those are limited to (a function, so that what defines them is imported only when the
    option is given)."""

    run: Callable[[Options], None]
    flags: frozenset[str] = frozenset()
    values: frozenset[str] = frozenset()
    choices: Mapping[str, Callable[[], tuple[str, ...]]] = field(default_factory=dict)


def _path(value: str | bool | None) -> Path | None:
    # What Typer makes of a Path option: Path(value), unchanged.
    return Path(value) if isinstance(value, str) else None


def _text(value: str | bool | None) -> str | None:
    return value if isinstance(value, str) else None


def _status(options: Options) -> None:
    run = _text(options.get("--run"))
    if run is not None or "--temporal" in options or "--namespace" in options:
        import typer  # a run on Temporal: the Typer command asks its workflow

        from ralph.cli.loop_cmd import status

        try:
            status("--json" in options, _path(options.get("--root")), run,
                   _text(options.get("--temporal")), _text(options.get("--namespace")))
        except typer.Exit as exc:
            raise SystemExit(exc.exit_code) from None
        return
    from ralph.cli.status_view import show_status

    show_status("--json" in options, _path(options.get("--root")))


def _tasks(options: Options) -> None:
    from ralph.cli.tasks_view import show_tasks

    show_tasks("--json" in options, _path(options.get("--root")))


def _notes_list(options: Options) -> None:
    from ralph.cli.notes_view import show_notes

    show_notes(_text(options.get("--type")), _text(options.get("--name")), "--json" in options,
               _text(options.get("--store")), open_only="--open" in options)


def _note_types() -> tuple[str, ...]:
    from ralph.notes import NOTE_TYPES

    return NOTE_TYPES


FORMS: dict[tuple[str, ...], Form] = {
    ("status",): Form(_status, flags=frozenset({"--json"}),
                      values=frozenset({"--root", "--run", "--temporal", "--namespace"})),
    ("tasks",): Form(_tasks, flags=frozenset({"--json"}), values=frozenset({"--root"})),
    ("notes", "list"): Form(_notes_list, flags=frozenset({"--json", "--open"}),
                            values=frozenset({"--type", "--name", "--store"}),
                            choices={"--type": _note_types}),
}

# Typer answers shell completion requests itself when this variable is set.
_COMPLETION_VARIABLE = "_RALPH_COMPLETE"


def plain_command(args: list[str]) -> Callable[[], None] | None:
    """The work of `ralph ARGS` when ARGS is a plain form of a command listed in FORMS, else
    None (Typer's turn)."""
    if _COMPLETION_VARIABLE in os.environ:
        return None
    for words, form in FORMS.items():
        if tuple(args[:len(words)]) == words:
            options = parse_options(args[len(words):], form)
            if options is None:
                return None
            return lambda: form.run(options)
    return None


def parse_options(args: list[str], form: Form) -> dict[str, str | bool] | None:
    """`args` as {option: value, flag: True}, or None when they are not a plain form."""
    options: dict[str, str | bool] = {}
    rest = iter(args)
    for word in rest:
        if word in options:
            return None
        if word in form.flags:
            options[word] = True
        elif word in form.values:
            value = next(rest, None)
            if not value or value.startswith("-"):
                return None
            if word in form.choices and value not in form.choices[word]():
                return None
            options[word] = value
        else:
            return None
    return options

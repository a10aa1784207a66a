"""How `--help` reads: arguments by their plain upper-case name, ranges without noise.

Typer writes a required argument as `{text}` in the usage line and lists it as `text <str>`;
every Ralph command uses HelpCommand instead, which writes `TEXT` in both places (`[N]` for an
optional one), the way man pages and click do. Options name their value with a metavar
(`--root PATH`), and numeric bounds are checked by `at_least` rather than typer's `min=`/`max=`,
which print `[1<=x<=9223372036854775807]` after the help text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import typer
from typer.core import TyperCommand

if TYPE_CHECKING:
    from typer._click import Context, HelpFormatter, Parameter


def argument_name(param: Parameter) -> str:
    """An argument as help shows it: its metavar, else its name in upper case."""
    return param.metavar or (param.name or "").upper()


def _usage_piece(param: Parameter) -> str:
    name = argument_name(param)
    if param.nargs != 1:
        name += "..."
    return name if param.required else f"[{name}]"


class HelpCommand(TyperCommand):
    """A command whose help writes its arguments as `NAME` (see the module's docstring)."""

    def collect_usage_pieces(self, ctx: Context) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        pieces.extend(_usage_piece(param) for param in self.get_params(ctx)
                      if param.param_type_name == "argument")
        return pieces

    def format_options(self, ctx: Context, formatter: HelpFormatter) -> None:
        arguments: list[tuple[str, str]] = []
        options: list[tuple[str, str]] = []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                arguments.append((argument_name(param), record[1]))
            elif param.param_type_name == "option":
                options.append(record)
        for title, rows in (("Arguments", arguments), ("Options", options)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


def at_least(low: int, high: int | None = None) -> Callable[[int | None], int | None]:
    """A parameter callback that refuses an integer below `low` (or above `high`): bad usage,
    exit 2, with the option's name in the one-line error."""

    def check(value: int | None) -> int | None:
        if value is not None and value < low:
            raise typer.BadParameter(f"{value} is not greater than or equal to {low}")
        if value is not None and high is not None and value > high:
            raise typer.BadParameter(f"{value} is not less than or equal to {high}")
        return value

    return check

"""`ralph workflow ...`: the role workflow (planner, questioner, executor, reviewer) and its
contracts."""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import Annotated

import typer

from ralph.cli.helpfmt import HelpCommand

# ralph.workflow.contracts.ROLES, written out: `ralph --help` lists this group without
# importing pydantic (a test keeps the two the same).
ROLES = ("planner", "executor", "reviewer", "questioner")
app = typer.Typer(help="Run requests through planner, executor, reviewer and questioner "
                       "agents under typed contracts.", no_args_is_help=True)

RoleChoice = StrEnum("RoleChoice", {role: role for role in ROLES})  # type: ignore[misc]


@app.command(cls=HelpCommand)
def schema(
    role: Annotated[RoleChoice, typer.Argument(
        metavar="ROLE", help=f"The role: {', '.join(ROLES)}.", case_sensitive=True,
        show_choices=False)],
    input_: Annotated[bool, typer.Option("--input", help="The role's input schema.")] = False,
    output: Annotated[bool, typer.Option(
        "--output", help="The role's output schema (the default).")] = False,
) -> None:
    """Print the JSON Schema of a role's output (or, with --input, of its input)."""
    if input_ and output:
        raise typer.BadParameter("cannot be used with --output", param_hint="--input")
    from ralph.workflow.contracts import schema_text

    sys.stdout.write(schema_text(role.value, "input" if input_ else "output") + "\n")

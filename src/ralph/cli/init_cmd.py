"""`ralph init`: scaffold the project files (the work is `ralph.scaffold.scaffold`)."""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer

from ralph.cli.output import write_json
from ralph.project import find_project_root

if TYPE_CHECKING:
    from ralph.scaffold import ScaffoldResult


class TrackerChoice(StrEnum):
    """The PRD's format: a Markdown checklist (PRD.md) or a JSON story list (prd.json)."""

    md = "md"
    json = "json"


def init(
    tracker: Annotated[TrackerChoice, typer.Option(
        "--tracker", help="PRD format: md (PRD.md) or json (prd.json).",
        case_sensitive=True)] = TrackerChoice.md,
    force: Annotated[bool, typer.Option(
        "--force", help="Overwrite existing scaffold files (never .ralph/state.json, "
                        ".ralph/store/ or existing .gitignore lines).")] = False,
    git_init: Annotated[bool, typer.Option(
        "--git-init", help="Run `git init` first when the root is not in a git repository."
    )] = False,
    json: Annotated[bool, typer.Option("--json", help="Print a JSON summary.")] = False,
) -> None:
    """Create ralph.toml, the prompts, the PRD and .ralph/ in the project root."""
    from ralph.scaffold import scaffold

    root = find_project_root()
    result = scaffold(root, tracker.value, force, git_init=git_init)
    if json:
        write_json(result.to_dict())
    else:
        _print_human(result)
    # After the listing, so that a long list does not scroll them out of sight.
    for warning in result.warnings:
        _warn(warning)
    if not result.git:
        _warn(f"{root} is not in a git repository: run `git init` there (or "
              "`ralph init --git-init`) so the loop can commit its work")


def _print_human(result: ScaffoldResult) -> None:
    out = sys.stdout
    if result.git_initialized:
        out.write(f"initialized a git repository in {result.root}\n")
    for verb, names in (("created", result.created), ("updated", result.updated),
                        ("kept", result.kept)):
        for name in names:
            out.write(f"{verb} {name}\n")
    line = gate_line(result)
    if line:
        out.write(f"{line}\n")
    out.flush()


def gate_line(result: ScaffoldResult) -> str | None:
    """The one line about [gates]: the proposed test command, or that none was found; None
    when the kept ralph.toml already has gates."""
    if result.gates_configured:
        return None
    gate = result.proposed_gate
    if gate is None:
        return ("no test command found to propose as a gate: add yours to gates.commands in "
                "ralph.toml, or a ticked box stays the only evidence that a task is done")
    where = ("commented out in ralph.toml: uncomment gates.commands to enable it"
             if result.config_written else "add it to gates.commands in ralph.toml")
    return f"proposed gate `{gate.command}` ({gate.reason}), {where}"


def _warn(message: str) -> None:
    sys.stderr.write(f"warning: {message}\n")
    sys.stderr.flush()

"""`ralph company serve` and the `ac` command (`ac server:start`, `ac rpc:call`): the
AgentCompany v1 control plane."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from ralph.cli.helpfmt import HelpCommand
from ralph.cli.output import error_line

app = typer.Typer(help="The AgentCompany control plane (JSON-RPC 2.0 over stdio).",
                  no_args_is_help=True)


def _serve() -> None:
    import asyncio

    from ralph.controlplane.server import serve_stdio

    asyncio.run(serve_stdio())


@app.command("serve", cls=HelpCommand)
def serve() -> None:
    """Serve AgentCompany protocol v1 on stdin/stdout (the same server as `ac server:start`),
    one JSON-RPC message a line, until stdin closes."""
    _serve()


ac = typer.Typer(name="ac", help="AgentCompany's control plane, served by Ralph.",
                 no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                 rich_markup_mode=None)


@ac.command("server:start", cls=HelpCommand)
def server_start() -> None:
    """Serve AgentCompany protocol v1 on stdin/stdout, one JSON-RPC message a line, until
    stdin closes."""
    _serve()


@ac.command("rpc:call", cls=HelpCommand)
def rpc_call(
    method: Annotated[str, typer.Option("--method", metavar="METHOD",
                                        help="The method, e.g. workspace.validate.")],
    params: Annotated[str | None, typer.Option(
        "--params", metavar="JSON", help="Its params, a JSON object.")] = None,
) -> None:
    """Call one method and print its result (JSON) on stdout; an error is one line on
    stderr and exit 1."""
    import asyncio

    from ralph.controlplane.server import call_once

    given: object = None
    if params is not None:
        try:
            given = json.loads(params)
        except json.JSONDecodeError as exc:
            error_line(f"--params is not JSON: {exc.msg} (line {exc.lineno}, column "
                       f"{exc.colno})")
            raise typer.Exit(2) from None
    answer = json.loads(asyncio.run(call_once(method, given)))
    if "error" in answer:
        problem = answer["error"]
        data = problem.get("data")
        detail = f": {json.dumps(data, separators=(',', ':'))}" if data else ""
        error_line(f"{problem['message']} ({problem['code']}){detail}")
        raise typer.Exit(1)
    sys.stdout.write(json.dumps(answer["result"], indent=2) + "\n")


WorkspaceArg = Annotated[Path, typer.Argument(metavar="WORKSPACE_DIR",
                                              help="The workspace's directory.")]
NameOption = Annotated[str, typer.Option("--name", metavar="NAME", help="Its name.")]


def _made(action: Callable[[], str]) -> None:
    """Print the id `action` made; its refusal is one line on stderr and exit 1."""
    from ralph.company.layout import CompanyError

    try:
        sys.stdout.write(action() + "\n")
    except CompanyError as exc:
        error_line(str(exc))
        raise typer.Exit(1) from None
    except OSError as exc:
        error_line(f"{exc.filename or 'the workspace'}: {exc.strerror or exc}")
        raise typer.Exit(1) from None


@ac.command("team:new", cls=HelpCommand)
def team_new(workspace_dir: WorkspaceArg, name: NameOption) -> None:
    """Create a team in a workspace; prints its id."""
    from ralph.company.org import create_team

    _made(lambda: create_team(workspace_dir.absolute(), name))


@ac.command("agent:new", cls=HelpCommand)
def agent_new(
    workspace_dir: WorkspaceArg, name: NameOption,
    role: Annotated[str, typer.Option("--role", metavar="ROLE",
                                      help="ceo, director, manager or worker.")],
    provider: Annotated[str, typer.Option("--provider", metavar="PROVIDER",
                                          help="The agent CLI it runs: codex, claude, ...")],
    team: Annotated[str | None, typer.Option("--team", metavar="TEAM_ID",
                                             help="The team it belongs to.")] = None,
) -> None:
    """Create an agent in a workspace; prints its id."""
    from ralph.company.org import create_agent

    _made(lambda: create_agent(workspace_dir.absolute(), name, role, provider, team))


@ac.command("project:new", cls=HelpCommand)
def project_new(workspace_dir: WorkspaceArg, name: NameOption) -> None:
    """Create a project in a workspace; prints its id."""
    from ralph.company.org import create_project

    _made(lambda: create_project(workspace_dir.absolute(), name))


def ac_main() -> None:
    """The `ac` console script."""
    from ralph.cli.main import run_guarded

    sys.exit(run_guarded(ac, sys.argv[1:], "ac"))

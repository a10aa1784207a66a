"""`ralph serve`: the remote API for phones and browsers (ralph.remote)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ralph.cli.helpfmt import at_least
from ralph.cli.output import error_line
from ralph.errors import RalphError
from ralph.project import find_project_root

if TYPE_CHECKING:
    from ralph.remote.server import ServeOptions

MIN_TOKEN_CHARS = 8


def _positive(value: float) -> float:
    if not value > 0:
        raise typer.BadParameter(f"{value} is not a positive number of seconds")
    return value


QR_KINDS = ("app", "web")


def _qr_kind(value: str) -> str:
    if value not in QR_KINDS:
        raise typer.BadParameter(f"{value!r} is not one of: app (the phone app's connection "
                                 "JSON), web (the web monitor's address)")
    return value


def web_url(http_url: str, token: str | None) -> str:
    """The web monitor's address, with the token a browser connects with."""
    from urllib.parse import quote

    return f"{http_url}/" + (f"?token={quote(token, safe='')}" if token is not None else "")


def pairing_lines(ws_url: str, http_url: str, options: ServeOptions,
                  token: str | None, qr: str = "app") -> str:
    """A QR code with the address a phone can reach: the connection JSON a phone app
    scans (`app`), or the web monitor's address a phone's camera opens (`web`)."""
    from ralph.remote.pairing import connection_info, connection_qr, qr_text, reachable_host
    from ralph.remote.server import urls

    host = reachable_host(options.host)
    if host != options.host:  # a wildcard address: one a phone can reach instead
        ws_url, http_url = urls(host, int(http_url.rsplit(":", 1)[1]))
    if qr == "web":
        return f"scan to open the web monitor ({http_url}/):\n{qr_text(web_url(http_url, token))}"
    info = connection_info(ws_url, http_url, options.root.name, token)
    return f"scan to connect ({ws_url}):\n{connection_qr(info)}"


def serve(
    host: Annotated[str, typer.Option("--host", metavar="HOST",
                                      help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", metavar="PORT", callback=at_least(0, 65535),
                                      help="Port (0: a free one).")] = 8766,
    token: Annotated[str | None, typer.Option(
        "--token", metavar="TOKEN",
        help="The token clients must give (default: $RALPH_TOKEN, else a new one).")] = None,
    no_auth: Annotated[bool, typer.Option(
        "--no-auth", help="No token (refused unless the host is a loopback address).")
    ] = False,
    allow_origin: Annotated[list[str] | None, typer.Option(
        "--allow-origin", metavar="ORIGIN",
        help="A browser origin (scheme://host:port) allowed besides the server's own; "
             "repeatable.")] = None,
    heartbeat: Annotated[float, typer.Option(
        "--heartbeat", metavar="SECONDS", callback=_positive,
        help="Seconds between event/heartbeat notifications.")] = 30.0,
    qr: Annotated[str, typer.Option(
        "--qr", metavar="KIND", callback=_qr_kind,
        help="What the QR code drawn in a terminal holds: app (the connection JSON a phone "
             "app scans) or web (the web monitor's address, for a phone's camera).")] = "app",
    root: Annotated[Path | None, typer.Option("--root", metavar="PATH",
                                              help="Project root.")] = None,
) -> None:
    """Serve the remote API (JSON-RPC 2.0 over WebSocket at /ws, OpenRPC at
    /api/rpc/discover) and the web monitor (at /) for the project here, until Ctrl-C,
    SIGTERM or a client's `shutdown`. Prints its URLs and writes .ralph/serve.json
    {pid, ws, http, token} (readable by you only) for local clients."""
    import asyncio

    from ralph.remote.auth import new_token
    from ralph.remote.server import ServeOptions
    from ralph.remote.server import serve as run_server

    if no_auth and token is not None:
        error_line("--no-auth and --token say opposite things: give one of them")
        raise typer.Exit(2)
    given = token if token is not None else os.environ.get("RALPH_TOKEN")
    if given is not None and len(given) < MIN_TOKEN_CHARS:
        where = "--token" if token is not None else "RALPH_TOKEN"
        error_line(f"{where} is too short to be a secret ({len(given)} characters; at least "
                   f"{MIN_TOKEN_CHARS}): leave it out to get a new random one")
        raise typer.Exit(2)
    secret = None if no_auth else (given or new_token())
    options = ServeOptions(root=(root or find_project_root()).resolve(), host=host,
                           port=port, token=secret, allowed_origins=tuple(allow_origin or ()),
                           heartbeat_s=heartbeat)

    def started(ws_url: str, http_url: str) -> None:
        lines = [f"ralph serve: {ws_url} (WebSocket, JSON-RPC 2.0)",
                 f"             {http_url}/api/rpc/discover (OpenRPC)",
                 f"web monitor: {web_url(http_url, secret)}"]
        if secret is not None:
            lines.append(f"token: {secret}   (also in .ralph/serve.json)")
        if sys.stderr.isatty():  # a person looks: a QR code for a phone
            lines.append(pairing_lines(ws_url, http_url, options, secret, qr))
        sys.stderr.write("\n".join(lines) + "\n")
        sys.stderr.flush()

    try:
        code = asyncio.run(run_server(options, started))
    except RalphError as exc:
        error_line(str(exc))
        raise typer.Exit(2) from None
    raise typer.Exit(code)

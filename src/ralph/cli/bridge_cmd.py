"""`ralph bridge`: the editor bridge (JSON-RPC 2.0 over stdio)."""

from __future__ import annotations

from typing import Annotated

import typer

from ralph.cli.output import write_json
from ralph.project import find_project_root


def bridge(openrpc: Annotated[bool, typer.Option(
        "--openrpc", help="Print the OpenRPC document of the bridge and exit.")] = False) -> None:
    """Serve the editor bridge on stdin/stdout for the project here: the bridge protocol
    (vscode-bridge-protocol v1), JSON-RPC 2.0 with one message per line."""
    import asyncio

    from ralph.bridge.methods import build_registry
    from ralph.bridge.server import serve_stdio
    from ralph.config import load_config
    from ralph.loop import LoopService

    root = find_project_root()
    if openrpc:
        service = LoopService(root, config=load_config(root, required=False))
        try:
            write_json(build_registry(service).openrpc())
        finally:
            service.close()
        return
    asyncio.run(serve_stdio(root))

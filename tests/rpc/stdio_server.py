"""A small JSON-RPC server on stdio, run as a child process by test_stdio.py.

`stray` writes to stdout behind the protocol's back (a print, and a child process inheriting
fd 1): both must end up on stderr, never among the protocol lines.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys

from ralph.rpc import Dispatcher, NdjsonServer, Registry, stdio_streams


def _registry() -> Registry:
    registry = Registry(title="stdio test server", version="0")

    @registry.method("ping")
    async def ping() -> dict[str, bool]:
        return {"ok": True}

    @registry.method("stray")
    async def stray() -> str:
        print("stray print from the server")
        sys.stdout.flush()
        subprocess.run(["sh", "-c", "echo stray output from a child"], check=True)
        return "strayed"

    return registry


async def main() -> None:
    reader, writer = await stdio_streams()
    server = NdjsonServer(Dispatcher(_registry()), reader, writer)
    await server.notify("event", {"type": "started"})
    await server.serve()
    await server.notify("event", {"type": "stopped"})
    writer.close()
    await writer.wait_closed()


if __name__ == "__main__":
    asyncio.run(main())

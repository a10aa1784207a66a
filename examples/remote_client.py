"""A minimal client of `ralph serve` (the remote API): connect, initialize, show the status,
optionally start an agent on a prompt, print the events until it stops, and answer its
permission requests from the keyboard.

    ralph serve &                                   # in the project
    python examples/remote_client.py [PROJECT] [--prompt TEXT] [--since-seq N]

It finds the server's address and token in PROJECT/.ralph/serve.json (PROJECT defaults to
the current directory), or takes them from --url and --token. It needs the `websockets`
package (Ralph depends on it: run it with Ralph's Python, e.g. `.venv/bin/python`).
Reconnecting later with `--since-seq` (the `seq` it printed last) shows what it missed.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
from pathlib import Path
from typing import Any

import websockets


class Remote:
    """One connection: requests answered by id, notifications printed as they come."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.ids = itertools.count(1)
        self.waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def read(self) -> None:
        async for text in self.ws:
            message = json.loads(text)
            future = self.waiting.pop(message.get("id"), None) if "id" in message else None
            if future is not None:
                future.set_result(message)
            elif "method" in message:
                await self.events.put(message)

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        request_id = next(self.ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiting[request_id] = future
        await self.ws.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method,
                                       "params": params or {}}))
        answer = await asyncio.wait_for(future, 60)
        if "error" in answer:
            error = answer["error"]
            raise RuntimeError(f"{method}: {error['message']} ({error['code']}) "
                               f"{json.dumps(error.get('data'))}")
        return answer["result"]


def show(event: dict[str, Any]) -> None:
    params = dict(event.get("params") or {})
    name = event["method"].removeprefix("event/")
    seq = params.pop("seq", None)
    where = f"[{seq}] " if seq is not None else ""
    if name == "agent_output":
        print(f"{where}{params.get('type')}: {params.get('content')}")
    else:
        print(f"{where}{name}: {json.dumps(params)}")


async def ask(prompt: str) -> str:
    """A line from the keyboard (without blocking the events meanwhile)."""
    print(prompt, end="", flush=True)
    line: str = await asyncio.to_thread(sys.stdin.readline)
    return line.strip()


async def follow(remote: Remote, session_id: str | None) -> None:
    """Print events; answer permission requests; return when the session stops."""
    while True:
        event = await remote.events.get()
        show(event)
        params = event.get("params") or {}
        if event["method"] == "event/agent_output" and \
                params.get("type") == "permission_request":
            answer = await ask(f"allow {params.get('tool_name')} "
                               f"{json.dumps(params.get('input'))}? [y/N] ")
            result = await remote.call("agent/respond", {
                "tool_use_id": params["tool_use_id"], "session_id": params["session_id"],
                "response": "approved" if answer.lower() in ("y", "yes") else "denied"})
            print(f"answered: {result['decision']}")
        if event["method"] == "event/agent_stopped" and params.get("session_id") == session_id:
            return


async def main(args: argparse.Namespace) -> int:
    url, token = args.url, args.token
    if url is None:
        serve_file = Path(args.project) / ".ralph" / "serve.json"
        try:
            info = json.loads(serve_file.read_text())
        except (OSError, ValueError):
            print(f"error: {serve_file} cannot be read: is `ralph serve` running there? "
                  "(or give --url and --token)", file=sys.stderr)
            return 2
        url, token = info["ws"], token or info.get("token")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with websockets.connect(url, additional_headers=headers) as ws:
        remote = Remote(ws)
        reader = asyncio.create_task(remote.read())
        params: dict[str, Any] = {"clientInfo": {"name": "remote_client.py",
                                                 "version": "1"}}
        if args.since_seq is not None:
            params["since_seq"] = args.since_seq
        hello = await remote.call("initialize", params)
        print(f"connected to {hello['serverInfo']['name']} {hello['serverInfo']['version']}"
              f" (agents: {', '.join(hello['capabilities']['supportedAgents']) or 'none'};"
              f" {hello['replayed']} missed events replayed; last_seq {hello['last_seq']})")
        while not remote.events.empty():  # what it missed came before the answer
            show(remote.events.get_nowait())
        status = await remote.call("status/get")
        print(f"status: {status['repo_name']}: agent {status['agent_state']}")
        if args.prompt:
            run: dict[str, Any] = {"prompt": args.prompt, "approvals": args.approvals}
            if args.agent:
                run["agent_type"] = args.agent
            started = await remote.call("agent/run", run)
            print(f"started {started['agent_type']} as {started['session_id']}")
            await follow(remote, started["session_id"])
        reader.cancel()
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("project", nargs="?", default=".")
    parser.add_argument("--url", help="the server's ws:// address (default: serve.json's)")
    parser.add_argument("--token", help="its token (default: serve.json's)")
    parser.add_argument("--prompt", help="start an agent on this prompt")
    parser.add_argument("--agent", help="which agent (default: the project's)")
    parser.add_argument("--approvals", choices=("auto", "ask", "deny"), default="auto")
    parser.add_argument("--since-seq", type=int, help="replay the events after this seq")
    try:
        sys.exit(asyncio.run(main(parser.parse_args())))
    except (OSError, RuntimeError, websockets.WebSocketException) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)

"""A minimal client of `ralph bridge` (the editor bridge): start it, call a few methods, print
the events of a run, and close it.

    python examples/bridge_client.py /path/to/project [--run]

It runs `ralph` from PATH, else the one installed beside the Python running it (so
`.venv/bin/python examples/bridge_client.py ...` works without activating the virtualenv).
Only the standard library: one JSON object per line in each direction.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any


def find_ralph() -> str:
    """`ralph` on PATH, else beside this interpreter (a virtualenv's bin/); exits if neither."""
    found = shutil.which("ralph")
    if found is not None:
        return found
    beside = Path(sys.executable).with_name("ralph")
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    sys.exit(f"error: ralph is neither on PATH nor beside {sys.executable}: install Ralph "
             "(`make demo` in its checkout) and run this with .venv/bin/python, or put "
             "ralph on PATH")


class Bridge:
    def __init__(self, project: str) -> None:
        self.proc = subprocess.Popen([find_ralph(), "bridge"], cwd=project,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     bufsize=1)
        self.next_id = 0

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Send a request; print events until its response comes; return its result."""
        self.next_id += 1
        request = {"jsonrpc": "2.0", "id": self.next_id, "method": method,
                   "params": params or {}}
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            message = json.loads(line)
            if message.get("method") == "event":
                print("event:", message["params"])
            elif message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(message["error"])
                return message["result"]
        raise RuntimeError("the bridge exited")

    def events_until(self, kind: str) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            message = json.loads(line)
            if message.get("method") == "event":
                print("event:", message["params"])
                if message["params"]["type"] == kind:
                    return

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        with contextlib.suppress(BrokenPipeError):  # it may have exited already
            self.proc.stdin.close()  # EOF: the bridge stops any run and exits
        for line in self.proc.stdout:
            print("event:", json.loads(line)["params"])
        self.proc.wait(timeout=30)


def main() -> int:
    project = sys.argv[1] if len(sys.argv) > 1 else "."
    bridge = Bridge(project)
    try:
        print("ping:", bridge.call("ping"))
        status = bridge.call("status")
        print(f"status: {status['done']}/{status['total']} done, next: {status['next']}")
        if "--run" in sys.argv:
            print("run:", bridge.call("run", {"maxIterations": 3}))
            bridge.events_until("run_stopped")
    except RuntimeError as exc:  # an error response, or the bridge exited (it said why)
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        bridge.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

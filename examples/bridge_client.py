"""A minimal client of `ralph bridge` (the editor bridge): start it, call a few methods, print
the events of a run, and close it.

    python examples/bridge_client.py /path/to/project [--run]

Only the standard library: one JSON object per line in each direction.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any


class Bridge:
    def __init__(self, project: str) -> None:
        self.proc = subprocess.Popen(["ralph", "bridge"], cwd=project, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1)
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
    finally:
        bridge.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`python -m ralph.testing.fakellm --scenario FILE [--port 0] [--log FILE]`.

Prints the server's URL (one line) on stdout once it listens, logs every request as a JSON
line to --log, and stops cleanly on SIGTERM or SIGINT (exit code 0).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from ralph.testing.fakellm.scenario import ScenarioError
from ralph.testing.fakellm.server import FakeLLM


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ralph.testing.fakellm",
                                     description="A fake model server on 127.0.0.1.")
    parser.add_argument("--scenario", required=True, type=Path, help="scenario JSON file")
    parser.add_argument("--port", type=int, default=0, help="port (0: a free one)")
    parser.add_argument("--log", type=Path, help="append each request as a JSON line here")
    args = parser.parse_args(argv)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        server = FakeLLM(args.scenario, args.port, log_path=args.log)
        server.start()
    except ScenarioError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: cannot listen on 127.0.0.1:{args.port}: {exc.strerror}", file=sys.stderr)
        return 1
    try:
        print(server.url, flush=True)
        while not stop.wait(0.2):
            pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

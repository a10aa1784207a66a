"""JSON-RPC over stdio: `ping` and `status` against `ralph bridge`, sequential and with 16
requests in flight, on a project with 1,000 recorded iterations.

    python benchmarks/rpc_bench.py [--runs 5] [--requests 2000] [--iterations 1000]

Sequential: one request, wait for its response, the next (latency p50/p99 in µs).
Pipelined: 16 requests in flight at all times (requests/s). Targets: ping p50 <= 100 µs
sequential and >= 10,000 requests/s pipelined; status p50 <= 1 ms.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from loop_bench import history_project  # noqa: E402


class Client:
    """A bare client: lines out, lines in, events skipped."""

    def __init__(self, root: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "ralph", "bridge"], cwd=root,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin = self.proc.stdin
        self.stdout = self.proc.stdout
        self.next_id = 0

    def request(self, method: str) -> bytes:
        self.next_id += 1
        return b'{"jsonrpc":"2.0","id":%d,"method":"%s"}\n' % (self.next_id, method.encode())

    def read_response(self) -> dict[str, object]:
        while True:
            message = orjson.loads(self.stdout.readline())
            if "id" in message:
                return dict(message)

    def sequential(self, method: str, count: int) -> list[float]:
        times = []
        for _ in range(count):
            line = self.request(method)
            start = time.perf_counter()
            self.stdin.write(line)
            self.stdin.flush()
            reply = self.read_response()
            times.append((time.perf_counter() - start) * 1e6)
            assert "result" in reply, reply
        return times

    def pipelined(self, method: str, count: int, depth: int = 16) -> float:
        start = time.perf_counter()
        sent = received = 0
        while sent < min(depth, count):
            self.stdin.write(self.request(method))
            sent += 1
        self.stdin.flush()
        while received < count:
            self.read_response()
            received += 1
            if sent < count:
                self.stdin.write(self.request(method))
                self.stdin.flush()
                sent += 1
        return count / (time.perf_counter() - start)

    def close(self) -> None:
        self.stdin.close()
        self.proc.wait(timeout=60)


def main() -> int:
    args = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args.add_argument("--runs", type=int, default=5)
    args.add_argument("--requests", type=int, default=2000)
    args.add_argument("--iterations", type=int, default=1000)
    opts = args.parse_args()
    base = Path(tempfile.mkdtemp(prefix="ralph-rpc-bench-"))
    rows: dict[str, list[float]] = {}
    try:
        root = history_project(base, 50, opts.iterations)
        for _ in range(opts.runs):
            client = Client(root)
            try:
                client.sequential("ping", 200)  # warm up
                for method in ("ping", "status"):
                    times = sorted(client.sequential(method, opts.requests))
                    rows.setdefault(f"{method} p50", []).append(times[len(times) // 2])
                    rows.setdefault(f"{method} p99", []).append(
                        times[int(len(times) * 0.99) - 1])
                    rows.setdefault(f"{method} pipelined", []).append(
                        client.pipelined(method, opts.requests * 5))
            finally:
                client.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    print(f"# {cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; median of {opts.runs} runs; project with "
          f"{opts.iterations:,} recorded iterations")
    targets: dict[str, tuple[str, Callable[[float], bool] | None]] = {
        "ping p50": ("<= 100 µs", lambda v: v <= 100),
        "ping pipelined": (">= 10,000/s", lambda v: v >= 10_000),
        "status p50": ("<= 1,000 µs", lambda v: v <= 1000)}
    print(f"{'measurement':<22} {'median':>12} {'min .. max':>22} {'target':>13} result")
    for name, values in rows.items():
        unit = "req/s" if "pipelined" in name else "µs"
        median = statistics.median(values)
        target, check = targets.get(name, ("", None))
        result = "" if check is None else ("pass" if check(median) else "FAIL")
        print(f"{name:<22} {median:>8.0f} {unit:<5} {min(values):>9.0f} .. {max(values):<9.0f} "
              f"{target:>13} {result}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

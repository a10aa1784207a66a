"""JSON-RPC over stdio: `ping` and `status` against `ralph bridge`, sequential and with 16
requests in flight, on a project with 1,000 recorded iterations; optionally against a peer's
bridge and a pipe floor in the same run.

    python benchmarks/rpc_bench.py [--runs 5] [--requests 2000] [--iterations 1000]
        [--peer "/tmp/ralph-gold-venv/bin/ralph bridge"] [--echo]
        [--before "env PYTHONPATH=/tmp/ralph-before/src .venv/bin/python -m ralph bridge"]
        [--pin none|same|split]

Sequential: one request, wait for its response, the next (latency p50/p99 in µs).
Pipelined: 16 requests in flight at all times, a new one written as each response arrives
(requests/s); with it, the CPU time the server and the client used per request (`srv CPU`,
`cli CPU`, from /proc): where the two run in parallel on two cores the rate is bound by the
larger, where they share one core by the sum plus the context switches. The client is a
plain one: it writes each request line with one write and reads response lines with a
buffered reader (`readline` on the pipe), as an editor's line reader does; it never batches
its own writes.

Columns: `ralph` (this checkout's `ralph bridge`), `before` (any other command, e.g. an older
checkout, for before/after figures measured together), `peer` (another implementation of the
bridge protocol, e.g. ralph-gold's `ralph bridge`), `floor` (`--echo`: a trivial Python
process that answers every line with a canned response: what the pipes and a Python read
and write cost by themselves). The columns are measured interleaved, each run a fresh
process per column, in an order that rotates from run to run, so that a slow phase of the
machine falls on all of them alike. A measurement stops after its count of requests or after
--budget seconds, whichever comes first (a slow `status` would otherwise take minutes).

Targets: ping p50 no slower than the peer's (100 µs without a peer); ping >= 60,000
requests/s with 16 in flight; status p50 <= 1 ms.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from loop_bench import history_project  # noqa: E402

ECHO = """\
import sys
reply = b'{"jsonrpc":"2.0","id":0,"result":{"ok":true}}\\n'
out = sys.stdout.buffer
for _line in sys.stdin.buffer:
    out.write(reply)
    out.flush()
"""
"""The floor: one canned response per request line, written at once (no parsing at all)."""

DEPTH = 16
"""Requests in flight in the pipelined measurement."""

CLIENT_CPU = {"same": 0, "split": 0}
SERVER_CPU = {"same": 0, "split": 1}
"""--pin: `same` puts the client and the server on one CPU (what they get when the other
core is busy), `split` on one CPU each (an idle 2-core machine); `none` lets the scheduler
place them, which is what the figures mean unless said otherwise."""


@dataclass(frozen=True)
class Target:
    """One column: a name, the command that starts a bridge on stdio, and what it answers."""

    name: str
    argv: list[str]
    methods: tuple[str, ...] = ("ping", "status")


class Client:
    """A bare client: lines out (one write each), lines in (a buffered reader), events skipped."""

    def __init__(self, argv: list[str], root: Path, cpu: int | None = None) -> None:
        if cpu is not None:  # the server and every thread it starts on that CPU alone
            argv = ["taskset", "-c", str(cpu), *argv]
        self.proc = subprocess.Popen(argv, cwd=root, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin = self.proc.stdin
        self.stdout = self.proc.stdout
        self.next_id = 0

    def request(self, method: str) -> bytes:
        self.next_id += 1
        return b'{"jsonrpc":"2.0","id":%d,"method":"%s"}\n' % (self.next_id, method.encode())

    def read_response(self) -> dict[str, object]:
        while True:
            line = self.stdout.readline()
            if not line:
                raise RuntimeError("the bridge closed its output")
            message = orjson.loads(line)
            if "id" in message:
                return dict(message)

    def sequential(self, method: str, count: int, budget_s: float) -> list[float]:
        times = []
        deadline = time.perf_counter() + budget_s
        for _ in range(count):
            line = self.request(method)
            start = time.perf_counter()
            self.stdin.write(line)
            self.stdin.flush()
            reply = self.read_response()
            end = time.perf_counter()
            times.append((end - start) * 1e6)
            assert "result" in reply, reply
            if end > deadline and len(times) >= 200:
                break
        return times

    def pipelined(self, method: str, count: int, budget_s: float, depth: int = DEPTH) -> float:
        start = time.perf_counter()
        deadline = start + budget_s
        sent = received = 0
        while sent < min(depth, count):
            self.stdin.write(self.request(method))
            sent += 1
        self.stdin.flush()
        while received < sent:
            self.read_response()
            received += 1
            if sent < count and (received < 200 or time.perf_counter() < deadline):
                self.stdin.write(self.request(method))
                self.stdin.flush()
                sent += 1
        return received / (time.perf_counter() - start)

    def close(self) -> None:
        self.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait(timeout=10)


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process so far (Linux /proc), None where unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(target: Target, root: Path, opts: argparse.Namespace,
            rows: dict[tuple[str, str], list[float]]) -> None:
    """One run of one column: a fresh process, a warm-up, then each measurement."""
    client = Client(target.argv, root, SERVER_CPU.get(opts.pin))
    try:
        client.sequential("ping", 200, opts.budget)  # warm up
        for method in ("ping", "status"):
            if method not in target.methods:
                continue
            times = sorted(client.sequential(method, opts.requests, opts.budget))
            rows.setdefault((f"{method} p50", target.name), []).append(times[len(times) // 2])
            rows.setdefault((f"{method} p99", target.name), []).append(
                times[max(0, int(len(times) * 0.99) - 1)])
            server_cpu, client_cpu = cpu_seconds(client.proc.pid), os.times()
            sent_before = client.next_id
            rows.setdefault((f"{method} pipelined", target.name), []).append(
                client.pipelined(method, opts.requests * 5, opts.budget))
            count = client.next_id - sent_before
            if server_cpu is not None and (server_after := cpu_seconds(client.proc.pid)):
                # CPU time per request, wherever it ran: what bounds the rate when the
                # server has a core to itself (then rate <= 1 / server CPU per request).
                rows.setdefault((f"{method} srv CPU", target.name), []).append(
                    (server_after - server_cpu) / count * 1e6)
                client_after = os.times()
                rows.setdefault((f"{method} cli CPU", target.name), []).append(
                    (client_after.user + client_after.system - client_cpu.user
                     - client_cpu.system) / count * 1e6)
    finally:
        client.close()


def main() -> int:
    args = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args.add_argument("--runs", type=int, default=5)
    args.add_argument("--requests", type=int, default=2000)
    args.add_argument("--iterations", type=int, default=1000)
    args.add_argument("--budget", type=float, default=3.0,
                      help="seconds at most per measurement (at least 200 requests)")
    args.add_argument("--peer", metavar="CMD",
                      help="the command that starts the peer's bridge on stdio, e.g. "
                           "'/tmp/ralph-gold-venv/bin/ralph bridge'")
    args.add_argument("--before", metavar="CMD",
                      help="another command to measure as the 'before' column, e.g. an "
                           "older checkout: 'env PYTHONPATH=/tmp/old/src python -m ralph bridge'")
    args.add_argument("--echo", action="store_true",
                      help="also measure the floor: a Python process echoing a canned response")
    args.add_argument("--pin", choices=("none", "same", "split"), default="none",
                      help="CPU placement: the client and the server on one CPU (same), on "
                           "one each (split), or left to the scheduler (none)")
    opts = args.parse_args()
    if opts.pin in CLIENT_CPU:
        os.sched_setaffinity(0, {CLIENT_CPU[opts.pin]})
    targets = [Target("ralph", [sys.executable, "-m", "ralph", "bridge"])]
    if opts.before:
        targets.append(Target("before", shlex.split(opts.before)))
    if opts.peer:
        targets.append(Target("peer", shlex.split(opts.peer)))
    if opts.echo:
        targets.append(Target("floor", [sys.executable, "-c", ECHO], methods=("ping",)))
    base = Path(tempfile.mkdtemp(prefix="ralph-rpc-bench-"))
    rows: dict[tuple[str, str], list[float]] = {}
    load_before = os.getloadavg()
    try:
        root = history_project(base, 50, opts.iterations)
        # ralph-gold refuses a max_iterations over 1,000; Ralph's status does not read it.
        toml = root / "ralph.toml"
        toml.write_text(toml.read_text().replace("max_iterations = 100000",
                                                 "max_iterations = 1000"))
        for run in range(opts.runs):
            shift = run % len(targets)
            for target in targets[shift:] + targets[:shift]:
                measure(target, root, opts, rows)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    load_after = os.getloadavg()
    report(opts, targets, rows, load_before, load_after)
    return 0


def report(opts: argparse.Namespace, targets: list[Target],
           rows: dict[tuple[str, str], list[float]],
           load_before: tuple[float, float, float],
           load_after: tuple[float, float, float]) -> None:
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    print(f"# {cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; median of {opts.runs} runs (min .. max); "
          f"project with {opts.iterations:,} recorded iterations; load average "
          f"{load_before[0]:.2f} before, {load_after[0]:.2f} after; CPU placement: {opts.pin}")
    for target in targets:
        print(f"# {target.name}: {shlex.join(target.argv) if target.name != 'floor' else 'echo'}")
    peer_ping = rows.get(("ping p50", "peer"))
    targets_for: dict[str, tuple[str, Callable[[float], bool]]] = {
        "ping p50": (("<= peer" if peer_ping else "<= 100 µs"),
                     (lambda v: v <= statistics.median(peer_ping)) if peer_ping
                     else (lambda v: v <= 100)),
        "ping pipelined": (">= 60,000/s", lambda v: v >= 60_000),
        "status p50": ("<= 1,000 µs", lambda v: v <= 1000)}
    width = 30
    header = f"{'measurement':<16}" + "".join(f"{t.name:>{width}}" for t in targets)
    print(header + f"{'target':>14} result")
    names = list(dict.fromkeys(name for name, _ in rows))
    for name in names:
        unit = "/s" if "pipelined" in name else "µs"
        if "CPU" in name:
            unit = "µs/req"
        cells = []
        for target in targets:
            values = rows.get((name, target.name))
            if not values:
                cells.append(f"{'-':>{width}}")
                continue
            cell = (f"{statistics.median(values):,.0f} {unit} "
                    f"({min(values):,.0f}..{max(values):,.0f})")
            cells.append(f"{cell:>{width}}")
        target_text, result = "", ""
        ours = rows.get((name, "ralph"))
        if name in targets_for and ours:
            target_text, check = targets_for[name]
            result = "pass" if check(statistics.median(ours)) else "FAIL"
        print(f"{name:<16}" + "".join(cells) + f"{target_text:>14} {result}")


if __name__ == "__main__":
    sys.exit(main())

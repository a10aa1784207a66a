#!/usr/bin/env python3
"""The AgentCompany index (`.local/index.sqlite`) over a large workspace.

    .venv/bin/python benchmarks/company_bench.py                 # 1,000 runs x 1,000 events
    .venv/bin/python benchmarks/company_bench.py --quick         # a smoke run, seconds
    .venv/bin/python benchmarks/company_bench.py --runs 200 --events 5000 --repeat 50

A scratch workspace is written directly (run.yaml files, events.jsonl files of realistic
events: `run.started`, `provider.raw` chunks of ~200 bytes of output, `run.ended`), then:

- **first sync**: `index.sync` of the workspace without an index, in a fresh child process
  (through ralph.proc), timed there; its peak RSS is the child's `ru_maxrss` (targets: 30 s,
  200 MB for 1,000,000 events);
- **list_events**: `index.list_events` with limit 500 (newest first, no filter), p50 over
  `--repeat` calls (target 20 ms);
- **monitor.snapshot**: the default snapshot (which syncs first: nothing new), p50 (target
  50 ms);
- **notification latency**: a real `ac server:start` subscribed to the workspace; an event
  appended by the benchmark's process, until its `events.notification` is read, p50 and
  p99 of 200 (target p99 100 ms).

The service functions are called in-process (what the server runs in its worker thread),
without the JSON-RPC round trip. The table goes to stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from ralph.company.events import append_event, envelope
from ralph.company.index import list_events, sync_index
from ralph.company.snapshots import monitor_snapshot
from ralph.company.workspace import init_workspace
from ralph.proc import run_process
from ralph.store.frame import format_ts

SCRIPT = Path(__file__).resolve()
RESULT_MARK = "BENCH_RESULT "
PROJECTS = 10
CHUNK = "x" * 150 + " a line of agent output, as a provider prints it\n"


@dataclass(frozen=True)
class Row:
    """One line of the table."""

    label: str
    value: float
    unit: str
    target: float | None = None  # lower is better for every measurement here

    def cells(self) -> list[str]:
        verdict = "" if self.target is None else (
            "ok" if self.value <= self.target else "MISSED")
        target = "" if self.target is None else f"<= {self.target:g} {self.unit}"
        return [self.label, f"{self.value:,.2f} {self.unit}", target, verdict]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- the workspace -------------------------------------------------------------------------

def make_workspace(base: Path, runs: int, events: int) -> Path:
    """A workspace with `runs` runs (over PROJECTS projects) of `events` events each."""
    root = base / "ws"
    init_workspace(root)
    start_ms = int(time.time() * 1000) - runs * events * 10
    for n in range(runs):
        pid = f"proj_bench{n % PROJECTS:02d}"
        project = root / "work/projects" / pid
        if n < PROJECTS:
            project.mkdir(parents=True)
            (project / "project.yaml").write_text(
                f"schema_version: 1\ntype: project\nid: {pid}\nname: Bench {n}\n"
                f"status: active\ncreated_at: {format_ts(start_ms)}\n")
        rid = f"run_bench{n:06d}"
        run = project / "runs" / rid
        run.mkdir(parents=True)
        created = format_ts(start_ms + n * events * 10)
        (run / "run.yaml").write_text(
            f"schema_version: 1\ntype: run\nid: {rid}\nproject_id: {pid}\n"
            f"agent_id: agent_bench\nprovider: codex\ncreated_at: {created}\n"
            f"status: ended\ncontext_pack_id: ctx_bench{n:06d}\n"
            f"events_relpath: runs/{rid}/events.jsonl\n")
        (run / "events.jsonl").write_bytes(_events(rid, pid, start_ms + n * events * 10, events))
    return root


def _events(rid: str, pid: str, t0: int, count: int) -> bytes:
    def line(i: int, kind: str, payload: dict[str, Any], actor: str, vis: str) -> bytes:
        return orjson.dumps({
            "schema_version": 1, "ts_wallclock": format_ts(t0 + i * 10), "run_id": rid,
            "session_ref": f"local_{rid}", "actor": actor, "visibility": vis, "type": kind,
            "payload": payload, "ts_monotonic_ms": 1_000_000 + i * 10}) + b"\n"

    lines = [line(0, "run.started", {"project_id": pid, "agent_id": "agent_bench",
                                     "provider": "codex", "context_pack_id": "ctx"},
                  "system", "org")]
    lines += [line(i, "provider.raw", {"stream": "stdout", "chunk": CHUNK}, "agent_bench",
                   "team") for i in range(1, count - 1)]
    lines.append(line(count - 1, "run.ended", {"exit_code": 0, "signal": None,
                                               "stopped": False}, "system", "org"))
    return b"".join(lines[:count])


# -- measurements (one function each) ------------------------------------------------------

def measure_first_sync(root: Path, timeout_s: float) -> list[Row]:
    """`index.sync` of a workspace without an index, in a child process: time and peak RSS."""
    result = asyncio.run(run_process(
        [sys.executable, str(SCRIPT), "--child-sync", str(root)], cwd=root,
        timeout_s=timeout_s))
    found = [line for line in result.tail.decode().splitlines()
             if line.startswith(RESULT_MARK)]
    if result.exit_code != 0 or not found:
        raise SystemExit(f"the sync child failed ({result.exit_code}):\n"
                         f"{result.tail.decode()[-2000:]}")
    child = orjson.loads(found[-1][len(RESULT_MARK):])
    events = child["events_indexed"]
    return [Row(f"first index.sync ({events:,} events)", child["seconds"], "s", 30),
            Row("first index.sync rate", events / child["seconds"], "events/s"),
            Row("first index.sync peak RSS (child)", child["rss_mb"], "MB", 200)]


def child_sync(root: Path) -> None:
    started = time.perf_counter()
    result = sync_index(root)
    seconds = time.perf_counter() - started
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(RESULT_MARK + orjson.dumps({"seconds": seconds, "rss_mb": rss_mb,
                                      "events_indexed": result["events_indexed"]}).decode())


def _p50_ms(action: Callable[[], object], repeat: int) -> float:
    action()  # warm (page cache, imports)
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def measure_list_events(root: Path, repeat: int) -> list[Row]:
    p50 = _p50_ms(lambda: list_events(root, limit=500), repeat)
    by_run = _p50_ms(lambda: list_events(root, run_id="run_bench000000", limit=500), repeat)
    return [Row("index.list_events limit 500, p50", p50, "ms", 20),
            Row("index.list_events limit 500 of one run, p50", by_run, "ms")]


def measure_monitor(root: Path, repeat: int) -> list[Row]:
    p50 = _p50_ms(lambda: monitor_snapshot(root, []), repeat)
    unsynced = _p50_ms(lambda: monitor_snapshot(root, [], sync_index=False), repeat)
    return [Row("monitor.snapshot (with its sync), p50", p50, "ms", 50),
            Row("monitor.snapshot, sync_index=false, p50", unsynced, "ms")]


def measure_notification_latency(root: Path, repeat: int) -> list[Row]:
    """An event appended by this process -> its `events.notification` from a real `ac
    server:start` (another process) subscribed to the workspace. Both read CLOCK_MONOTONIC,
    one clock for every process, so the append's time travels in the event."""
    # 200 samples for a p99 worth the name; a quick run (fewer calls) takes 20.
    return asyncio.run(_notification_latency(root, 200 if repeat >= 30 else 20))


async def _notification_latency(root: Path, samples: int) -> list[Row]:
    ac = Path(sys.executable).with_name("ac")
    server = await asyncio.create_subprocess_exec(
        str(ac), "server:start", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, start_new_session=True, limit=64 * 1024 * 1024)
    assert server.stdin is not None and server.stdout is not None
    try:
        server.stdin.write(orjson.dumps({
            "jsonrpc": "2.0", "id": 1, "method": "events.subscribe",
            "params": {"workspace_dir": str(root), "event_types": ["bench.ping"]}}) + b"\n")
        await server.stdin.drain()
        await asyncio.wait_for(server.stdout.readline(), 60)  # the answer
        await asyncio.sleep(1.0)  # the watcher is set up (inotify on every directory)
        run = next((root / "work/projects").glob("*/runs/*/events.jsonl"))
        latencies = []
        for n in range(samples):
            sent = time.monotonic_ns()
            append_event(run, envelope(run.parent.name, "bench.ping", {"n": n, "sent": sent}))
            while True:
                message = orjson.loads(await asyncio.wait_for(server.stdout.readline(), 30))
                if message.get("params", {}).get("event", {}).get("payload", {}).get("n") == n:
                    break
            latencies.append((time.monotonic_ns() - sent) / 1e6)
            await asyncio.sleep(0.02)
    finally:
        server.stdin.close()
        try:
            await asyncio.wait_for(server.wait(), 30)
        except TimeoutError:
            server.kill()
            await server.wait()
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))]
    return [Row(f"notification latency (append in another process), p50 of {samples}",
                statistics.median(latencies), "ms"),
            Row(f"notification latency, p99 of {samples}", p99, "ms", 100)]


MEASUREMENTS: list[Callable[[Path, int], list[Row]]] = [
    measure_list_events, measure_monitor, measure_notification_latency]


# -- main ----------------------------------------------------------------------------------

def machine() -> str:
    load = os.getloadavg()[0]
    return (f"{datetime.now(UTC):%Y-%m-%d}, {platform.machine()}, {os.cpu_count()} CPUs, "
            f"Python {platform.python_version()}, load {load:.2f} at the start")


def render(rows: list[Row]) -> str:
    head = ["measurement", "value", "target", ""]
    lines = ["| " + " | ".join(head) + " |", "| --- | ---: | ---: | --- |"]
    lines += ["| " + " | ".join(row.cells()) + " |" for row in rows]
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="runs in the workspace")
    parser.add_argument("--events", type=int, default=1000, help="events per run")
    parser.add_argument("--repeat", type=int, default=30, help="calls per p50")
    parser.add_argument("--quick", action="store_true", help="20 runs x 50 events, 5 calls")
    parser.add_argument("--timeout", type=float, default=600, help="seconds for the sync")
    parser.add_argument("--child-sync", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.events, args.repeat = 20, 50, 5
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child_sync:
        child_sync(args.child_sync)
        return 0
    header = machine()
    with tempfile.TemporaryDirectory(prefix="company-bench-") as base:
        log(f"writing {args.runs:,} runs x {args.events:,} events...")
        started = time.perf_counter()
        root = make_workspace(Path(base), args.runs, args.events)
        log(f"  written in {time.perf_counter() - started:.1f} s; first sync...")
        rows = measure_first_sync(root, args.timeout)
        for measure in MEASUREMENTS:
            log(f"{measure.__name__}...")
            rows += measure(root, args.repeat)
    print(f"# AgentCompany index, {header}")
    print(f"{args.runs:,} runs x {args.events:,} events; p50 of {args.repeat} calls\n")
    print(render(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

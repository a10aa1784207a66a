"""Loop benchmarks: orchestration overhead per iteration, and `ralph status` latency.

    python benchmarks/loop_bench.py [--runs 5] [--tasks 50] [--iterations 10000] [--quick]

1. Overhead: a 50-task PRD, gates off, commits on, and a no-op agent (a shell one-liner that
   ticks the next box). Overhead = an iteration's wall time minus the agent process's own
   run time (`agent.finished` duration): prompt, tracker, git snapshots, commit, state,
   events. Target: <= 40 ms.
2. Status: a project with 10,000 recorded iterations (state.json and about ten events per
   iteration in the store). Measures the status computation in-process (what every face
   calls) and `ralph status --json` as a whole process. Target: <= 100 ms.

Each figure is the median over --runs runs (each run's own median over its iterations).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ralph.config import load_config
from ralph.loop import LoopService, project_status
from ralph.loop.models import LastIteration
from ralph.loop.paths import ProjectPaths
from ralph.loop.state import LoopState, TaskState, save_state
from ralph.scaffold import scaffold
from ralph.store import Frame, Store

NOOP_AGENT = ["sh", "-c", "cat >/dev/null; sed -i '0,/- \\[ \\]/s//- [x]/' PRD.md"]


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, timeout=60)


def make_project(root: Path, tasks: int) -> None:
    root.mkdir(parents=True)
    _git(root, "init", "-q")
    _git(root, "config", "user.name", "bench")
    _git(root, "config", "user.email", "bench@localhost")
    scaffold(root, "md", False)
    (root / "PRD.md").write_text("# Bench\n\n## Tasks\n\n" + "".join(
        f"- [ ] {i}. Task number {i}\n  - it is done\n" for i in range(1, tasks + 1)))
    (root / "ralph.toml").write_text(
        '[loop]\ndefault_agent = "noop"\nmax_iterations = 100000\n\n'
        f"[agents.noop]\nargv = {json.dumps(NOOP_AGENT)}\n\n[gates]\ncommands = []\n\n"
        "[git]\nauto_commit = true\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "bench project")


def overhead_run(base: Path, tasks: int) -> dict[str, float]:
    root = base / "overhead"
    make_project(root, tasks)
    frames: list[Frame] = []
    service = LoopService(root, observer=frames.append)
    try:
        outcome = asyncio.run(service.run())
    finally:
        service.close()
    assert outcome.reason == "complete", outcome
    overheads, totals, agents = [], [], []
    agent_s = 0.0
    for frame in frames:
        if frame.topic == "agent.finished":
            agent_s = frame.meta["duration_s"]
        elif frame.topic == "iteration.finished":
            total = frame.meta["duration_seconds"]
            totals.append(total * 1000)
            agents.append(agent_s * 1000)
            overheads.append((total - agent_s) * 1000)
    shutil.rmtree(root)
    overheads.sort()
    return {"iterations": len(overheads), "overhead_ms": statistics.median(overheads),
            "overhead_p90_ms": overheads[int(len(overheads) * 0.9) - 1],
            "iteration_ms": statistics.median(totals), "agent_ms": statistics.median(agents)}


def history_project(base: Path, tasks: int, iterations: int) -> Path:
    """A project whose history holds `iterations` iterations: their state and events."""
    root = base / "history"
    make_project(root, tasks)
    paths = ProjectPaths(root)
    with Store(paths.store, durability="never") as store:
        for n in range(1, iterations + 1):
            stream = f"runs/run_{n // 100:06d}"
            task = str(n % tasks + 1)
            store.append("iteration.started", {"iteration": n, "task_id": task}, stream=stream)
            store.append("agent.started", {"agent": "noop"}, stream=stream)
            for _ in range(6):
                store.append("agent.output", {"kind": "text", "content": "working " * 8},
                             stream=stream)
            store.append("agent.finished", {"status": "ok", "exit_code": 0}, stream=stream)
            store.append("iteration.finished", {"iteration": n, "task_id": task,
                                                "verified": False}, stream=stream)
    now = datetime.now(UTC).isoformat()
    state = LoopState(iteration_count=iterations, tasks={str(i): TaskState(attempts=iterations //
                                                                           tasks)
                                                         for i in range(1, tasks + 1)},
                      last=LastIteration(iteration_id=f"{iterations:06d}", iteration=iterations,
                                         run_id="run_x", task_id="1", task_title="Task number 1",
                                         status="not_done", exit_code=0, started_at=now,
                                         finished_at=now, verified=False, reason="bench"))
    save_state(paths.state, state)
    return root


def status_run(root: Path, samples: int) -> dict[str, float]:
    paths = ProjectPaths(root)
    config = load_config(root)
    timings = []
    for _ in range(samples):
        start = time.perf_counter()
        report = project_status(paths, config)
        timings.append((time.perf_counter() - start) * 1000)
    assert report.total > 0
    timings.sort()
    cli = []
    ralph = str(Path(sys.executable).with_name("ralph"))
    for _ in range(5):
        start = time.perf_counter()
        subprocess.run([ralph, "status", "--json"], cwd=root, check=True, capture_output=True,
                       timeout=60)
        cli.append((time.perf_counter() - start) * 1000)
    return {"status_ms": statistics.median(timings),
            "status_p99_ms": timings[int(len(timings) * 0.99) - 1],
            "cli_ms": statistics.median(cli)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--iterations", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true", help="2 runs, 10 tasks, 500 iterations")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.tasks, args.iterations = 2, 10, 500
    base = Path(tempfile.mkdtemp(prefix="ralph-loop-bench-"))
    try:
        over: list[dict[str, float]] = []
        for run in range(args.runs):
            over.append(overhead_run(base, args.tasks))
            print(f"overhead run {run + 1}/{args.runs}: {over[-1]['overhead_ms']:.1f} ms",
                  file=sys.stderr)
        root = history_project(base, args.tasks, args.iterations)
        empty = base / "empty"
        make_project(empty, args.tasks)
        stat = [status_run(root, 200) for _ in range(args.runs)]
        stat0 = [status_run(empty, 200) for _ in range(args.runs)]
    finally:
        shutil.rmtree(base, ignore_errors=True)
    report(args, over, stat, stat0)
    return 0


def _med(rows: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def _span(rows: list[dict[str, float]], key: str) -> str:
    values = [r[key] for r in rows]
    return f"{min(values):.1f} .. {max(values):.1f}"


def report(args: Any, over: list[dict[str, float]], stat: list[dict[str, float]],
           stat0: list[dict[str, float]]) -> None:
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    print(f"# {cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; median of {args.runs} runs")
    rows = [
        (f"overhead per iteration ({args.tasks} tasks, commits on)", _med(over, "overhead_ms"),
         _span(over, "overhead_ms"), "<= 40", _med(over, "overhead_ms") <= 40),
        ("  overhead p90", _med(over, "overhead_p90_ms"), _span(over, "overhead_p90_ms"), "",
         None),
        ("  iteration wall time", _med(over, "iteration_ms"), _span(over, "iteration_ms"), "",
         None),
        ("  agent's own run time", _med(over, "agent_ms"), _span(over, "agent_ms"), "", None),
        (f"status, in-process, {args.iterations:,} iterations", _med(stat, "status_ms"),
         _span(stat, "status_ms"), "<= 100", _med(stat, "status_ms") <= 100),
        ("  status p99", _med(stat, "status_p99_ms"), _span(stat, "status_p99_ms"), "", None),
        ("  status, in-process, 0 iterations", _med(stat0, "status_ms"),
         _span(stat0, "status_ms"), "", None),
        (f"`ralph status --json` process, {args.iterations:,} iterations",
         _med(stat, "cli_ms"), _span(stat, "cli_ms"), "<= 100", _med(stat, "cli_ms") <= 100),
        ("  `ralph status --json` process, 0 iterations", _med(stat0, "cli_ms"),
         _span(stat0, "cli_ms"), "", None),
    ]
    print(f"{'measurement':<58} {'median ms':>10} {'min .. max':>16} {'target':>7} result")
    for name, value, span, target, ok in rows:
        result = "" if ok is None else ("pass" if ok else "FAIL")
        print(f"{name:<58} {value:>10.1f} {span:>16} {target:>7} {result}")


if __name__ == "__main__":
    sys.exit(main())

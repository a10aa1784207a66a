"""Loop benchmarks: orchestration overhead per iteration by PRD size, and `ralph status`.

    python benchmarks/loop_bench.py [--runs 5] [--tasks 50] [--iterations 10000]
                                    [--sizes 1000,10000] [--sample 25] [--quick]

1. Overhead: a PRD of --tasks tasks (50), gates off, commits on, and a no-op agent (a shell
   one-liner that ticks the next box), run to the end. Overhead = an iteration's wall time
   minus the agent process's own run time (`agent.finished` duration): prompt, tracker, git
   snapshots, commit, state, events. Target: <= 20 ms.
2. The same by PRD size (--sizes: 1,000 and 10,000 tasks): --sample iterations from the
   start, the middle and the end of the PRD (the tasks before it ticked, and as many
   iterations' events in the store as would have been recorded). Target: within 20 % of
   the 50-task PRD's start sampled the same way.
3. Status: a project with 10,000 recorded iterations (state.json and about ten events per
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

import ralph.git as ralph_git
from ralph.config import load_config
from ralph.loop import LoopService, project_status
from ralph.loop.models import LastIteration
from ralph.loop.paths import ProjectPaths
from ralph.loop.state import LoopState, TaskState, save_state
from ralph.scaffold import scaffold
from ralph.store import Frame, Store
from ralph.testing.history import record_history as write_history

NOOP_AGENT = ["sh", "-c", "cat >/dev/null; sed -i '0,/- \\[ \\]/s//- [x]/' PRD.md"]


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, timeout=60)


def make_project(root: Path, tasks: int, *, done: int = 0,
                 max_iterations: int = 100_000) -> None:
    """A git project with a `tasks`-task PRD whose first `done` tasks are ticked."""
    root.mkdir(parents=True)
    _git(root, "init", "-q")
    _git(root, "config", "user.name", "bench")
    _git(root, "config", "user.email", "bench@localhost")
    scaffold(root, "md", False)
    (root / "PRD.md").write_text("# Bench\n\n## Tasks\n\n" + "".join(
        f"- [{'x' if i <= done else ' '}] {i}. Task number {i}\n  - it is done\n"
        for i in range(1, tasks + 1)))
    (root / "ralph.toml").write_text(
        f'[loop]\ndefault_agent = "noop"\nmax_iterations = {max_iterations}\n\n'
        f"[agents.noop]\nargv = {json.dumps(NOOP_AGENT)}\n\n[gates]\ncommands = []\n\n"
        "[git]\nauto_commit = true\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "bench project")


def overhead_run(base: Path, tasks: int, *, done: int = 0,
                 sample: int | None = None) -> dict[str, float]:
    """Run the loop on a fresh project: to the end, or `sample` iterations after the first
    `done` tasks (with `done` iterations' events already in its store)."""
    root = base / "overhead"
    make_project(root, tasks, done=done,
                 max_iterations=sample if sample is not None else 100_000)
    if done:
        record_history(ProjectPaths(root), done, tasks)
    frames: list[Frame] = []
    git_s: list[float] = []  # the git processes' time within each iteration
    clock = GitClock()

    def observe(frame: Frame) -> None:
        frames.append(frame)
        if frame.topic == "iteration.started":
            clock.total = 0.0
        elif frame.topic == "iteration.finished":
            git_s.append(clock.total)

    service = LoopService(root, observer=observe)
    try:
        with clock:
            outcome = asyncio.run(service.run())
    finally:
        service.close()
    assert outcome.reason in ("complete" if sample is None else ("max_iterations", "complete")), (
        outcome)
    overheads: list[float] = []
    totals: list[float] = []
    agents: list[float] = []
    own: list[float] = []
    agent_s = 0.0
    for frame in frames:
        if frame.topic == "agent.finished":
            agent_s = frame.meta["duration_s"]
        elif frame.topic == "iteration.finished":
            total = frame.meta["duration_seconds"]
            totals.append(total * 1000)
            agents.append(agent_s * 1000)
            overheads.append((total - agent_s) * 1000)
            own.append((total - agent_s - git_s[len(own)]) * 1000)
    shutil.rmtree(root)
    overheads.sort()
    return {"iterations": len(overheads), "overhead_ms": statistics.median(overheads),
            "overhead_p90_ms": overheads[int(len(overheads) * 0.9) - 1],
            "iteration_ms": statistics.median(totals), "agent_ms": statistics.median(agents),
            "git_ms": statistics.median(git_s) * 1000, "own_ms": statistics.median(own)}


class GitClock:
    """Adds up the time of the git processes Ralph runs (wrapping ralph.git's run_process),
    so that Ralph's own share of an iteration can be told from git's: git's own work grows
    with the size of the files it hashes (a 450 KB PRD changed and committed every
    iteration), Ralph's must not."""

    def __init__(self) -> None:
        self.total = 0.0
        self._original = getattr(ralph_git, "run_process")  # noqa: B009 (not exported)

    def __enter__(self) -> GitClock:
        original = self._original

        async def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return await original(*args, **kwargs)
            finally:
                self.total += time.perf_counter() - start

        setattr(ralph_git, "run_process", timed)  # noqa: B010
        return self

    def __exit__(self, *exc: object) -> None:
        setattr(ralph_git, "run_process", self._original)  # noqa: B010


def record_history(paths: ProjectPaths, iterations: int, tasks: int) -> None:
    """About ten store events per iteration, as that many iterations would have left."""
    with Store(paths.store, durability="never") as store:
        write_history(store, iterations, tasks)


def history_project(base: Path, tasks: int, iterations: int) -> Path:
    """A project whose history holds `iterations` iterations: their state and events."""
    root = base / "history"
    make_project(root, tasks)
    paths = ProjectPaths(root)
    record_history(paths, iterations, tasks)
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
        report = project_status(paths, config.files)
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


def sample_points(tasks: int, sizes: list[int], sample: int) -> list[tuple[str, int, int]]:
    """(label, tasks, done first) of each sampled stretch: the small PRD's start (what the
    others are compared with: sampled the same way), then each size's start, middle and
    end."""
    return [(f"{tasks:,} tasks, start", tasks, 0)] + [
        (f"{n:,} tasks, {where}", n, done) for n in sizes
        for where, done in (("start", 0), ("middle", n // 2), ("end", n - sample))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--iterations", type=int, default=10_000)
    parser.add_argument("--sizes", default="1000,10000",
                        help="PRD sizes sampled at their start, middle and end ('' for none)")
    parser.add_argument("--sample", type=int, default=25, help="iterations per sample")
    parser.add_argument("--quick", action="store_true",
                        help="2 runs, 10 tasks, 500 iterations, sizes 1,000 only")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.tasks, args.iterations, args.sizes = 2, 10, 500, "1000"
    sizes = [int(n) for n in args.sizes.split(",") if n.strip()]
    points = sample_points(args.tasks, sizes, args.sample)
    base = Path(tempfile.mkdtemp(prefix="ralph-loop-bench-"))
    try:
        over: list[dict[str, float]] = []
        sampled: dict[str, list[dict[str, float]]] = {label: [] for label, _, _ in points}
        for run in range(args.runs):  # interleaved: each run measures every configuration
            over.append(overhead_run(base, args.tasks))
            print(f"run {run + 1}/{args.runs}: {args.tasks} tasks "
                  f"{over[-1]['overhead_ms']:.1f} ms", file=sys.stderr)
            for label, tasks, done in points:
                sampled[label].append(overhead_run(base, tasks, done=done, sample=args.sample))
                print(f"run {run + 1}/{args.runs}: {label} "
                      f"{sampled[label][-1]['overhead_ms']:.1f} ms", file=sys.stderr)
        root = history_project(base, args.tasks, args.iterations)
        empty = base / "empty"
        make_project(empty, args.tasks)
        stat = [status_run(root, 200) for _ in range(args.runs)]
        stat0 = [status_run(empty, 200) for _ in range(args.runs)]
    finally:
        shutil.rmtree(base, ignore_errors=True)
    report(args, over, sampled, stat, stat0)
    return 0


def _med(rows: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def _span(rows: list[dict[str, float]], key: str) -> str:
    values = [r[key] for r in rows]
    return f"{min(values):.1f} .. {max(values):.1f}"


def report(args: Any, over: list[dict[str, float]], sampled: dict[str, list[dict[str, float]]],
           stat: list[dict[str, float]], stat0: list[dict[str, float]]) -> None:
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    load = os.getloadavg()[0]
    print(f"# {cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, load {load:.2f}; median of {args.runs} runs")
    base = _med(over, "overhead_ms")
    rows = [
        (f"overhead per iteration ({args.tasks} tasks, commits on)", base,
         _span(over, "overhead_ms"), "<= 20", base <= 20),
        ("  overhead p90", _med(over, "overhead_p90_ms"), _span(over, "overhead_p90_ms"), "",
         None),
        ("  iteration wall time", _med(over, "iteration_ms"), _span(over, "iteration_ms"), "",
         None),
        ("  agent's own run time", _med(over, "agent_ms"), _span(over, "agent_ms"), "", None),
    ]
    small = next(iter(sampled.values()))  # the small PRD's start, sampled like the others
    reference = _med(small, "overhead_ms")
    own_reference = _med(small, "own_ms")
    for label, runs in sampled.items():
        value = _med(runs, "overhead_ms")
        own = _med(runs, "own_ms")
        if runs is small:
            rows.append((f"overhead per iteration, {label} ({args.sample} iterations)", value,
                         _span(runs, "overhead_ms"), "", None))
            rows.append(("  of which git processes", _med(runs, "git_ms"),
                         _span(runs, "git_ms"), "", None))
            rows.append(("  Ralph's own, beyond git", own, _span(runs, "own_ms"), "", None))
            continue
        rows.append((f"overhead per iteration, {label} ({value / reference:.2f}x)", value,
                     _span(runs, "overhead_ms"), f"<= {reference * 1.2:.1f}",
                     value <= reference * 1.2))
        rows.append(("  of which git processes", _med(runs, "git_ms"), _span(runs, "git_ms"),
                     "", None))
        rows.append((f"  Ralph's own, beyond git ({own / own_reference:.2f}x)", own,
                     _span(runs, "own_ms"), f"<= {own_reference * 1.2:.1f}",
                     own <= own_reference * 1.2))
    rows += [
        (f"status, in-process, {args.iterations:,} iterations", _med(stat, "status_ms"),
         _span(stat, "status_ms"), "<= 100", _med(stat, "status_ms") <= 100),
        ("  status p99", _med(stat, "status_p99_ms"), _span(stat, "status_p99_ms"), "", None),
        ("  status, in-process, 0 iterations", _med(stat0, "status_ms"),
         _span(stat0, "status_ms"), "", None),
        (f"`ralph status --json` process, {args.iterations:,} iterations",
         _med(stat, "cli_ms"), _span(stat, "cli_ms"), "<= 150", _med(stat, "cli_ms") <= 150),
        ("  `ralph status --json` process, 0 iterations", _med(stat0, "cli_ms"),
         _span(stat0, "cli_ms"), "", None),
    ]
    print(f"{'measurement':<62} {'median ms':>10} {'min .. max':>16} {'target':>8} result")
    for name, value, span, target, ok in rows:
        result = "" if ok is None else ("pass" if ok else "FAIL")
        print(f"{name:<62} {value:>10.1f} {span:>16} {target:>8} {result}")


if __name__ == "__main__":
    sys.exit(main())

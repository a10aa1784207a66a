#!/usr/bin/env python3
"""Scale-out benchmarks: the PostgreSQL event store, and runs as Temporal workflows.

    .venv/bin/python benchmarks/scaleout_bench.py                     # 5 runs of everything
    .venv/bin/python benchmarks/scaleout_bench.py --quick             # small sizes, 2 runs
    .venv/bin/python benchmarks/scaleout_bench.py --only temporal_overhead --runs 3

One private PostgreSQL server (ralph.testing.pgserver: fsync off, run as `nobody` under root)
and one Temporal dev server (ralph.testing.temporal_dev) are started once for the whole
invocation, only those the chosen measurements need, and stopped at the end. Every run of a
measurement is a fresh child process (this script, `--child JOB`). The table (stdout,
Markdown) shows the median over the runs and their min .. max; progress goes to stderr.

Measurements (--only NAME, repeatable or comma-separated):

pg_append_batched
    `store.append_many([Draft(topic, meta), ...])` in batches of 500 small frames
    ({"i": n}) into a fresh database: 100,000 frames a run (10,000 with --quick); frames/s.
    Target >= 5,000/s. Also single `store.append` calls (5,000 frames; 1,000 with --quick),
    for comparison (no target). The test server runs with fsync=off: a commit's disk flush
    is not part of the figure.
pg_subscription_latency
    One process subscribes (`store.subscribe(topic="bench.*", after_seq=store.last_seq)`);
    another appends 300 frames/s for 3 s (200/s for 1 s with --quick), each carrying
    time.time() in meta; latency = delivery time - that time (the append included). p50 and
    p99 in ms. Target p99 <= 100 ms.
temporal_overhead
    A git project whose PRD has --tasks tasks (10; 4 with --quick), each ticked by the fake
    agent (python -m ralph.testing.fake_agent) on its first attempt, no gates. Run locally
    (`LoopService(root).run()`) and as a Temporal workflow (one in-process worker; the run's
    repository is a bare clone, its branch made by the start activity). Overhead = the
    Temporal run's time per iteration - the local run's, in ms, two ways: amortised (wall
    time / iterations, so the start and finish activities count, spread over the tasks) and
    steady state (from one `iteration.started` to the next, timestamps from the store: start
    and finish left out). Target <= 50 ms. Each side first runs one unmeasured iteration
    (warm-up: imports, the workflow sandbox). Measured with a file store, then again with a
    PostgreSQL store (both sides on the same kind of store). The file store's rows also
    split the steady-state time: the iteration activity's work before `iteration.started`
    and after `iteration.finished`, and Temporal's own time from one activity's completion
    to the next one's start (activity times from the workflow's history), and the time of
    the git processes Ralph runs (ralph.git's run_process, timed in the child process).
concurrent_runs
    --concurrent runs (20; 6 with --quick) started at once, each on its own branch of one
    bare repository, with 3 tasks ticked at once: on 1 worker, then on 2 workers (each a
    child process running ralph.scale.worker.run_worker with its own work directory and
    concurrency 4), all on one PostgreSQL store. Throughput = iterations / wall time from
    the first start to the last result, iterations/s, and the 2-worker / 1-worker ratio. No
    target: the fake agent's start is CPU-bound, so on a 2-core machine a second worker
    need not add throughput; the machine's CPU use during each run is in the notes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from benchkit import (
    BenchError,
    ChildJob,
    ChildOutput,
    JobResults,
    Metric,
    add_common_options,
    append_steadily,
    child_main,
    fmt,
    log,
    machine_info,
    percentile,
    run_child,
    select_jobs,
    subscription_latencies,
    terminate,
)

SCRIPT = Path(__file__).resolve()
BATCH = 500
WORKER_CONCURRENCY = 4
READY_TIMEOUT_S = 90.0
STOP_WAIT_S = 20.0

JOBS = ("pg_append_batched", "pg_subscription_latency", "temporal_overhead", "concurrent_runs")
NEEDS_TEMPORAL = ("temporal_overhead", "concurrent_runs")
NEEDS_PG = ("pg_append_batched", "pg_subscription_latency", "concurrent_runs")
# (temporal_overhead needs PostgreSQL for its second variant only)

# A worker process for concurrent_runs: `python -c WORKER_CODE PARAMS_JSON`. SIGTERM or SIGINT
# stops it (run_worker's graceful shutdown); "ready" on stdout once it polls its queue.
WORKER_CODE = """
import asyncio, json, signal, sys
from pathlib import Path
from ralph.scale.worker import WorkerOptions, run_worker

async def main(p):
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    options = WorkerOptions(address=p["address"], store=p["store"], workdir=Path(p["workdir"]),
                            queue=p["queue"], concurrency=p["concurrency"], name=p["name"])
    await run_worker(options, stop, ready=lambda name: print("ready", name, flush=True))

asyncio.run(main(json.loads(sys.argv[1])))
"""


# -- configuration ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    runs: int
    frames: int  # pg_append_batched, per run
    single_frames: int  # single appends per run, for comparison
    sub_rate: float
    sub_seconds: float
    sub_warm: float
    tasks: int  # temporal_overhead's PRD
    concurrent: int  # concurrent_runs: runs at once
    concurrent_tasks: int
    pg_variant: bool  # temporal_overhead also on a PostgreSQL store
    timeout: float  # per child process
    tmp: Path


def metrics_for(cfg: Config) -> list[Metric]:
    n = cfg.tasks
    rows = [
        Metric("pg_append_batched", "batched_fps",
               f"pg_append_batched: append_many, batches of {BATCH} ({cfg.frames:,} frames)",
               "frames/s", 5_000),
        Metric("pg_append_batched", "single_fps",
               f"  single append, for comparison ({cfg.single_frames:,} frames)", "frames/s"),
        Metric("pg_subscription_latency", "p50_ms",
               "pg_subscription_latency p50 (cross-process)", "ms", None, False),
        Metric("pg_subscription_latency", "p99_ms",
               "pg_subscription_latency p99 (cross-process)", "ms", 100, False),
    ]
    variants = [("temporal_overhead", "file store")]
    if cfg.pg_variant:
        variants.append(("temporal_overhead_pg", "PostgreSQL store"))
    for job, store in variants:
        rows += [
            Metric(job, "overhead_ms",
                   f"temporal_overhead, {store}: per iteration, amortised ({n} tasks, start "
                   "and finish included)", "ms", 50, False),
            Metric(job, "overhead_cycle_ms",
                   f"temporal_overhead, {store}: per iteration, steady state "
                   "(iteration.started to the next)", "ms", 50, False),
            Metric(job, "local_iter_ms", "  local: wall time / iterations", "ms", None, False),
            Metric(job, "temporal_iter_ms", "  temporal: wall time / iterations", "ms",
                   None, False),
        ]
        if job != "temporal_overhead":
            continue  # the breakdown: for the file store only (the table is long enough)
        rows += [
            Metric(job, "local_cycle_ms", "  local: iteration.started to the next", "ms",
                   None, False),
            Metric(job, "temporal_cycle_ms", "  temporal: iteration.started to the next", "ms",
                   None, False),
            Metric(job, "inside_delta_ms",
                   "  the steady-state overhead's parts: inside iterations (iteration.started "
                   "to .finished), temporal - local", "ms", None, False),
            Metric(job, "pre_ms", "  temporal: the iteration activity's work before "
                   "iteration.started (checkout, find_mark, set-up)", "ms", None, False),
            Metric(job, "post_ms", "  temporal: the iteration activity's work after "
                   "iteration.finished (mark commit, push)", "ms", None, False),
            Metric(job, "gap_ms", "  temporal: an iteration activity's completion to the "
                   "next one's start (Temporal: workflow task, dispatch)", "ms", None, False),
            Metric(job, "git_delta_ms", "  git processes' time per iteration (steady state), "
                   "temporal - local", "ms", None, False),
            Metric(job, "start_delta_ms",
                   "  run start to first iteration.started, temporal - local", "ms",
                   None, False),
            Metric(job, "end_delta_ms",
                   "  last iteration.finished to the run's end, temporal - local", "ms",
                   None, False),
        ]
    c = f"{cfg.concurrent} runs x {cfg.concurrent_tasks} tasks"
    rows += [
        Metric("concurrent_runs", "ips_1", f"concurrent_runs: {c}, 1 worker", "iterations/s"),
        Metric("concurrent_runs", "ips_2", f"concurrent_runs: {c}, 2 workers", "iterations/s"),
        Metric("concurrent_runs", "ratio", "  2 workers / 1 worker", "x"),
    ]
    return rows


# -- helpers shared by the children --------------------------------------------------------------


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL).stdout


def new_database(server_url: str, prefix: str) -> tuple[str, str]:
    """A fresh database on the benchmark's server: (its name, its URL)."""
    from ralph.testing.pgserver import create_database  # noqa: PLC0415 - psycopg

    name = f"{prefix}_{secrets.token_hex(4)}"
    return name, create_database(server_url, name)


def drop_database(server_url: str, name: str) -> None:
    """Best effort: the server (and its data directory) goes at the end anyway."""
    import psycopg  # noqa: PLC0415
    from psycopg import sql  # noqa: PLC0415

    with contextlib.suppress(psycopg.Error), psycopg.connect(server_url, autocommit=True,
                                                             connect_timeout=10) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
            sql.Identifier(name)))


def make_project(base: Path, tasks: int) -> Path:
    """A seeded project (as `ralph init` makes it, a PRD of `tasks` tasks that the fake agent
    ticks on their first attempt, no gates) and a bare clone of it; the bare clone's path.

    The fake agent's plan is in the repository and named relatively, so that each work
    directory has its own attempts counter (`plan.json.calls.json`, ignored by git): runs
    that share one plan file would race on it."""
    from ralph.scaffold import scaffold  # noqa: PLC0415

    seed = base / "seed"
    seed.mkdir(parents=True)
    git(seed, "init", "-q", "-b", "main")
    git(seed, "config", "user.name", "bench")
    git(seed, "config", "user.email", "bench@localhost")
    scaffold(seed, "md", False)
    plan = {"tasks": {str(i): [{"tick": True}] for i in range(1, tasks + 1)}}
    (seed / "plan.json").write_text(json.dumps(plan))
    with (seed / ".gitignore").open("a") as ignore:
        ignore.write("/plan.json.calls.json\n")
    argv = [sys.executable, "-m", "ralph.testing.fake_agent", "--plan", "plan.json"]
    (seed / "ralph.toml").write_text(
        f'[loop]\ndefault_agent = "fake"\nmax_iterations = {tasks + 5}\n\n'
        f"[agents.fake]\nargv = {json.dumps(argv)}\ntimeout_seconds = 120\n\n"
        "[gates]\ncommands = []\n")
    (seed / "PRD.md").write_text("# Bench\n\n## Tasks\n\n" + "".join(
        f"- [ ] {i}. Task number {i}\n" for i in range(1, tasks + 1)))
    git(seed, "add", "-A")
    git(seed, "commit", "-q", "-m", "bench project")
    bare = base / "repo.git"
    git(base, "clone", "-q", "--bare", str(seed), str(bare))
    shutil.rmtree(seed)
    return bare


def local_clone(bare: Path, root: Path) -> Path:
    git(root.parent, "clone", "-q", str(bare), str(root))
    git(root, "config", "user.name", "bench")
    git(root, "config", "user.email", "bench@localhost")
    return root


def ts_seconds(ts: str) -> float:
    from ralph.store.frame import parse_ts_ms  # noqa: PLC0415

    return parse_ts_ms(ts) / 1000


def cpu_busy() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        fields = [float(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        total = sum(fields[:8])
        return total - fields[3] - fields[4], total  # minus idle and iowait
    return 0.0, 0.0


# -- child: pg_append_batched -------------------------------------------------------------------


def job_append(params: dict[str, Any]) -> ChildOutput:
    from ralph.store import Draft, Store  # noqa: PLC0415

    server = str(params["server"])
    count = int(params["frames"])
    single = int(params["single_frames"])
    metrics: dict[str, float] = {}
    info: dict[str, Any] = {}
    for mode, total in (("batched", count), ("single", single)):
        name, url = new_database(server, f"bench_append_{mode}")
        try:
            with Store(url) as store:
                store.append("bench.warmup", {"i": -1})  # tables made, connection open
                start = time.perf_counter()
                if mode == "batched":
                    for first in range(0, total, BATCH):
                        store.append_many([Draft("bench.append", {"i": n}) for n in
                                           range(first, min(first + BATCH, total))])
                else:
                    for n in range(total):
                        store.append("bench.append", {"i": n})
                elapsed = time.perf_counter() - start
                last = store.last_seq
        finally:
            drop_database(server, name)
        if last != total + 1:
            raise BenchError(f"{mode}: expected last seq {total + 1}, found {last}")
        metrics[f"{mode}_fps"] = total / elapsed
        info[f"{mode}_s"] = elapsed
    return metrics, info


# -- child: pg_subscription_latency --------------------------------------------------------------


def job_appender(params: dict[str, Any]) -> ChildOutput:
    """The other side of the subscription benchmark: appends at a steady rate, then 'done'."""
    from ralph.store import Store  # noqa: PLC0415

    with Store(params["url"]) as store:
        return append_steadily(store, params)


def job_subscribe(params: dict[str, Any]) -> ChildOutput:
    server = str(params["server"])
    name, url = new_database(server, "bench_subscribe")
    try:
        return asyncio.run(_subscribe(dict(params, url=url)))
    finally:
        drop_database(server, name)


async def _subscribe(params: dict[str, Any]) -> ChildOutput:
    from ralph.store import Store  # noqa: PLC0415

    with Store(params["url"]) as store:
        latencies, appender = await subscription_latencies(SCRIPT, store, params, "bench.*")
    info = {"max_ms": max(latencies),
            "appender_rate": float(appender.get("metrics", {}).get("rate", 0.0)),
            "append_p99_ms": float(appender.get("info", {}).get("append_p99_ms", 0.0))}
    return {"p50_ms": percentile(latencies, 50), "p99_ms": percentile(latencies, 99)}, info


# -- child: temporal_overhead --------------------------------------------------------------------


@dataclass
class Timed:
    """One run's wall time and the timestamps (epoch seconds) that split it."""

    wall: float  # seconds, perf_counter
    began: float  # time.time() just before the run was asked for
    ended: float  # time.time() once its result was in
    iterations: int
    started: list[float] = field(default_factory=list)  # iteration.started, in seq order
    finished: list[float] = field(default_factory=list)  # iteration.finished
    git: list[tuple[float, float]] = field(default_factory=list)  # (began, seconds) per git
    # (activity type, started, completed) from the workflow's history, in order
    activities: list[tuple[str, float, float]] = field(default_factory=list)

    def phases(self) -> dict[str, float]:
        n = self.iterations
        if len(self.started) != n or len(self.finished) != n or n < 2:
            raise BenchError(f"{n} iterations but {len(self.started)} iteration.started and "
                             f"{len(self.finished)} iteration.finished frames")
        first, last = self.started[0], self.started[-1]
        steady = [seconds for began, seconds in self.git if first <= began < last]
        out = {"iter": self.wall / n,
               "cycle": (last - first) / (n - 1),
               "inside": statistics.fmean(f - s for s, f in
                                          zip(self.started, self.finished, strict=True)),
               "start": first - self.began,
               "end": self.ended - self.finished[-1],
               "git_s": sum(steady) / (n - 1),
               "git_n": len(steady) / (n - 1)}
        if self.activities:
            out.update(self._activity_phases())
        return out

    def _activity_phases(self) -> dict[str, float]:
        """Where a Temporal iteration's time goes: its activity's work before the loop's
        iteration starts and after it ends, and Temporal's own time between two activities
        (the completion, a workflow task, the next activity's dispatch)."""
        from ralph.scale.model import (  # noqa: PLC0415
            FINAL_CHECK_ACTIVITY,
            FINISH_ACTIVITY,
            ITERATION_ACTIVITY,
            START_ACTIVITY,
        )

        runs = [(s, c) for name, s, c in self.activities if name == ITERATION_ACTIVITY]
        if len(runs) != self.iterations:
            raise BenchError(f"{len(runs)} iteration activities in the history for "
                             f"{self.iterations} iterations")

        def took(name: str) -> float:
            return sum(c - s for n, s, c in self.activities if n == name)

        return {
            "pre": statistics.fmean(st - s for (s, _), st in
                                    zip(runs, self.started, strict=True)),
            "post": statistics.fmean(c - fin for (_, c), fin in
                                     zip(runs, self.finished, strict=True)),
            "gap": statistics.fmean(runs[k + 1][0] - runs[k][1] for k in range(len(runs) - 1)),
            "start_activity": took(START_ACTIVITY),
            "final_check_activity": took(FINAL_CHECK_ACTIVITY),
            "finish_activity": took(FINISH_ACTIVITY),
        }


class GitClock:
    """Notes every git process Ralph runs (ralph.git's run_process: the loop's own git and
    ralph.scale.gitwork's) while active: when it started, how long it took."""

    def __init__(self) -> None:
        import ralph.git as ralph_git  # noqa: PLC0415

        self.module = ralph_git
        self.original = getattr(ralph_git, "run_process")  # noqa: B009 (not exported)
        self.calls: list[tuple[float, float]] = []

    def __enter__(self) -> GitClock:
        original = self.original
        calls = self.calls

        async def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.time()
            clock = time.perf_counter()
            try:
                return await original(*args, **kwargs)
            finally:
                calls.append((began, time.perf_counter() - clock))

        setattr(self.module, "run_process", timed)  # noqa: B010
        return self

    def __exit__(self, *exc: object) -> None:
        setattr(self.module, "run_process", self.original)  # noqa: B010


def iteration_times(store_location: str, run_id: str) -> tuple[list[float], list[float]]:
    from ralph.loop.events import run_stream  # noqa: PLC0415
    from ralph.store import Store  # noqa: PLC0415

    started: list[float] = []
    finished: list[float] = []
    with Store(store_location, create=False) as store:
        for frame in store.read(stream=run_stream(run_id)):
            if frame.topic == "iteration.started":
                started.append(ts_seconds(frame.ts))
            elif frame.topic == "iteration.finished":
                finished.append(ts_seconds(frame.ts))
    return started, finished


async def activity_spans(client: Any, run_id: str) -> list[tuple[str, float, float]]:
    """(activity type, started, completed) of each completed activity in the run's history."""
    from temporalio.api.enums.v1 import EventType  # noqa: PLC0415

    from ralph.scale import client as rc  # noqa: PLC0415

    history = await rc.handle(client, run_id).fetch_history()
    names: dict[int, str] = {}
    starts: dict[int, float] = {}
    spans: list[tuple[str, float, float]] = []
    for event in history.events:
        moment = event.event_time.ToMicroseconds() / 1e6
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            names[event.event_id] = (
                event.activity_task_scheduled_event_attributes.activity_type.name)
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            starts[event.activity_task_started_event_attributes.scheduled_event_id] = moment
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            scheduled = event.activity_task_completed_event_attributes.scheduled_event_id
            spans.append((names.get(scheduled, "?"), starts.get(scheduled, moment), moment))
    return spans


async def run_local(root: Path, store_location: str, max_iterations: int | None
                    ) -> tuple[Timed, str]:
    from ralph.loop import LoopService  # noqa: PLC0415
    from ralph.store import Store  # noqa: PLC0415

    store = Store(store_location)
    try:
        with GitClock() as clock:
            began = time.time()
            start = time.perf_counter()
            service = LoopService(root, store=store)
            try:
                outcome = await service.run(max_iterations=max_iterations)
            finally:
                await service.aclose()
            wall = time.perf_counter() - start
            ended = time.time()
    finally:
        store.close()
    expected = max_iterations or 0
    if (max_iterations is None and outcome.reason != "complete") or (
            expected and outcome.iterations != expected):
        raise BenchError(f"the local run ended {outcome.reason}: {outcome.message} "
                         f"({outcome.iterations} iterations)")
    return Timed(wall, began, ended, outcome.iterations, git=clock.calls), outcome.run_id


async def run_temporal(client: Any, queue: str, bare: Path, max_iterations: int,
                       limit: float) -> tuple[Timed, str]:
    from ralph.loop.service import new_run_id  # noqa: PLC0415
    from ralph.scale import client as rc  # noqa: PLC0415
    from ralph.scale.model import RunSpec  # noqa: PLC0415

    run_id = new_run_id()
    spec = RunSpec(run_id=run_id, repo=str(bare), branch=f"ralph/{run_id}",
                   max_iterations=max_iterations)
    with GitClock() as clock:  # the worker runs in this process: its git calls count
        began = time.time()
        start = time.perf_counter()
        async with asyncio.timeout(limit):
            await rc.start(client, spec, queue=queue)
            end = await rc.handle(client, run_id).result()
        wall = time.perf_counter() - start
        ended = time.time()
    if end.reason not in ("complete", "max_iterations") or end.iterations < 1:
        raise BenchError(f"the temporal run ended {end.reason}: {end.message} "
                         f"({end.iterations} iterations)")
    async with asyncio.timeout(60):
        spans = await activity_spans(client, run_id)
    return Timed(wall, began, ended, end.iterations, git=clock.calls,
                 activities=spans), run_id


def job_overhead(params: dict[str, Any]) -> ChildOutput:
    server = params.get("server")
    if params["store"] == "pg":
        assert server is not None
        local_db, local_url = new_database(server, "bench_local")
        temporal_db, temporal_url = new_database(server, "bench_temporal")
        try:
            return asyncio.run(_overhead(params, local_url, temporal_url))
        finally:
            drop_database(server, local_db)
            drop_database(server, temporal_db)
    base = Path(params["dir"])
    return asyncio.run(_overhead(params, str(base / "local-store"),
                                 str(base / "temporal-store")))


async def _overhead(params: dict[str, Any], local_store: str, temporal_store: str
                    ) -> ChildOutput:
    base = Path(params["dir"])
    tasks = int(params["tasks"])
    limit = float(params["limit"])
    bare = make_project(base, tasks)
    sides: dict[str, Timed] = {}
    ids: dict[str, str] = {}

    async def local() -> None:
        await run_local(local_clone(bare, base / "local-warm"), local_store, 1)
        sides["local"], ids["local"] = await run_local(local_clone(bare, base / "local"),
                                                       local_store, None)

    async def temporal() -> None:
        await temporal_side(params, bare, temporal_store, limit, sides, ids)

    order = (local, temporal) if int(params["run"]) % 2 == 0 else (temporal, local)
    for side in order:
        await side()
    for name, where in (("local", local_store), ("temporal", temporal_store)):
        sides[name].started, sides[name].finished = iteration_times(where, ids[name])
    loc, tem = sides["local"], sides["temporal"]
    if loc.iterations != tasks or tem.iterations != tasks:
        raise BenchError(f"expected {tasks} iterations each, local ran {loc.iterations}, "
                         f"temporal {tem.iterations}")
    lp, tp = loc.phases(), tem.phases()
    ms = 1000.0
    metrics = {"overhead_ms": (tp["iter"] - lp["iter"]) * ms,
               "overhead_cycle_ms": (tp["cycle"] - lp["cycle"]) * ms,
               "local_iter_ms": lp["iter"] * ms, "temporal_iter_ms": tp["iter"] * ms,
               "local_cycle_ms": lp["cycle"] * ms, "temporal_cycle_ms": tp["cycle"] * ms,
               "inside_delta_ms": (tp["inside"] - lp["inside"]) * ms,
               "pre_ms": tp["pre"] * ms, "post_ms": tp["post"] * ms, "gap_ms": tp["gap"] * ms,
               "git_delta_ms": (tp["git_s"] - lp["git_s"]) * ms,
               "start_delta_ms": (tp["start"] - lp["start"]) * ms,
               "end_delta_ms": (tp["end"] - lp["end"]) * ms}
    info: dict[str, float] = {"local_wall_s": loc.wall, "temporal_wall_s": tem.wall}
    for key in ("inside", "start", "end", "git_s"):
        info[f"local_{key}_ms"] = lp[key] * ms
        info[f"temporal_{key}_ms"] = tp[key] * ms
    info["local_git_n"], info["temporal_git_n"] = lp["git_n"], tp["git_n"]
    for key in ("start_activity", "final_check_activity", "finish_activity"):
        info[f"{key}_ms"] = tp[key] * ms
    return metrics, info


async def temporal_side(params: dict[str, Any], bare: Path, store: str, limit: float,
                        sides: dict[str, Timed], ids: dict[str, str]) -> None:
    """One in-process worker: a warm-up iteration, then the measured run."""
    from ralph.scale import client as rc  # noqa: PLC0415
    from ralph.scale.worker import WorkerOptions, run_worker  # noqa: PLC0415

    base = Path(params["dir"])
    queue = f"bench-{secrets.token_hex(4)}"
    stop = asyncio.Event()
    ready = asyncio.Event()
    options = WorkerOptions(address=params["address"], store=store, workdir=base / "work",
                            queue=queue)
    worker = asyncio.create_task(run_worker(options, stop, ready=lambda _name: ready.set()))
    try:
        waiter = asyncio.create_task(ready.wait())
        await asyncio.wait({waiter, worker}, timeout=READY_TIMEOUT_S,
                           return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if worker.done():
            worker.result()  # its exception
            raise BenchError("the worker ended before it was ready")
        if not ready.is_set():
            raise BenchError(f"the worker was not ready within {READY_TIMEOUT_S:.0f} s")
        client = await rc.connect(params["address"])
        await run_temporal(client, queue, bare, 1, limit)  # warm-up
        sides["temporal"], ids["temporal"] = await run_temporal(client, queue, bare, 0, limit)
    finally:
        stop.set()
        try:
            await asyncio.wait_for(worker, STOP_WAIT_S)
        except Exception as exc:  # a worker that failed to stop: say so, do not hide the rest
            log(f"the in-process worker did not stop cleanly: {type(exc).__name__}: {exc}")


# -- child: concurrent_runs ----------------------------------------------------------------------

_WORKERS: list[subprocess.Popen[bytes]] = []  # this child's worker processes, for the last resort


def _kill_workers() -> None:
    for proc in _WORKERS:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)


def start_worker(params: dict[str, Any], store: str, workdir: Path, queue: str, name: str,
                 logfile: IO[bytes]) -> subprocess.Popen[bytes]:
    """A worker process (in this child's process group: a timeout that ends the child's
    group ends its workers too)."""
    worker_params = {"address": params["address"], "store": store, "workdir": str(workdir),
                     "queue": queue, "concurrency": WORKER_CONCURRENCY, "name": name}
    proc = subprocess.Popen([sys.executable, "-c", WORKER_CODE, json.dumps(worker_params)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=logfile,
                            cwd=workdir.parent)
    _WORKERS.append(proc)
    return proc


def wait_ready(procs: Sequence[subprocess.Popen[bytes]], timeout: float) -> None:
    import selectors  # noqa: PLC0415

    deadline = time.monotonic() + timeout
    for proc in procs:
        assert proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                raise BenchError(f"a worker was not ready within {timeout:.0f} s")
        line = proc.stdout.readline()
        if not line.startswith(b"ready"):
            raise BenchError(f"a worker exited before it was ready (status {proc.wait(5)})")


def stop_workers(procs: Sequence[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
    deadline = time.monotonic() + STOP_WAIT_S
    for proc in procs:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log(f"worker {proc.pid} did not stop within {STOP_WAIT_S:.0f} s: killed")
            proc.kill()
            proc.wait(5)
        if proc.stdout is not None:
            proc.stdout.close()


def concurrent_config(params: dict[str, Any], workers: int) -> dict[str, float]:
    """`workers` worker processes on one PostgreSQL store; the runs started at once."""
    server = str(params["server"])
    base = Path(params["dir"]) / f"workers-{workers}"
    base.mkdir(parents=True)
    bare = make_project(base, int(params["tasks"]))
    db, url = new_database(server, f"bench_concurrent_{workers}")
    queue = f"bench-{secrets.token_hex(4)}"
    procs: list[subprocess.Popen[bytes]] = []
    log_path = base / "workers.log"
    try:
        with log_path.open("wb") as logfile:
            for w in range(workers):
                workdir = base / f"worker-{w + 1}"
                workdir.mkdir()
                procs.append(start_worker(params, url, workdir, queue, f"bench-worker-{w + 1}",
                                          logfile))
            try:
                wait_ready(procs, READY_TIMEOUT_S)
                result = asyncio.run(_concurrent_runs(params, bare, queue))
            finally:
                stop_workers(procs)
    except BaseException:
        with contextlib.suppress(OSError):
            for line in log_path.read_text(errors="replace").splitlines()[-20:]:
                log(f"  [worker] {line}")
        raise
    finally:
        drop_database(server, db)
    for w in range(workers):  # which runs each worker touched (a directory per run)
        workdir = base / f"worker-{w + 1}"
        result[f"runs_on_worker_{w + 1}"] = sum(
            1 for p in workdir.iterdir() if p.name.startswith("run_"))
    return result


async def _concurrent_runs(params: dict[str, Any], bare: Path, queue: str) -> dict[str, float]:
    from ralph.loop.service import new_run_id  # noqa: PLC0415
    from ralph.scale import client as rc  # noqa: PLC0415
    from ralph.scale.model import RunSpec  # noqa: PLC0415

    count = int(params["concurrent"])
    tasks = int(params["tasks"])
    client = await rc.connect(params["address"])
    ids = [new_run_id() for _ in range(count)]
    busy0, total0 = cpu_busy()
    clock = time.perf_counter()
    async with asyncio.timeout(float(params["limit"])):
        await asyncio.gather(*(rc.start(client, RunSpec(
            run_id=run_id, repo=str(bare), branch=f"ralph/{run_id}"), queue=queue)
            for run_id in ids))
        ends = await asyncio.gather(*(rc.handle(client, run_id).result() for run_id in ids))
    wall = time.perf_counter() - clock
    busy1, total1 = cpu_busy()
    bad = [end for end in ends if end.reason != "complete" or end.iterations != tasks]
    if bad:
        raise BenchError(f"{len(bad)} of {count} runs did not end complete in {tasks} "
                         f"iterations, e.g. {bad[0].reason}: {bad[0].message} "
                         f"({bad[0].iterations} iterations)")
    iterations = sum(end.iterations for end in ends)
    cpu = 100 * (busy1 - busy0) / (total1 - total0) if total1 > total0 else 0.0
    result = {"ips": iterations / wall, "wall_s": wall, "iterations": iterations,
              "cpu_pct": cpu}
    async with asyncio.timeout(120):
        shares = await activities_by_worker(client, ids)
    for rank, share in enumerate(shares, 1):  # the busiest worker first
        result[f"activities_{rank}"] = share
    return result


async def activities_by_worker(client: Any, run_ids: Sequence[str]) -> list[int]:
    """How many activities each worker (its client identity) ran, from the runs' histories;
    busiest first."""
    from temporalio.api.enums.v1 import EventType  # noqa: PLC0415

    from ralph.scale import client as rc  # noqa: PLC0415

    counts: dict[str, int] = {}
    for run_id in run_ids:
        history = await rc.handle(client, run_id).fetch_history()
        for event in history.events:
            if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                who = event.activity_task_started_event_attributes.identity
                counts[who] = counts.get(who, 0) + 1
    return sorted(counts.values(), reverse=True)


def job_concurrent(params: dict[str, Any]) -> ChildOutput:
    try:
        order = (1, 2) if int(params["run"]) % 2 == 0 else (2, 1)
        results = {workers: concurrent_config(params, workers) for workers in order}
    finally:
        _kill_workers()
    metrics = {"ips_1": results[1]["ips"], "ips_2": results[2]["ips"],
               "ratio": results[2]["ips"] / results[1]["ips"]}
    info = {f"{key}_{workers}": value for workers, result in results.items()
            for key, value in result.items() if key != "ips"}
    return metrics, info


CHILD_JOBS: dict[str, ChildJob] = {
    "append": job_append,
    "appender": job_appender,
    "subscribe": job_subscribe,
    "overhead": job_overhead,
    "concurrent": job_concurrent,
}


# -- the parent: running children and collecting results ---------------------------------------


def constant(params: dict[str, Any]) -> Callable[[int], dict[str, Any]]:
    return lambda _run: params


class Runner:
    def __init__(self, cfg: Config, root: Path) -> None:
        self.cfg = cfg
        self.root = root
        self.results: dict[str, JobResults] = {}
        self.pg_url: str | None = None
        self.temporal: str | None = None

    def measure(self, job: str, child: str, make_params: Callable[[int], dict[str, Any]],
                timeout: float) -> None:
        results = self.results.setdefault(job, JobResults())
        for run in range(self.cfg.runs):
            work = self.root / f"{job}-{run}"
            work.mkdir()
            try:
                out = run_child(SCRIPT, child, dict(make_params(run), dir=str(work), run=run),
                                timeout, grace=STOP_WAIT_S + 10, say_last_line=True)
            except BenchError as exc:
                results.error = str(exc)
                log(f"{job} run {run + 1}/{self.cfg.runs}: FAILED: {exc}")
                return
            finally:
                shutil.rmtree(work, ignore_errors=True)
            log(f"{job} run {run + 1}/{self.cfg.runs}: {results.record(out)}")

    def fail(self, jobs: Sequence[str], why: str) -> None:
        for job in jobs:
            self.results.setdefault(job, JobResults()).error = why

    def run_all(self, selected: Sequence[str]) -> None:
        cfg = self.cfg
        if "pg_append_batched" in selected:
            self.measure("pg_append_batched", "append", lambda _run: {
                "server": self.pg_url, "frames": cfg.frames,
                "single_frames": cfg.single_frames}, cfg.timeout)
        if "pg_subscription_latency" in selected:
            self.measure("pg_subscription_latency", "subscribe", lambda _run: {
                "server": self.pg_url, "rate": cfg.sub_rate, "seconds": cfg.sub_seconds,
                "warm": cfg.sub_warm}, cfg.timeout)
        if "temporal_overhead" in selected:
            limit = 60.0 + 10.0 * cfg.tasks
            variants = [("temporal_overhead", "file")]
            if cfg.pg_variant:
                variants.append(("temporal_overhead_pg", "pg"))
            for job, store in variants:
                params = {"server": self.pg_url, "address": self.temporal, "store": store,
                          "tasks": cfg.tasks, "limit": limit}
                self.measure(job, "overhead", constant(params), 2 * limit + 120)
        if "concurrent_runs" in selected:
            limit = 120.0 + 5.0 * cfg.concurrent * cfg.concurrent_tasks
            self.measure("concurrent_runs", "concurrent", lambda _run: {
                "server": self.pg_url, "address": self.temporal, "tasks": cfg.concurrent_tasks,
                "concurrent": cfg.concurrent, "limit": limit}, 2 * limit + 240)


# -- the report ----------------------------------------------------------------------------------


def job_of(metric: Metric) -> str:
    return "temporal_overhead" if metric.job == "temporal_overhead_pg" else metric.job


def render_table(cfg: Config, results: dict[str, JobResults], selected: Sequence[str]
                 ) -> tuple[list[str], bool]:
    out = ["| measurement | median | min .. max | target | result |",
           "| --- | --- | --- | --- | --- |"]
    all_ok = True
    for metric in metrics_for(cfg):
        if job_of(metric) not in selected:
            continue
        res = results.get(metric.job, JobResults(error="not run"))
        target = ""
        if metric.target is not None:
            target = f"{'>=' if metric.higher_is_better else '<='} {metric.target:,g}"
        values = [run[metric.key] for run in res.runs if metric.key in run]
        label = metric.label.replace("|", "/")
        if metric.label.startswith("  "):
            label = "&nbsp;&nbsp;" + label.strip()
        if res.error is not None or not values:
            all_ok = False
            error = (res.error or "no values").replace("|", "/")[:80]
            out.append(f"| {label} | - | - | {target} | ERROR: {error} |")
            continue
        median = statistics.median(values)
        verdict = ""
        if metric.target is not None:
            ok = metric.meets(median)
            verdict = "pass" if ok else "FAIL"
            all_ok = all_ok and ok
        out.append(f"| {label} | {fmt(median)} {metric.unit} | {fmt(min(values))} .. "
                   f"{fmt(max(values))} | {target} | {verdict} |")
    return out, all_ok


def render_notes(cfg: Config, results: dict[str, JobResults]) -> list[str]:
    notes: list[str] = []

    def median_info(job: str, key: str) -> float:
        res = results.get(job)
        values = [float(i[key]) for i in (res.infos if res else []) if key in i]
        return statistics.median(values) if values else float("nan")

    if results.get("pg_append_batched", JobResults()).runs:
        notes.append(f"# pg_append_batched: {fmt(median_info('pg_append_batched', 'batched_s'))}"
                     f" s for {cfg.frames:,} frames in batches of {BATCH}; single appends "
                     f"{fmt(median_info('pg_append_batched', 'single_s'))} s for "
                     f"{cfg.single_frames:,}; server fsync=off")
    if results.get("pg_subscription_latency", JobResults()).runs:
        job = "pg_subscription_latency"
        notes.append(f"# pg_subscription_latency: {cfg.sub_rate:.0f} frames/s for "
                     f"{cfg.sub_seconds:.1f} s after {cfg.sub_warm:.1f} s warm-up; max "
                     f"{fmt(median_info(job, 'max_ms'))} ms (median of runs); the appender's "
                     f"append() p99 {fmt(median_info(job, 'append_p99_ms'))} ms")
    for job in ("temporal_overhead", "temporal_overhead_pg"):
        if not results.get(job, JobResults()).runs:
            continue

        def both(key: str, job: str = job) -> str:
            return (f"local {fmt(median_info(job, f'local_{key}'))}, temporal "
                    f"{fmt(median_info(job, f'temporal_{key}'))}")

        notes.append(
            f"# {job}: wall s {both('wall_s')}; inside an iteration ms {both('inside_ms')}; "
            f"start to first iteration ms {both('start_ms')}; last iteration to end ms "
            f"{both('end_ms')}; git per iteration ms {both('git_s_ms')}, processes "
            f"{both('git_n')}; temporal activities ms: start "
            f"{fmt(median_info(job, 'start_activity_ms'))}, final check "
            f"{fmt(median_info(job, 'final_check_activity_ms'))}, finish "
            f"{fmt(median_info(job, 'finish_activity_ms'))}")
    if results.get("concurrent_runs", JobResults()).runs:
        job = "concurrent_runs"
        clones = " and ".join(fmt(median_info(job, f"runs_on_worker_{w}_2")) for w in (1, 2))
        shares = " and ".join(fmt(median_info(job, f"activities_{w}_2")) for w in (1, 2))
        notes.append(f"# concurrent_runs: wall 1 worker {fmt(median_info(job, 'wall_s_1'))} s "
                     f"(machine CPU busy {fmt(median_info(job, 'cpu_pct_1'))} %), 2 workers "
                     f"{fmt(median_info(job, 'wall_s_2'))} s (CPU busy "
                     f"{fmt(median_info(job, 'cpu_pct_2'))} %); with 2 workers, activities "
                     f"per worker {shares}, runs cloned per worker {clones} (of "
                     f"{cfg.concurrent}); concurrency {WORKER_CONCURRENCY} per worker, one "
                     "PostgreSQL store")
    return notes


# -- command line --------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=None,
                        help="runs per measurement (5; 2 with --quick)")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes and 2 runs: a smoke test of about 2 minutes")
    parser.add_argument("--only", action="append", default=None, metavar="NAME",
                        help=f"run only this measurement (repeatable, or comma-separated): "
                             f"{', '.join(JOBS)}")
    parser.add_argument("--frames", type=int, default=None,
                        help="pg_append_batched: frames per run (100,000; 10,000 with --quick)")
    parser.add_argument("--tasks", type=int, default=None,
                        help="temporal_overhead: tasks in the PRD (10; 4 with --quick)")
    parser.add_argument("--concurrent", type=int, default=None,
                        help="concurrent_runs: runs at once (20; 6 with --quick)")
    parser.add_argument("--no-pg-variant", action="store_true",
                        help="temporal_overhead: skip the PostgreSQL-store variant")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds allowed per child process of pg_* (default 300)")
    parser.add_argument("--tmp", type=Path, default=Path("/tmp"),
                        help="where the temporary projects and stores go (default /tmp)")
    add_common_options(parser)
    return parser.parse_args(argv)


def make_config(args: argparse.Namespace) -> Config:
    quick = bool(args.quick)
    runs = args.runs or (2 if quick else 5)
    tasks = args.tasks or (4 if quick else 10)
    if runs < 1 or tasks < 2:
        raise SystemExit("--runs must be at least 1 and --tasks at least 2")
    return Config(
        runs=runs,
        frames=args.frames or (10_000 if quick else 100_000),
        single_frames=1_000 if quick else 5_000,
        sub_rate=200.0 if quick else 300.0,
        sub_seconds=1.0 if quick else 3.0,
        sub_warm=0.3 if quick else 0.5,
        tasks=tasks,
        concurrent=args.concurrent or (6 if quick else 20),
        concurrent_tasks=3,
        pg_variant=not args.no_pg_variant,
        timeout=args.timeout or 300.0,
        tmp=args.tmp,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        return child_main(CHILD_JOBS, args.child, json.loads(args.params))
    signal.signal(signal.SIGTERM, terminate)
    cfg = make_config(args)
    selected = select_jobs(args.only, JOBS)
    header = machine_info(cfg.tmp)
    root = Path(tempfile.mkdtemp(prefix="ralph-scaleout-bench-", dir=cfg.tmp))
    started = time.perf_counter()
    runner = Runner(cfg, root)
    try:
        with contextlib.ExitStack() as servers:
            try:
                if any(job in selected for job in NEEDS_PG) or (
                        "temporal_overhead" in selected and cfg.pg_variant):
                    from ralph.testing.pgserver import PostgresServer  # noqa: PLC0415

                    runner.pg_url = servers.enter_context(PostgresServer()).url
                    log(f"PostgreSQL at {runner.pg_url}")
                if any(job in selected for job in NEEDS_TEMPORAL):
                    from ralph.testing.temporal_dev import TemporalDevServer  # noqa: PLC0415

                    runner.temporal = servers.enter_context(TemporalDevServer()).address
                    log(f"Temporal at {runner.temporal}")
            except Exception as exc:
                runner.fail([*selected, "temporal_overhead_pg"],
                            f"a server did not start: {str(exc).splitlines()[0]}")
            else:
                runner.run_all(selected)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    table, all_ok = render_table(cfg, runner.results, selected)
    print(header)
    print(f"# ralph scale-out benchmark: {cfg.runs} runs per measurement, median shown; "
          f"{time.perf_counter() - started:.0f} s in all")
    print()
    print("\n".join(table))
    print()
    print("\n".join(render_notes(cfg, runner.results)))
    if any(res.error for res in runner.results.values()):
        return 2
    return 1 if args.check and not all_ok else 0


if __name__ == "__main__":
    sys.exit(main())

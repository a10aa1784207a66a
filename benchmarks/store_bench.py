#!/usr/bin/env python3
"""Benchmarks for the event store (`ralph.store`): append, subscribe, sync, rebuild and read.

    .venv/bin/python benchmarks/store_bench.py                  # 1,000,000 frames, 5 runs each
    .venv/bin/python benchmarks/store_bench.py --quick          # tiny sizes, under a minute
    .venv/bin/python benchmarks/store_bench.py --only sync --only rebuild --runs 3

Every run of every measurement happens in a fresh child process (this script, `--child JOB`),
so that the peak RSS reported for it (`getrusage(RUSAGE_SELF).ru_maxrss` in the child) is its
own. The table (stdout) shows the median of the runs, their min..max and the peak RSS over all
runs; progress and anything the children print on stderr go to stderr.

What is measured:

* append: `Store.append` in a loop, one process, meta `{"i": i}`, spread round-robin over four
  streams, for each durability mode; the time includes a final `flush()`.
* subscribe: one process subscribes (`store.subscribe(after_seq=store.last_seq)`), another
  (its own process group) appends frames carrying `meta={"t": time.time()}` at a steady rate;
  latency = receive time - meta["t"], so it includes the appender's own append call.
* sync: stream files with N frames written directly (no head file, an empty index), then a
  fresh process times `Store(path)` (recount of the last seq from the stream tails, plus the
  incremental index sync that the constructor runs) followed by `store.sync()` (a no-op).
* rebuild: `store.rebuild()` over the same N frames (drop the index, reindex every line).
* read: iterate every frame of one topic (1/10 of the frames) and of one stream (1/4).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

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
)
from ralph.store import Store
from ralph.store.frame import encode_frame, format_ts
from ralph.store.ids import IdGenerator
from ralph.store.writer import Durability

SCRIPT = Path(__file__).resolve()
RSS_TARGET_MB = 200.0
N_STREAMS = 4
N_TOPICS = 10
APPEND_STREAMS = ("bench-a", "bench-b", "bench-c", "bench-d")
INDEX_FILES = ("index.sqlite", "index.sqlite-wal", "index.sqlite-shm")

JOBS = ("append-always", "append-batch", "append-never", "subscribe", "sync", "rebuild",
        "read-topic", "read-stream")
DATA_JOBS = ("sync", "rebuild", "read-topic", "read-stream")
GROUPS = {"append": ("append-always", "append-batch", "append-never"),
          "read": ("read-topic", "read-stream")}


# -- configuration ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    frames: int  # size of the data set for sync, rebuild and read
    runs: int
    append_frames: int  # per run, durability batch and never
    always_frames: int  # per run, durability always
    sub_rate: float  # frames/s sent by the appender
    sub_seconds: float  # measured part of the subscription run
    sub_warm: float  # seconds of unmeasured frames first (process start-up, hub set-up)
    timeout: float  # per child process
    tmp: Path


def metrics_for(cfg: Config) -> list[Metric]:
    n = f"{cfg.frames:,}"
    return [
        Metric("append-always", "fps", f"append, durability=always ({cfg.always_frames:,})",
               "frames/s", 1_000),
        Metric("append-batch", "fps", f"append, durability=batch ({cfg.append_frames:,})",
               "frames/s", 50_000),
        Metric("append-never", "fps", f"append, durability=never ({cfg.append_frames:,})",
               "frames/s"),
        Metric("subscribe", "p50_ms", "subscribe latency p50 (cross-process)", "ms",
               None, higher_is_better=False),
        Metric("subscribe", "p99_ms", "subscribe latency p99 (cross-process)", "ms",
               50, higher_is_better=False),
        Metric("sync", "seconds", f"sync {n} frames (open + sync, empty index)", "s",
               None, higher_is_better=False),
        Metric("sync", "fps", "sync rate", "frames/s"),
        Metric("rebuild", "seconds", f"rebuild {n} frames", "s", 20, higher_is_better=False),
        Metric("rebuild", "fps", "rebuild rate", "frames/s"),
        Metric("read-topic", "seconds", "read one topic (1/10 of frames)", "s",
               None, higher_is_better=False),
        Metric("read-topic", "fps", "read one topic, rate", "frames/s"),
        Metric("read-stream", "seconds", f"read one stream (1/{N_STREAMS} of frames)", "s",
               None, higher_is_better=False),
        Metric("read-stream", "fps", "read one stream, rate", "frames/s"),
    ]


# -- child processes: the measurements themselves ------------------------------------------------


def job_append(params: dict[str, Any]) -> ChildOutput:
    durability = cast(Durability, params["durability"])
    count = int(params["count"])
    streams = APPEND_STREAMS
    with Store(params["store"], durability=durability) as store:
        last = store.append("bench.warmup", {"i": -1}, stream=streams[0]).seq  # opens a stream
        start = time.perf_counter()
        for i in range(count):
            last = store.append("bench.append", {"i": i}, stream=streams[i % len(streams)]).seq
        store.flush()
        elapsed = time.perf_counter() - start
        # not store.last_seq: that would index every frame, and count in the peak RSS
    if last != count + 1:
        raise BenchError(f"expected last seq {count + 1}, found {last}")
    return {"fps": count / elapsed, "seconds": elapsed}, {"frames": count}


def job_appender(params: dict[str, Any]) -> ChildOutput:
    """The other side of the subscription benchmark: appends at a steady rate, then 'done'."""
    with Store(params["store"], durability="batch") as store:
        return append_steadily(store, params)


def job_subscribe(params: dict[str, Any]) -> ChildOutput:
    return asyncio.run(_subscribe(params))


async def _subscribe(params: dict[str, Any]) -> ChildOutput:
    with Store(params["store"]) as store:
        latencies, appender_out = await subscription_latencies(SCRIPT, store, params)
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    sent_rate = float(appender_out.get("metrics", {}).get("rate", 0.0))
    info = {"frames": len(latencies), "max_ms": max(latencies), "appender_rss_mb": children,
            "appender_rate": sent_rate,
            "append_p99_ms": appender_out.get("info", {}).get("append_p99_ms", 0.0)}
    return {"p50_ms": percentile(latencies, 50), "p99_ms": percentile(latencies, 99)}, info


def job_generate(params: dict[str, Any]) -> ChildOutput:
    """Write N frames straight into the stream files (no head), next to an empty index.

    The empty index is also copied to `template`, to reset the store before each sync run.
    """
    root = Path(params["store"])
    count = int(params["frames"])
    Store(root).close()  # the directory layout and an empty index.sqlite
    (root / "head").unlink()  # let the next Store recount the last seq from the stream tails
    shutil.copyfile(root / "index.sqlite", params["template"])
    streams = [f"bench-{k}" for k in range(N_STREAMS)]
    topics = [f"bench.topic{k}" for k in range(N_TOPICS)]
    per_stream = [0] * N_STREAMS
    per_topic = [0] * N_TOPICS
    rng = random.Random(20261122)
    ids = IdGenerator()
    start = time.perf_counter()
    with contextlib.ExitStack() as stack:
        files = [stack.enter_context((root / "streams" / f"{name}.jsonl").open(
            "wb", buffering=1 << 20)) for name in streams]
        for seq in range(1, count + 1):
            s = rng.randrange(N_STREAMS)
            t = rng.randrange(N_TOPICS)
            frame_id, ms = ids.next()
            files[s].write(encode_frame(frame_id, seq, format_ts(ms), topics[t], streams[s],
                                        b'{"i":%d}' % seq, None))
            per_stream[s] += 1
            per_topic[t] += 1
    elapsed = time.perf_counter() - start
    return {"seconds": elapsed}, {"streams": dict(zip(streams, per_stream, strict=True)),
                                  "topics": dict(zip(topics, per_topic, strict=True))}


def job_open(params: dict[str, Any]) -> ChildOutput:
    start = time.perf_counter()
    with Store(params["store"]) as store:
        last = store.last_seq
    if last != int(params["frames"]):
        raise BenchError(f"expected last seq {params['frames']}, found {last}")
    return {"seconds": time.perf_counter() - start}, {}


def job_sync(params: dict[str, Any]) -> ChildOutput:
    count = int(params["frames"])
    start = time.perf_counter()
    store = Store(params["store"])
    opened = time.perf_counter()
    try:
        result = store.sync()
        synced = time.perf_counter()
        last = store.last_seq
    finally:
        closing = time.perf_counter()
        store.close()
    closed = time.perf_counter()
    if last != count or result.watermark != count:
        raise BenchError(f"expected watermark {count}, found {result.watermark} (last {last})")
    seconds = synced - start
    return {"seconds": seconds, "fps": count / seconds}, {
        "open_s": opened - start, "sync_call_s": synced - opened, "close_s": closed - closing}


def job_rebuild(params: dict[str, Any]) -> ChildOutput:
    count = int(params["frames"])
    with Store(params["store"]) as store:
        start = time.perf_counter()
        result = store.rebuild()
        seconds = time.perf_counter() - start
        closing = time.perf_counter()
    close_s = time.perf_counter() - closing
    if result.frames != count or result.watermark != count or result.errors:
        raise BenchError(f"rebuild indexed {result.frames} frames, watermark "
                         f"{result.watermark}, {result.errors} errors; expected {count}")
    return {"seconds": seconds, "fps": count / seconds}, {"close_s": close_s}


def job_read(params: dict[str, Any]) -> ChildOutput:
    expected = int(params["expected"])
    with Store(params["store"]) as store:
        start = time.perf_counter()
        if "topic" in params:
            frames = store.read(topic=params["topic"])
        else:
            frames = store.read(stream=params["stream"])
        count = 0
        for _frame in frames:
            count += 1
        seconds = time.perf_counter() - start
    if count != expected:
        raise BenchError(f"read {count} frames, expected {expected}")
    return {"seconds": seconds, "fps": count / seconds}, {"frames": count}


CHILD_JOBS: dict[str, ChildJob] = {
    "append": job_append,
    "appender": job_appender,
    "subscribe": job_subscribe,
    "generate": job_generate,
    "open": job_open,
    "sync": job_sync,
    "rebuild": job_rebuild,
    "read": job_read,
}


# -- the parent: running children and collecting results ---------------------------------------


def remove_index(store: Path) -> None:
    for name in INDEX_FILES:
        (store / name).unlink(missing_ok=True)


class Runner:
    def __init__(self, cfg: Config, root: Path) -> None:
        self.cfg = cfg
        self.root = root
        self.results: dict[str, JobResults] = {job: JobResults() for job in JOBS}
        self.data = root / "data"
        self.template = root / "empty-index.sqlite"
        self.dataset: dict[str, Any] = {}

    def measure(self, job: str, child: str, make_params: Callable[[int], dict[str, Any]],
                before: Callable[[int], None] | None = None,
                after: Callable[[int], None] | None = None) -> None:
        results = self.results[job]
        for run in range(self.cfg.runs):
            if before is not None:
                before(run)
            try:
                out = run_child(SCRIPT, child, make_params(run), self.cfg.timeout)
            except BenchError as exc:
                results.error = str(exc)
                log(f"{job} run {run + 1}/{self.cfg.runs}: FAILED: {exc}")
                return
            finally:
                if after is not None:
                    after(run)
            shown = results.record(out)
            log(f"{job} run {run + 1}/{self.cfg.runs}: {shown}, rss={out['rss_mb']:.1f} MB")

    def fresh_dir(self, name: str) -> Path:
        path = self.root / name
        shutil.rmtree(path, ignore_errors=True)
        return path

    def run_append(self, durability: str) -> None:
        count = self.cfg.always_frames if durability == "always" else self.cfg.append_frames
        job = f"append-{durability}"
        self.measure(job, "append",
                     lambda run: {"store": str(self.fresh_dir(f"{job}-{run}")),
                                  "durability": durability, "count": count},
                     after=lambda run: shutil.rmtree(self.root / f"{job}-{run}",
                                                     ignore_errors=True))

    def run_subscribe(self) -> None:
        cfg = self.cfg
        self.measure("subscribe", "subscribe",
                     lambda run: {"store": str(self.fresh_dir(f"subscribe-{run}")),
                                  "rate": cfg.sub_rate, "seconds": cfg.sub_seconds,
                                  "warm": cfg.sub_warm},
                     after=lambda run: shutil.rmtree(self.root / f"subscribe-{run}",
                                                     ignore_errors=True))

    def generate(self) -> None:
        log(f"generating {self.cfg.frames:,} frames ...")
        out = run_child(SCRIPT, "generate", {"store": str(self.data),
                                             "frames": self.cfg.frames,
                                             "template": str(self.template)},
                        self.cfg.timeout)
        self.dataset = out["info"]
        size = sum(p.stat().st_size for p in (self.data / "streams").glob("*.jsonl"))
        self.dataset["stream_bytes"] = size
        log(f"generated in {out['metrics']['seconds']:.1f} s, {size / 1e6:.1f} MB of JSONL")

    def reset_for_sync(self, _run: int) -> None:
        remove_index(self.data)
        (self.data / "head").unlink(missing_ok=True)
        shutil.copyfile(self.template, self.data / "index.sqlite")

    def ensure_indexed(self) -> None:
        out = run_child(SCRIPT, "open", {"store": str(self.data), "frames": self.cfg.frames},
                        self.cfg.timeout)
        index_bytes = sum(p.stat().st_size for p in self.data.glob("index.sqlite*"))
        self.dataset["index_bytes"] = index_bytes
        log(f"store opened in {out['metrics']['seconds']:.2f} s; "
            f"index {index_bytes / 1e6:.1f} MB")

    def run_all(self, selected: Sequence[str]) -> None:
        for durability in ("always", "batch", "never"):
            if f"append-{durability}" in selected:
                self.run_append(durability)
        if "subscribe" in selected:
            self.run_subscribe()
        if not any(job in selected for job in DATA_JOBS):
            return
        try:
            self.generate()
        except BenchError as exc:
            for job in DATA_JOBS:
                self.results[job].error = f"generating the data set failed: {exc}"
            return
        store = str(self.data)
        frames = self.cfg.frames
        if "sync" in selected:
            self.measure("sync", "sync", lambda _run: {"store": store, "frames": frames},
                         before=self.reset_for_sync)
        try:
            self.ensure_indexed()
        except BenchError as exc:
            for job in ("rebuild", "read-topic", "read-stream"):
                self.results[job].error = f"indexing the data set failed: {exc}"
            return
        if "rebuild" in selected:
            self.measure("rebuild", "rebuild", lambda _run: {"store": store, "frames": frames})
        topics: dict[str, int] = self.dataset["topics"]
        streams: dict[str, int] = self.dataset["streams"]
        topic = "bench.topic3"
        stream = "bench-1"
        if "read-topic" in selected:
            self.measure("read-topic", "read", lambda _run: {
                "store": store, "topic": topic, "expected": topics[topic]})
        if "read-stream" in selected:
            self.measure("read-stream", "read", lambda _run: {
                "store": store, "stream": stream, "expected": streams[stream]})


# -- the report ----------------------------------------------------------------------------------


def render_table(cfg: Config, results: dict[str, JobResults], selected: Sequence[str]
                 ) -> tuple[list[str], bool]:
    header = ("measurement", "median", "unit", "min .. max", "target", "result", "peak RSS MB")
    rows: list[tuple[str, ...]] = []
    all_ok = True
    for metric in metrics_for(cfg):
        if metric.job not in selected:
            continue
        res = results[metric.job]
        target = "-"
        if metric.target is not None:
            target = f"{'>=' if metric.higher_is_better else '<='} {fmt(metric.target)}"
        values = [run[metric.key] for run in res.runs if metric.key in run]
        if res.error is not None or len(values) < cfg.runs:
            all_ok = False
            error = (res.error or "missing values")[:60]
            rows.append((metric.label, "-", metric.unit, "-", target, f"ERROR: {error}", "-"))
            continue
        median = statistics.median(values)
        ok = metric.meets(median)
        rss = max(res.rss_mb)
        rss_ok = rss <= RSS_TARGET_MB
        verdict = "pass" if ok and rss_ok else ("FAIL" if not ok else "FAIL (RSS)")
        if metric.target is None and rss_ok:
            verdict = "-"
        all_ok = all_ok and ok and rss_ok
        rows.append((metric.label, fmt(median), metric.unit,
                     f"{fmt(min(values))} .. {fmt(max(values))}", target, verdict,
                     f"{rss:.1f}" + ("" if rss_ok else f" (> {RSS_TARGET_MB:.0f})")))
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    right = {1, 3, 6}

    def line(row: Sequence[str]) -> str:
        cells = [cell.rjust(w) if i in right else cell.ljust(w)
                 for i, (cell, w) in enumerate(zip(row, widths, strict=True))]
        return "  ".join(cells).rstrip()

    out = [line(header), "  ".join("-" * w for w in widths)]
    out += [line(row) for row in rows]
    return out, all_ok


def render_notes(cfg: Config, runner: Runner, selected: Sequence[str]) -> list[str]:
    notes: list[str] = [f"# peak RSS target: <= {RSS_TARGET_MB:.0f} MB for every measurement"]
    results = runner.results

    def median_info(job: str, key: str) -> float | None:
        values = [float(i[key]) for i in results[job].infos if key in i]
        return statistics.median(values) if values else None

    if "subscribe" in selected and results["subscribe"].runs:
        notes.append(
            f"# subscribe: {cfg.sub_rate:.0f} frames/s for {cfg.sub_seconds:.1f} s after "
            f"{cfg.sub_warm:.1f} s warm-up; max latency "
            f"{fmt(median_info('subscribe', 'max_ms') or 0)} ms (median of runs), appender "
            f"append() p99 {fmt(median_info('subscribe', 'append_p99_ms') or 0)} ms, appender "
            f"peak RSS {fmt(median_info('subscribe', 'appender_rss_mb') or 0)} MB")
    if "sync" in selected and results["sync"].runs:
        notes.append(
            f"# sync: Store() {fmt(median_info('sync', 'open_s') or 0)} s (tail recount + "
            f"index sync), then sync() {fmt(median_info('sync', 'sync_call_s') or 0)} s; "
            f"close (WAL checkpoint) {fmt(median_info('sync', 'close_s') or 0)} s not counted")
    if "rebuild" in selected and results["rebuild"].runs:
        notes.append(f"# rebuild: close (WAL checkpoint) "
                     f"{fmt(median_info('rebuild', 'close_s') or 0)} s not counted")
    if runner.dataset:
        data = runner.dataset
        extra = ""
        if "index_bytes" in data:
            extra = f", index {data['index_bytes'] / 1e6:.1f} MB"
        notes.append(f"# data set: {cfg.frames:,} frames, {N_STREAMS} streams, {N_TOPICS} "
                     f"topics, {data['stream_bytes'] / 1e6:.1f} MB of JSONL{extra}")
    return notes


# -- command line --------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--frames", type=int, default=None,
                        help="frames in the sync/rebuild/read data set (default 1,000,000)")
    parser.add_argument("--runs", type=int, default=None, help="runs per measurement (5)")
    parser.add_argument("--append-frames", type=int, default=None,
                        help="frames per append run, batch and never (200,000)")
    parser.add_argument("--always-frames", type=int, default=None,
                        help="frames per append run with durability=always (3,000)")
    parser.add_argument("--quick", action="store_true",
                        help="tiny sizes and 2 runs: a smoke test that takes under a minute")
    parser.add_argument("--only", action="append", default=None, metavar="NAME",
                        help=f"run only this measurement (repeatable, or comma-separated): "
                             f"{', '.join(JOBS)}, or the groups append, read")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds allowed per child process")
    parser.add_argument("--tmp", type=Path, default=Path("/tmp"),
                        help="where the temporary stores go (default /tmp)")
    add_common_options(parser)
    return parser.parse_args(argv)


def make_config(args: argparse.Namespace) -> Config:
    quick = bool(args.quick)
    frames = args.frames or (20_000 if quick else 1_000_000)
    runs = args.runs or (2 if quick else 5)
    if frames < 1 or runs < 1:
        raise SystemExit("--frames and --runs must be at least 1")
    timeout = args.timeout or max(120.0, frames / 1_000_000 * 900)
    return Config(
        frames=frames,
        runs=runs,
        append_frames=args.append_frames or (20_000 if quick else 200_000),
        always_frames=args.always_frames or (500 if quick else 3_000),
        sub_rate=200.0 if quick else 300.0,
        sub_seconds=1.0 if quick else 3.0,
        sub_warm=0.3 if quick else 0.5,
        timeout=timeout,
        tmp=args.tmp,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        return child_main(CHILD_JOBS, args.child, json.loads(args.params))
    cfg = make_config(args)
    selected = select_jobs(args.only, JOBS, GROUPS)
    header = machine_info(cfg.tmp)
    root = Path(tempfile.mkdtemp(prefix="ralph-store-bench-", dir=cfg.tmp))
    started = time.perf_counter()
    runner = Runner(cfg, root)
    try:
        runner.run_all(selected)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    table, all_ok = render_table(cfg, runner.results, selected)
    print(header)
    print(f"# ralph.store benchmark: {cfg.runs} runs per measurement, median shown; "
          f"{time.perf_counter() - started:.0f} s in all")
    print("\n".join(table))
    print("\n".join(render_notes(cfg, runner, selected)))
    failed = any(runner.results[job].error for job in selected)
    if failed:
        return 2
    return 1 if args.check and not all_ok else 0


if __name__ == "__main__":
    sys.exit(main())

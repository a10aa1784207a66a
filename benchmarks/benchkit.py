"""Shared plumbing of the benchmarks that run every measurement in a child process of their own.

Used by store_bench.py and scaleout_bench.py. Such a script re-runs itself as
`python SCRIPT --child JOB --params JSON`: the child runs one job from the script's table of
jobs (`child_main`) and prints its result as one `RESULT_MARK` line on stdout; the parent
(`run_child`) starts it in a process group of its own, ends the group if it overstays, passes
its stderr on and reads the result back. Also here: the result types of the table (`Metric`,
`JobResults`), number formatting, the machine line above the table, `--only` parsing, and the
cross-process subscription latency measurement that both event-store backends go through
(`append_steadily` in one process, `subscription_latencies` in the other).

Not a benchmark itself: the scripts import it as `benchkit` (they run as
`python benchmarks/x.py`, so benchmarks/ is on sys.path).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import platform
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from ralph.store import Store

RESULT_MARK = "BENCH_RESULT "

# the subscription latency measurement's frames
LAT_STREAM = "latency"
WARM_TOPIC = "bench.warm"
LAT_TOPIC = "bench.latency"
DONE_TOPIC = "bench.done"

ChildOutput = tuple[dict[str, float], dict[str, Any]]  # (metrics, info) of one child run
ChildJob = Callable[[dict[str, Any]], ChildOutput]


class BenchError(Exception):
    """A measurement that could not be taken (child crashed, timed out, wrong outcome)."""


# -- results -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Metric:
    job: str
    key: str  # key in the child's metrics
    label: str
    unit: str
    target: float | None = None
    higher_is_better: bool = True

    def meets(self, value: float) -> bool:
        """Whether `value` meets the target (True when there is none)."""
        if self.target is None:
            return True
        return value >= self.target if self.higher_is_better else value <= self.target


@dataclass
class JobResults:
    runs: list[dict[str, float]] = field(default_factory=list)
    rss_mb: list[float] = field(default_factory=list)
    infos: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None

    def record(self, out: Mapping[str, Any]) -> str:
        """Add one child's result (`run_child`); its metrics as `key=value, ...`."""
        metrics = {k: float(v) for k, v in out["metrics"].items()}
        self.runs.append(metrics)
        self.rss_mb.append(float(out["rss_mb"]))
        self.infos.append(out.get("info", {}))
        return ", ".join(f"{k}={fmt(v)}" for k, v in metrics.items())


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile (pct in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def fmt(value: float) -> str:
    """A figure with three or so significant digits, thousands separated: 12,345, 123, 1.23."""
    if value < 0:
        return "-" + fmt(-value)
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def machine_info(tmp: Path) -> str:
    """The `# CPU, cores, Python, OS, load, tmp, time` line printed above a table."""
    cpu = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    usable = len(os.sched_getaffinity(0))
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return (f"# {cpu}, {os.cpu_count()} cores ({usable} usable), Python "
            f"{platform.python_version()}, {platform.system()} {platform.release()}, "
            f"load {load}, tmp {tmp}, {now}")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- command line --------------------------------------------------------------------------------


def add_common_options(parser: argparse.ArgumentParser) -> None:
    """--check, and the hidden --child and --params that a child process is started with."""
    parser.add_argument("--check", action="store_true",
                        help="exit with status 1 if a target is missed")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--params", default="{}", help=argparse.SUPPRESS)


def select_jobs(only: list[str] | None, jobs: Sequence[str],
                groups: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """The jobs that --only names (all when None), in the order of `jobs`; a group name
    stands for its jobs."""
    if not only:
        return list(jobs)
    groups = groups or {}
    chosen: set[str] = set()
    for item in (name.strip() for arg in only for name in arg.split(",")):
        if item in groups:
            chosen.update(groups[item])
        elif item in jobs:
            chosen.add(item)
        else:
            raise SystemExit(f"unknown measurement {item!r}; choose from "
                             f"{', '.join([*jobs, *groups])}")
    return [job for job in jobs if job in chosen]


# -- the child: one job, its result on stdout ----------------------------------------------------


def terminate(signum: int, _frame: FrameType | None) -> None:
    """A SIGTERM handler: exit, so that `finally` blocks stop what this process started."""
    raise SystemExit(128 + signum)


def child_main(jobs: Mapping[str, ChildJob], job: str, params: dict[str, Any]) -> int:
    """Run `jobs[job]`; print its metrics, info and this process's peak RSS (MB) as the
    result line."""
    signal.signal(signal.SIGTERM, terminate)
    metrics, info = jobs[job](params)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(RESULT_MARK + json.dumps({"metrics": metrics, "rss_mb": rss_mb, "info": info}),
          flush=True)
    return 0


# -- the parent: running children ---------------------------------------------------------------


def finish_process(proc: subprocess.Popen[bytes], timeout: float,
                   grace: float = 5.0) -> tuple[bytes, bytes]:
    """Wait for `proc` (leader of its own process group); end the group if it overstays:
    SIGTERM, then SIGKILL after `grace` seconds."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, None)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            try:
                proc.communicate(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        raise
    return out or b"", err or b""


def parse_result(stdout: str) -> dict[str, Any]:
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_MARK):
            return cast(dict[str, Any], json.loads(line[len(RESULT_MARK):]))
    return {}


def run_child(script: Path, job: str, params: dict[str, Any], timeout: float, *,
              grace: float = 5.0, say_last_line: bool = False) -> dict[str, Any]:
    """Run `script --child job` in a process group of its own and return its result; its
    stderr goes to ours, each line marked `  [job]`. `grace`: see `finish_process`;
    `say_last_line`: a failure's message ends with the child's last line on stderr."""
    cmd = [sys.executable, str(script), "--child", job, "--params", json.dumps(params)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, err = finish_process(proc, timeout, grace=grace)
    except subprocess.TimeoutExpired:
        raise BenchError(f"{job} timed out after {fmt(timeout)} s") from None
    lines = err.decode(errors="replace").splitlines()
    for line in lines:
        log(f"  [{job}] {line}")
    result = parse_result(out.decode(errors="replace"))
    if proc.returncode != 0 or not result:
        message = f"{job} exited with status {proc.returncode}"
        if say_last_line:
            last = next((line for line in reversed(lines) if line.strip()), "")
            message += f": {last[:200]}"
        raise BenchError(message)
    return result


# -- subscription latency across processes -------------------------------------------------------


def append_steadily(store: Store, params: dict[str, Any]) -> ChildOutput:
    """The appending side of the subscription latency measurement: `params["rate"]` frames/s
    into `store`, each carrying time.time() in meta; WARM_TOPIC frames for `warm` seconds,
    then LAT_TOPIC ones for `seconds`, then one DONE_TOPIC frame (stops early at `deadline`)."""
    rate = float(params["rate"])
    warm = round(rate * float(params["warm"]))
    total = warm + round(rate * float(params["seconds"]))
    deadline = float(params["deadline"])
    interval = 1 / rate
    append_ms: list[float] = []
    sent = 0
    start = time.perf_counter()
    for i in range(total):
        delay = start + i * interval - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        if time.time() > deadline:
            break
        topic = WARM_TOPIC if i < warm else LAT_TOPIC
        before = time.perf_counter()
        store.append(topic, {"t": time.time(), "i": i}, stream=LAT_STREAM)
        append_ms.append((time.perf_counter() - before) * 1000)
        sent += topic == LAT_TOPIC
    elapsed = time.perf_counter() - start
    store.append(DONE_TOPIC, {"sent": sent}, stream=LAT_STREAM)
    return ({"sent": sent, "rate": len(append_ms) / elapsed},
            {"append_p99_ms": percentile(append_ms, 99) if append_ms else 0.0})


async def subscription_latencies(script: Path, store: Store, params: dict[str, Any],
                                 topic: str | None = None) -> tuple[list[float], dict[str, Any]]:
    """The subscribing side: subscribe to `store` (`topic`, after its last frame) while
    `script --child appender` (`append_steadily`, its own process group) appends to the same
    store. The latencies in ms of the LAT_TOPIC frames (delivery time - the time in their
    meta), and the appender's result; BenchError unless every frame came, in seq order."""
    rate = float(params["rate"])
    seconds = float(params["seconds"])
    warm = float(params["warm"])
    expected = round(rate * seconds)
    limit = warm + seconds + 30
    latencies: list[float] = []
    order_errors = 0
    last_seq = 0
    after = store.last_seq
    child_params = dict(params, deadline=time.time() + limit)
    proc = subprocess.Popen(
        [sys.executable, str(script), "--child", "appender", "--params",
         json.dumps(child_params)],
        stdout=subprocess.PIPE, start_new_session=True)
    try:
        async with (asyncio.timeout(limit),
                    store.subscribe(topic=topic, after_seq=after) as frames):
            async for frame in frames:
                received = time.time()
                if frame.seq <= last_seq:
                    order_errors += 1
                last_seq = frame.seq
                if frame.topic == LAT_TOPIC:
                    latencies.append((received - float(frame.meta["t"])) * 1000)
                elif frame.topic == DONE_TOPIC:
                    break
    finally:
        out, _err = finish_process(proc, timeout=limit)
    appender = parse_result(out.decode(errors="replace"))
    if proc.returncode != 0:
        raise BenchError(f"the appender process exited with {proc.returncode}")
    if len(latencies) != expected or order_errors:
        raise BenchError(f"received {len(latencies)} of {expected} frames, "
                         f"{order_errors} out of order")
    return latencies, appender

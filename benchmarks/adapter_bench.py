"""Adapter benchmarks: each stream parser's throughput, and the orchestrator's memory while
an agent prints 100 MB.

    python benchmarks/adapter_bench.py [--runs 5] [--mb 20] [--print-mb 100]

1. Parsing: each adapter's OutputParser over its CLI's recorded stream
   (tests/agents/recorded/<cli>-success.stdout, captured from the real CLI) repeated to
   --mb megabytes, fed line by line as the runner does. Target: >= 50 MB/s.
2. Memory: one Ralph iteration whose agent prints --print-mb megabytes (plain text through
   the command adapter, and claude stream-json through the claude adapter); the growth of
   the orchestrator's peak RSS during the iteration (tests/agents/rss_driver.py). Target:
   < 50 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from ralph.agents import adapter_for

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "tests" / "agents" / "recorded"
RSS_DRIVER = ROOT / "tests" / "agents" / "rss_driver.py"
CLIS = ("codex", "claude", "gemini", "opencode")


def parse_rate(cli: str, megabytes: int) -> float:
    lines = (RECORDED / f"{cli}-success.stdout").read_text().splitlines()
    unit = sum(len(line) + 1 for line in lines)
    data = lines * max(1, megabytes * 1_000_000 // unit)
    size = unit * (len(data) // len(lines))
    parser = adapter_for(cli).parser()
    start = time.perf_counter()
    for line in data:
        parser.feed_line("stdout", line)
    return size / (time.perf_counter() - start) / 1e6


def rss_growth(adapter: str, megabytes: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="ralph-adapter-bench-") as tmp:
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, str(RSS_DRIVER), "--project", f"{tmp}/p",
                               "--adapter", adapter, "--mb", str(megabytes)],
                              capture_output=True, text=True, timeout=900, check=True)
        seconds = time.perf_counter() - start
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"growth_mb": report["growth_kib"] / 1024, "peak_mb": report["peak_kib"] / 1024,
            "seconds": seconds}


def main() -> int:
    args = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args.add_argument("--runs", type=int, default=5)
    args.add_argument("--mb", type=int, default=20, help="MB of stream per parser run")
    args.add_argument("--print-mb", type=int, default=100, help="MB the loud agent prints")
    opts = args.parse_args()
    rates = {cli: [parse_rate(cli, opts.mb) for _ in range(opts.runs)] for cli in CLIS}
    memory = {a: [rss_growth(a, opts.print_mb) for _ in range(opts.runs)]
              for a in ("command", "claude")}
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    print(f"# {cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; median of {opts.runs} runs")
    print(f"{'measurement':<52} {'median':>10} {'min .. max':>18} {'target':>8} result")
    for cli, values in rates.items():
        median = statistics.median(values)
        print(f"{cli + ' parser (MB/s)':<52} {median:>10.1f} "
              f"{min(values):>8.1f} .. {max(values):<6.1f} {'>= 50':>8} "
              f"{'pass' if median >= 50 else 'FAIL'}")
    for adapter, rows in memory.items():
        growth = [r["growth_mb"] for r in rows]
        median = statistics.median(growth)
        print(f"{'RSS growth, ' + adapter + f' agent printing {opts.print_mb} MB (MB)':<52} "
              f"{median:>10.1f} {min(growth):>8.1f} .. {max(growth):<6.1f} {'< 50':>8} "
              f"{'pass' if median < 50 else 'FAIL'}")
        secs = statistics.median(r["seconds"] for r in rows)
        peak = statistics.median(r["peak_mb"] for r in rows)
        print(f"{'  iteration wall time (s) / peak RSS (MB)':<52} {secs:>10.1f} "
              f"{peak:>8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

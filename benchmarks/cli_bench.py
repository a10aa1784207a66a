"""CLI start-up: whole-process times of `ralph` commands, from fork+exec to exit.

    python benchmarks/cli_bench.py [--runs 15] [--iterations 10000] [--quick] [--baseline SRC]
                                   [--instructions]

Commands: `ralph --version`, `ralph --help`, `ralph status --json`, `ralph tasks` and `ralph
notes list`, the last three in a project with 10,000 recorded iterations (state.json and
about ten store events per iteration, built as loop_bench.py builds it). The interpreter's
own start (`python -c pass`, and `python -S -c pass` without site) is timed in the same
rounds: it is the floor no command can go below. Rounds are interleaved (one of each
command per round, after one warm-up round) so that a slow phase of the machine hits every
measurement alike; each figure is the median over the rounds, with the min and max seen.

`--baseline SRC` also times the commands with the `ralph` package from SRC (the `src/` of
another checkout, such as a worktree of main) in the same rounds: before/after figures that
share the machine's noise. `--instructions` adds the instructions each command executes
(once, under valgrind's cachegrind): a figure the other processes of a busy machine do not
move, for comparing two versions when wall-clock time drifts. Ralph's bytecode is compiled
first, as an installed Ralph has it. Targets: --version <= 80 ms, --help <= 200 ms, status,
tasks and notes list <= 150 ms.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import ralph  # noqa: E402
from loop_bench import history_project  # noqa: E402

RALPH = str(Path(sys.executable).with_name("ralph"))


@dataclass(frozen=True)
class Measurement:
    name: str
    argv: list[str]
    target_ms: float | None = None
    in_project: bool = False
    baseline: str | None = None  # PYTHONPATH of the baseline's ralph package

    def run(self, project: Path, wrapper: tuple[str, ...] = ()) -> tuple[float, str]:
        """One whole-process time in ms (the command must succeed), and its stderr."""
        env = dict(os.environ)
        if self.baseline is not None:
            env["PYTHONPATH"] = self.baseline
        cwd = project if self.in_project else ROOT
        start = time.perf_counter()
        done = subprocess.run([*wrapper, *self.argv], cwd=cwd, env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, timeout=600, check=False)
        elapsed = (time.perf_counter() - start) * 1000
        stderr = done.stderr.decode(errors="replace")
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(self.argv)} exited with {done.returncode}: "
                             f"{stderr.strip()}")
        return elapsed, stderr

    def instructions(self, project: Path) -> int:
        """Instructions the whole process executes, counted by cachegrind."""
        _, stderr = self.run(project, ("valgrind", "--tool=cachegrind",
                                       "--cachegrind-out-file=/dev/null"))
        found = re.search(r"I\s+refs:\s+([\d,]+)", stderr)
        if found is None:
            raise SystemExit(f"no instruction count from valgrind: {stderr.strip()}")
        return int(found.group(1).replace(",", ""))


def measurements(baseline: str | None) -> list[Measurement]:
    commands = [
        ("ralph --version", ["--version"], 80.0, False),
        ("ralph --help", ["--help"], 200.0, False),
        ("ralph status --json", ["status", "--json"], 150.0, True),
        ("ralph tasks", ["tasks"], 150.0, True),
        ("ralph notes list", ["notes", "list"], 150.0, True),
    ]
    rows = [Measurement("python -c pass (floor)", [sys.executable, "-c", "pass"]),
            Measurement("python -S -c pass", [sys.executable, "-S", "-c", "pass"])]
    for name, args, target, in_project in commands:
        rows.append(Measurement(name, [RALPH, *args], target, in_project))
        if baseline is not None:
            rows.append(Measurement(f"  baseline: {name}", [RALPH, *args], None, in_project,
                                    baseline))
    return rows


def compile_bytecode(package: Path) -> None:
    """Write the bytecode of a ralph package, as an installed Ralph has it: with
    PYTHONDONTWRITEBYTECODE set (as in some environments), every run would otherwise compile
    Ralph's modules from their source again."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True,
                   stdout=subprocess.DEVNULL, timeout=300)


def cpu_name() -> str:
    try:
        return next((line.split(":", 1)[1].strip() for line in
                     Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("model name")), platform.processor())
    except OSError:
        return platform.processor()


def load_text() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="rounds (median of these)")
    parser.add_argument("--iterations", type=int, default=10_000,
                        help="recorded iterations of the project")
    parser.add_argument("--quick", action="store_true",
                        help="7 rounds on a project with 1,000 iterations")
    parser.add_argument("--baseline", metavar="SRC",
                        help="also time the ralph package in SRC (a checkout's src/)")
    parser.add_argument("--instructions", action="store_true",
                        help="also count each command's instructions (needs valgrind)")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.iterations = 7, 1_000
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if not Path(RALPH).exists():
        parser.error(f"no {RALPH}: install Ralph into this interpreter's environment")
    if args.instructions and shutil.which("valgrind") is None:
        parser.error("--instructions needs valgrind")
    baseline = str(Path(args.baseline).resolve()) if args.baseline else None
    rows = measurements(baseline)
    compile_bytecode(Path(ralph.__file__).parent)
    if baseline is not None:
        compile_bytecode(Path(baseline) / "ralph")
    times: dict[str, list[float]] = {row.name: [] for row in rows}
    counts: dict[str, int] = {}
    base = Path(tempfile.mkdtemp(prefix="ralph-cli-bench-"))
    try:
        project = history_project(base, 50, args.iterations)
        load_before = load_text()
        for row in rows:  # warm-up: page cache, bytecode caches
            row.run(project)
        for number in range(args.runs):
            for row in rows:
                times[row.name].append(row.run(project)[0])
            print(f"round {number + 1}/{args.runs}", file=sys.stderr)
        load_after = load_text()
        if args.instructions:
            counts = {row.name: row.instructions(project) for row in rows}
    finally:
        shutil.rmtree(base, ignore_errors=True)
    report(args, rows, times, counts, load_before, load_after)
    return 0


def report(args: argparse.Namespace, rows: list[Measurement], times: dict[str, list[float]],
           counts: dict[str, int], load_before: str, load_after: str) -> None:
    print(f"# {cpu_name()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; load average {load_before} before, "
          f"{load_after} after; median of {args.runs} interleaved rounds; project with "
          f"{args.iterations:,} recorded iterations")
    floor = statistics.median(times[rows[0].name])
    print(f"{'measurement':<34} {'median ms':>9} {'- floor':>8} {'min .. max':>16} "
          f"{'target':>7} result" + ("  instructions" if counts else ""))
    for row in rows:
        values = times[row.name]
        median = statistics.median(values)
        over = "" if row is rows[0] else f"{median - floor:8.1f}"
        span = f"{min(values):.1f} .. {max(values):.1f}"
        target = "" if row.target_ms is None else f"<= {row.target_ms:.0f}"
        result = "" if row.target_ms is None else ("pass" if median <= row.target_ms
                                                   else "FAIL")
        line = f"{row.name:<34} {median:9.1f} {over:>8} {span:>16} {target:>7} {result:<6}"
        if counts:
            line += f" {counts[row.name] / 1e6:10,.0f} M"
        print(line.rstrip())


if __name__ == "__main__":
    sys.exit(main())

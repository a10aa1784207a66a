"""Storage benchmark: bytes on disk per MB of agent output, index included.

    python benchmarks/storage_bench.py [--mb 200] [--runs 3] [--quick] [--src DIR]

Each run is one real iteration (`LoopService.step` on a scratch git project, gates off) whose
agent prints --mb megabytes, in a child process of its own. Then a reader syncs the index
(what `ralph store cat`, a bridge or a monitor does) and the files are measured: the
iteration's log, the store's stream files, the index (SQLite file, WAL and shared memory,
measured while the store is open and again after it is closed), the content store, and the
total per MB of output (the log's size: it is the output). Target: <= 1.2.

Agents:

- plain: the command adapter, 80-character lines of text;
- json: the claude adapter reading claude's stream-json (the recorded
  tests/agents/recorded/claude-shell.stdout turns: a tool call, its result, a sentence),
  with tool results of 4 to 96 KiB, as reading files and running commands gives;
- json-small: the same adapter, every event a 990-character text: many small events of the
  CLI (joined past a stream's 1,000th, as plain lines are).

--src runs the iterations with another source tree's `ralph` (e.g. an export of main:
`git archive main | tar -x -C /tmp/ralph-main`, then --src /tmp/ralph-main/src) to compare.
"""

from __future__ import annotations

import argparse
import asyncio
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
from typing import Any

# In the measuring child, with --src, these come from the other source tree (PYTHONPATH).
from ralph.loop import LoopService
from ralph.scaffold import scaffold

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "tests" / "agents" / "recorded" / "claude-shell.stdout"
AGENTS = ("plain", "json", "json-small")
TARGET = 1.2
MIB = 1024 * 1024

# The agents: print `total` bytes of output in the agent's format, then end as the CLI ends.
PRINTER = r'''
import json, sys
mode, total, recorded = sys.argv[1], int(sys.argv[2]), sys.argv[3]
sys.stdin.read()
out = sys.stdout
written = 0


def emit(line):
    global written
    out.write(line)
    written += len(line.encode())


if mode == "plain":
    block = "".join(f"{i:08d} " + "the agent explains what it does, at some length." * 2
                    for i in range(64))
    lines = [block[i * 79:(i + 1) * 79] + "\n" for i in range(len(block) // 79)]
    chunk = "".join(lines)
    while written < total:
        emit(chunk)
    sys.exit(0)
init, call, result, said, end = (json.loads(line) for line in open(recorded))
emit(json.dumps(init) + "\n")
code = "".join(f"{i:6d}    value = compute(value, {i})  # step {i} of the work\n"
               for i in range(3000))
sizes = [4 * 1024, 16 * 1024, 48 * 1024, 96 * 1024]
turn = 0
while written < total:
    turn += 1
    if mode == "json-small":
        said["message"]["content"] = [{"type": "text", "text": f"{turn:08d} " + "y" * 981}]
        emit(json.dumps(said) + "\n")
        continue
    call_id = f"call_{turn:012d}"
    call["message"]["content"][0]["id"] = call_id
    call["message"]["content"][0]["input"] = {"command": f"cat src/module_{turn}.py"}
    emit(json.dumps(call) + "\n")
    text = code[:sizes[turn % len(sizes)]]
    result["message"]["content"][0].update(tool_use_id=call_id, content=text)
    result["tool_use_result"]["stdout"] = text  # claude prints a tool's output twice
    emit(json.dumps(result) + "\n")
    said["message"]["content"] = [{"type": "text", "text": f"Read module {turn}; next one."}]
    emit(json.dumps(said) + "\n")
said["message"]["content"] = [{"type": "text", "text": "Done. EXIT_SIGNAL: true"}]
emit(json.dumps(said) + "\n")
emit(json.dumps(end) + "\n")
'''


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, timeout=60,
                   stdin=subprocess.DEVNULL)


def make_project(root: Path, agent: str, output_bytes: int) -> None:
    root.mkdir(parents=True)
    _git(root, "init", "-q")
    _git(root, "config", "user.name", "bench")
    _git(root, "config", "user.email", "bench@localhost")
    scaffold(root, "md", False)
    (root / "PRD.md").write_text("# Bench\n\n## Tasks\n\n- [ ] 1. Print a lot\n")
    printer = root.parent / "printer.py"
    printer.write_text(PRINTER)
    argv = [sys.executable, str(printer), agent, str(output_bytes), str(RECORDED)]
    adapter = "command" if agent == "plain" else "claude"
    (root / "ralph.toml").write_text(
        f'[loop]\ndefault_agent = "loud"\n\n[agents.loud]\nadapter = "{adapter}"\n'
        f"argv = {json.dumps(argv)}\ntimeout_seconds = 3600\n\n[gates]\ncommands = []\n\n"
        "[git]\nauto_commit = true\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "bench project")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _tree(path: Path) -> int:
    return sum(_size(p) for p in path.rglob("*") if p.is_file()) if path.is_dir() else 0


def _index(store: Path) -> int:
    return sum(_size(store / f"index.sqlite{suffix}") for suffix in ("", "-wal", "-shm"))


def measure_one(agent: str, megabytes: float, base: Path) -> dict[str, Any]:
    """One iteration in this process (a child of the benchmark): sizes in bytes."""
    root = base / "project"
    make_project(root, agent, int(megabytes * MIB))
    store = root / ".ralph" / "store"
    service = LoopService(root)
    try:
        start = time.perf_counter()
        result = asyncio.run(service.step())
        seconds = time.perf_counter() - start
        begin = time.perf_counter()
        service.store.sync()  # what the first reader does
        sync_s = time.perf_counter() - begin
        frames = sum(1 for _ in service.store.read(topic="agent.output"))
        index_open = _index(store)
    finally:
        service.close()
    log = root / ".ralph" / "logs" / "000001.log"
    return {"agent": agent, "status": result.agent_status, "seconds": seconds,
            "sync_seconds": sync_s, "output": _size(log), "log": _size(log),
            "streams": _tree(store / "streams"), "index_open": index_open,
            "index": _index(store), "content": _tree(store / "cas"),
            "output_frames": frames}


def run_child(agent: str, megabytes: float, src: Path | None) -> dict[str, Any]:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(src), str(ROOT)])
    with tempfile.TemporaryDirectory(prefix="ralph-storage-bench-") as tmp:
        proc = subprocess.run([sys.executable, __file__, "--one", agent, "--mb",
                               str(megabytes), "--dir", tmp], capture_output=True, text=True,
                              timeout=3600, env=env, check=False, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise SystemExit(f"{agent}: the measuring process failed:\n{proc.stderr[-3000:]}")
    report: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return report


def per_mb(row: dict[str, Any], key: str) -> float:
    return float(row[key]) / float(row["output"])


def total(row: dict[str, Any], index_key: str = "index_open") -> int:
    return int(row["log"] + row["streams"] + row[index_key] + row["content"])


def report(args: argparse.Namespace, rows: dict[str, list[dict[str, Any]]]) -> None:
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    source = f"source {args.src}" if args.src else "this source tree"
    print(f"# {cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {source}; {args.mb:g} MB of output per "
          f"agent, median of {args.runs} runs (per MB of output; MB = 2^20 bytes)")
    columns = ("agent", "output MB", "log", "streams", "index", "index closed", "content",
               "total", "target", "result", "frames", "step s")
    print(" | ".join(columns))
    for agent, runs in rows.items():
        by_total = sorted(runs, key=lambda r: total(r) / r["output"])
        mid = by_total[len(by_total) // 2]
        ratio = total(mid) / mid["output"]
        spread = [total(r) / r["output"] for r in runs]
        print(" | ".join([
            agent, f"{mid['output'] / MIB:.1f}", f"{per_mb(mid, 'log'):.3f}",
            f"{per_mb(mid, 'streams'):.4f}", f"{per_mb(mid, 'index_open'):.4f}",
            f"{per_mb(mid, 'index'):.4f}", f"{per_mb(mid, 'content'):.4f}",
            f"{ratio:.3f} ({min(spread):.3f} .. {max(spread):.3f})", f"<= {TARGET}",
            "pass" if ratio <= TARGET else "FAIL",
            f"{mid['output_frames']:,}",
            f"{statistics.median(r['seconds'] for r in runs):.1f}"]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=200.0, help="agent output per run (MiB)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="20 MB, 1 run")
    parser.add_argument("--agents", default=",".join(AGENTS),
                        help=f"comma-separated, of {', '.join(AGENTS)}")
    parser.add_argument("--src", type=Path, help="run another source tree's ralph (its src/)")
    parser.add_argument("--one", choices=AGENTS, help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:  # the measuring child
        print(json.dumps(measure_one(args.one, args.mb, args.dir)))
        return 0
    if args.quick:
        args.mb, args.runs = 20.0, 1
    agents = [a for a in args.agents.split(",") if a]
    unknown = sorted(set(agents) - set(AGENTS))
    if unknown or args.mb <= 0 or args.runs < 1:
        parser.error(f"unknown agent {unknown[0]!r}" if unknown else
                     "--mb must be positive and --runs at least 1")
    rows: dict[str, list[dict[str, Any]]] = {}
    for agent in agents:
        for run in range(args.runs):
            row = run_child(agent, args.mb, args.src)
            if row["status"] != "ok":
                raise SystemExit(f"{agent}: the agent ended {row['status']}")
            rows.setdefault(agent, []).append(row)
            print(f"{agent} run {run + 1}/{args.runs}: {total(row) / row['output']:.3f} "
                  f"per MB, {row['seconds']:.1f} s", file=sys.stderr)
    report(args, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

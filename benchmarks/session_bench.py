"""Agent sessions: launch latency, watch throughput across processes, many sessions at once.

    python benchmarks/session_bench.py [--runs 5] [--events 50000] [--sessions 100]

- **Launch to first event**: `SessionService.launch` of a no-op command agent (`sh` printing
  one line) until its first `agent.output` frame reaches a `watch` in the same process,
  against the floor: the same `sh` started directly (asyncio subprocess) until its first
  byte of output. Target: at most 30 ms beyond the floor. Median of 20 launches a run.
- **Watch throughput**: a writer process appends `--events` frames to a session's stream as
  fast as it can; `SessionService.watch` in this process receives them (store subscription:
  replay, then live). Events per second from the first to the last received. Target:
  >= 20,000/s.
- **Many sessions**: `--sessions` sessions of a sleeping command agent at once in one
  process: the orchestrator's RSS with all of them running (target <= 150 MB), and its open
  file descriptors before and after they are all stopped (none may be left open; the
  store's stream files, a cache it bounds to 64, are counted apart).

- **Approvals** (Claude Code's PreToolUse hook, `python -m ralph.approvals.claude_hook`, run
  as Claude Code runs it: a process per tool call): a call a rule decides, from the hook's
  start to its answer and exit; and under `ask`, from a person's answer recorded in this
  process to the waiting hook's exit (its store subscription sees the answer). Median of
  10 each a run. No target: a tool call costs this on top of the tool itself.

Each figure is the median over the runs, with min and max. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path

from ralph.approvals.desk import ApprovalDesk
from ralph.approvals.policy import ApprovalPolicy, PolicyFile
from ralph.config import load_config
from ralph.flock import FileLock
from ralph.sessions import SessionService, session_stream
from ralph.store import Store

NOOP = ["sh", "-c", "cat >/dev/null; echo ready"]
SLEEPER = ["sh", "-c", "cat >/dev/null; exec sleep 600"]
LAUNCHES = 20


def project(base: Path) -> Path:
    root = base / "proj"
    (root / ".ralph").mkdir(parents=True)
    (root / "ralph.toml").write_text(
        '[loop]\ndefault_agent = "noop"\n\n'
        f'[agents.noop]\nargv = {list(NOOP)!r}\n\n'.replace("'", '"')
        + f'[agents.sleeper]\nargv = {list(SLEEPER)!r}\n'.replace("'", '"'))
    return root


async def floor_ms() -> float:
    """The no-op agent's own start: spawn to its first byte of output."""
    start = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(*NOOP, stdin=asyncio.subprocess.PIPE,
                                                stdout=asyncio.subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"prompt")
    proc.stdin.close()
    await proc.stdout.read(1)
    elapsed = (time.perf_counter() - start) * 1000
    await proc.wait()
    return elapsed


async def launch_ms(sessions: SessionService) -> float:
    """launch() to the first agent.output frame seen by a watch."""
    start = time.perf_counter()
    session_id = await sessions.launch("prompt")
    elapsed = 0.0
    async for frame in sessions.watch(session_id):
        if frame.topic == "agent.output" and not elapsed:
            elapsed = (time.perf_counter() - start) * 1000
    await sessions.wait(session_id)
    return elapsed


def launch_run(base: Path) -> dict[str, float]:
    root = project(base / "launch")

    async def go() -> tuple[list[float], list[float]]:
        with Store(root / ".ralph" / "store") as store:
            sessions = SessionService(root, load_config(root), store)
            await launch_ms(sessions)  # warm: imports, containment's guard, the store
            ralph, floor = [], []
            for _ in range(LAUNCHES):
                floor.append(await floor_ms())
                ralph.append(await launch_ms(sessions))
            return ralph, floor

    ralph, floor = asyncio.run(go())
    return {"launch_ms": statistics.median(ralph), "floor_ms": statistics.median(floor),
            "beyond_ms": statistics.median(r - f for r, f in zip(ralph, floor, strict=True))}


WRITER = textwrap.dedent("""\
    import sys
    from ralph.store import Store
    store_dir, stream, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with Store(store_dir, durability="never") as store:
        for n in range(count):
            store.append("agent.output", {"kind": "text", "content": "line " + str(n)},
                         stream=stream)
        store.append("session.finished", {"session_id": stream.split("/", 1)[1],
                                          "status": "completed"}, stream=stream)
""")


def watch_run(base: Path, events: int) -> dict[str, float]:
    root = project(base / "watch")
    store_dir = root / ".ralph" / "store"

    async def go() -> float:
        with Store(store_dir) as store:
            sessions = SessionService(root, load_config(root), store)
            session_id = "ses_bench"
            store.append("session.started", {"session_id": session_id, "agent": "noop",
                                             "cwd": str(root), "owner_pid": os.getpid()},
                         content="prompt", stream=session_stream(session_id))
            # Held as an owner would, so that the watch does not record the session lost.
            lock = FileLock(sessions.session_dir(session_id) / "owner.lock")
            lock.try_acquire()
            writer = subprocess.Popen([sys.executable, "-c", WRITER, str(store_dir),
                                       session_stream(session_id), str(events)])
            first = last = 0.0
            seen = 0
            try:
                async for frame in sessions.watch(session_id):
                    if frame.topic == "agent.output":
                        seen += 1
                        last = time.perf_counter()
                        first = first or last
            finally:
                lock.release()
                writer.wait()
            assert seen == events, (seen, events)
            return (events - 1) / (last - first)

    return {"watch_per_s": asyncio.run(go())}


def many_run(base: Path, count: int) -> dict[str, float]:
    root = project(base / "many")

    async def go() -> dict[str, float]:
        with Store(root / ".ralph" / "store") as store:
            sessions = SessionService(root, load_config(root), store)
            await sessions.wait(await sessions.launch("warm"), 30)
            fds_before = _fds(root)
            ids = [await sessions.launch("sleep", "sleeper", allow_concurrent=True)
                   for _ in range(count)]
            await asyncio.sleep(1.0)  # every agent started
            running = sum(1 for info in sessions.list(status="running"))
            rss = _rss_mb()
            await sessions.aclose()
            stopped = sum(1 for sid in ids if sessions.get(sid).status == "stopped")
            store.flush()
            fds_after = _fds(root)
            return {"running": running, "rss_mb": rss, "stopped": stopped,
                    "fds_left": fds_after[0] - fds_before[0], "stream_files": fds_after[1]}

    return asyncio.run(go())


HOOKS = 10


def approvals_run(base: Path) -> dict[str, float]:
    root = project(base / "approvals")
    folder = root / ".ralph" / "sessions" / "ses_hook"
    folder.mkdir(parents=True)
    store_dir = (root / ".ralph" / "store").resolve()
    hook = [sys.executable, "-m", "ralph.approvals.claude_hook", str(folder / "approvals.json")]
    by_rule: list[float] = []
    by_person: list[float] = []
    with Store(store_dir) as store:
        desk = ApprovalDesk(store, "ses_hook", folder)
        for mode in ("deny", "ask"):
            PolicyFile(ApprovalPolicy(mode, ("Read",), (), 60), store_dir, "ses_hook",
                       folder).write()
            for n in range(HOOKS):
                call = (f'{{"tool_name": "{"Read" if mode == "deny" else "Bash"}", '
                        f'"tool_input": {{"command": "ls"}}, "tool_use_id": "{mode}{n}"}}')
                start = time.perf_counter()
                proc = subprocess.Popen(hook, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True)
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write(call)
                proc.stdin.close()
                if mode == "ask":
                    while not desk.pending():
                        time.sleep(0.001)
                    start = time.perf_counter()
                    desk.answer(f"{mode}{n}", "allow", by="bench")
                out = proc.stdout.read()
                proc.wait(60)
                elapsed = (time.perf_counter() - start) * 1000
                assert '"allow"' in out, out
                (by_rule if mode == "deny" else by_person).append(elapsed)
    return {"hook_rule_ms": statistics.median(by_rule),
            "hook_answer_ms": statistics.median(by_person)}


def _fds(root: Path) -> tuple[int, int]:
    """This process's open descriptors but the store's stream files (a cache the store
    bounds to ralph.store.writer.MAX_OPEN_STREAMS), and those."""
    streams = str(root / ".ralph" / "store" / "streams")
    other = cached = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(streams):
            cached += 1
        else:
            other += 1
    return other, cached


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--sessions", type=int, default=100)
    args = parser.parse_args()
    results: list[dict[str, float]] = []
    load_before = os.getloadavg()
    for n in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="ralph-session-bench-") as tmp:
            base = Path(tmp)
            row = {**launch_run(base), **watch_run(base, args.events),
                   **many_run(base, args.sessions), **approvals_run(base)}
        results.append(row)
        print(f"run {n + 1}/{args.runs}: " + ", ".join(f"{k} {v:.1f}" for k, v in row.items()),
              file=sys.stderr)
    load_after = os.getloadavg()
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; load "
          f"{load_before[0]:.2f} before, {load_after[0]:.2f} after; median of {args.runs} runs")
    rows = [("launch to first event", "launch_ms", "ms", None),
            ("  the agent alone (floor)", "floor_ms", "ms", None),
            ("  beyond the floor", "beyond_ms", "ms", ("<=", 30.0)),
            ("watch, another process writing", "watch_per_s", "/s", (">=", 20_000.0)),
            (f"{args.sessions} sessions: running at once", "running", "", None),
            (f"{args.sessions} sessions: orchestrator RSS", "rss_mb", "MB", ("<=", 150.0)),
            (f"{args.sessions} sessions: stopped", "stopped", "", None),
            ("  file descriptors left open", "fds_left", "", ("<=", 0.0)),
            ("  stream files the store keeps open", "stream_files", "", ("<=", 64.0)),
            ("approval by a rule (hook process)", "hook_rule_ms", "ms", None),
            ("approval by a person: answer to hook", "hook_answer_ms", "ms", None)]
    print(f"{'measurement':40} {'median':>12} {'min .. max':>22}  target  result")
    for name, key, unit, target in rows:
        values = [r[key] for r in results]
        median = statistics.median(values)
        spread = f"{min(values):,.1f} .. {max(values):,.1f}"
        verdict = ""
        goal = ""
        if target is not None:
            op, bound = target
            goal = f"{op} {bound:,.0f}"
            verdict = "pass" if (median <= bound if op == "<=" else median >= bound) else "FAIL"
        print(f"{name:40} {median:>10,.1f} {unit:<2}{spread:>21}  {goal:7} {verdict}")


if __name__ == "__main__":
    main()

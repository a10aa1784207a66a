"""`ralph serve`: request latency, fan-out of agent output to many clients, a client that
never reads.

    python benchmarks/remote_bench.py [--runs 3] [--requests 2000] [--clients 100]
                                      [--rate 1000] [--seconds 5] [--slow-seconds 20]

A real `ralph serve` process on a scratch project, real WebSocket clients (`websockets`)
in this process:

- **status/get**: p50 and p99 of `--requests` calls one after another over one connection
  (target p50 <= 1 ms), after 50 to warm up; at most 550 in all (the rate limit allows a
  client 600 a minute).
- **Fan-out**: `--clients` connected clients (each sends `initialize` first, as a client
  does: a new connection's live events wait for its first message); a writer process
  appends `agent.output`
  frames to an agent session's stream at `--rate` a second in all for `--seconds`; the
  server projects each frame once and sends it to every client. Delivery latency = when a
  client receives an event minus when the writer appended it (the time is in the event's
  content): p50 and p99 over all clients (target p99 <= 50 ms); the server's CPU time per
  second meanwhile.
- **A client that never reads**: the same for `--slow-seconds`, with pieces of 900
  characters of random text, and one more client that stops reading (with a small
  receive buffer, as a phone on a poor network); the others' p99, the server's RSS at the
  end against its RSS before (bounded: the slow one is dropped once 1,024 messages or
  8 MiB of events wait for it, beyond what the kernel holds), and whether it was dropped.

Medians over the runs, with min and max. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import websockets

TOKEN = "bench-token"
WRITER = textwrap.dedent("""\
    import os, sys, time
    from ralph.store import Store
    store_dir, stream = sys.argv[1], sys.argv[2]
    rate, seconds, pad = float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
    with Store(store_dir, durability="never") as store:
        start = time.time()
        n = 0
        while time.time() - start < seconds:
            due = start + n / rate
            if due > time.time():
                time.sleep(due - time.time())
            # random text: the connection compresses, and "xxx" would be next to nothing
            noise = os.urandom(pad).hex()[:pad]
            store.append("agent.output", {"kind": "text", "tool": None,
                                          "content": repr(time.time()) + " " + noise},
                         stream=stream)
            n += 1
    print(n)
""")


def project(base: Path) -> Path:
    root = base / "proj"
    (root / ".ralph").mkdir(parents=True)
    (root / "ralph.toml").write_text('[agents.echo]\nargv = ["sh", "-c", "cat"]\n')
    return root


def start_server(root: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`ralph serve` in `root`; the process and its WebSocket's address with the token."""
    proc, info = serve(root)
    return proc, str(info["ws"]) + f"?token={TOKEN}"


def serve(root: Path) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    """`ralph serve --token TOKEN` in `root`, once it listens; its serve.json."""
    proc = subprocess.Popen([sys.executable, "-m", "ralph", "serve", "--port", "0",
                             "--token", TOKEN], cwd=root, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    serve_file = root / ".ralph" / "serve.json"
    deadline = time.monotonic() + 60
    while not serve_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("ralph serve did not start")
        time.sleep(0.05)
    return proc, dict(json.loads(serve_file.read_text()))


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def latency(url: str, requests: int) -> dict[str, float]:
    async with websockets.connect(url) as ws:
        times = []
        for n in range(requests + 50):
            begin = time.perf_counter()
            await ws.send(json.dumps({"jsonrpc": "2.0", "id": n, "method": "status/get"}))
            while json.loads(await ws.recv()).get("id") != n:
                pass
            if n >= 50:  # warmed up
                times.append((time.perf_counter() - begin) * 1000)
    times.sort()
    return {"status_p50_ms": statistics.median(times),
            "status_p99_ms": times[int(len(times) * 0.99) - 1]}


async def stuck_client(url: str) -> Any:
    """A client that reads nothing after its first answer, with a small receive buffer (a
    phone on a poor network; by default the kernel would take in up to 32 MB for it)."""
    host, port = url.removeprefix("ws://").split("/")[0].rsplit(":", 1)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    sock.connect((host, int(port)))
    sock.setblocking(False)
    stuck = await websockets.connect(url, max_queue=1, sock=sock)
    await stuck.send(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize"}))
    await stuck.recv()
    stuck.transport.pause_reading()  # from now on
    return stuck


async def was_dropped(stuck: Any) -> bool:
    """Whether the server closed the client that did not read (seen once it reads again:
    what the kernel held for it, then the end)."""
    stuck.transport.resume_reading()
    try:
        while True:
            await asyncio.wait_for(stuck.recv(), 10)
    except websockets.ConnectionClosed:
        return True
    except TimeoutError:
        return False


async def fan_out(root: Path, url: str, pid: int, clients: int, rate: float, seconds: float,
                  slow: bool) -> dict[str, float]:
    delays: list[float] = []
    stream = "sessions/ses_bench"

    async def listen(ws: Any, until: float) -> None:
        while time.time() < until:
            try:
                message = json.loads(await asyncio.wait_for(ws.recv(), 1))
            except TimeoutError:
                continue
            except websockets.ConnectionClosed:
                return
            if message.get("method") == "event/agent_output":
                now = time.time()  # (pieces that came at once arrive merged, a line each)
                for line in message["params"]["content"].split("\n"):
                    delays.append((now - float(line.split(" ", 1)[0])) * 1000)

    connections = [await websockets.connect(url) for _ in range(clients)]
    for ws in connections:  # as a client does: initialize first (live events follow)
        await ws.send(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize"}))
    for ws in connections:
        while json.loads(await ws.recv()).get("id") != 0:
            pass
    stuck = await stuck_client(url) if slow else None
    rss_before = rss_mb(pid)
    cpu_before = cpu_seconds(pid)
    until = time.time() + seconds + 2
    # With a client that never reads, each event is about 1 KB (a line of agent output at
    # the excerpt's full length): enough to fill its TCP buffers and then its queue.
    pad = 900 if slow else 0
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(root / ".ralph" / "store"),
                               stream, str(rate), str(seconds), str(pad)],
                              stdout=subprocess.PIPE, text=True)
    await asyncio.gather(*(listen(ws, until) for ws in connections))
    written = int(writer.communicate()[0])
    cpu = (cpu_seconds(pid) - cpu_before) / seconds
    rss_after = rss_mb(pid)
    dropped = float(stuck is not None and await was_dropped(stuck))
    for ws in connections:
        await ws.close()
    if stuck is not None:
        stuck.transport.abort()
    delays.sort()
    expected = written * clients
    return {"p50_ms": statistics.median(delays), "p99_ms": delays[int(len(delays) * 0.99) - 1],
            "delivered": len(delays) / expected, "cpu": cpu, "rss_growth_mb": rss_after
            - rss_before, "dropped": dropped}


def one_run(args: argparse.Namespace) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="ralph-remote-bench-") as tmp:
        root = project(Path(tmp))
        proc, url = start_server(root)
        try:
            row = asyncio.run(latency(url, args.requests))
            fast = asyncio.run(fan_out(root, url, proc.pid, args.clients, args.rate,
                                       args.seconds, slow=False))
            row.update({f"fan_{k}": v for k, v in fast.items()})
            slow = asyncio.run(fan_out(root, url, proc.pid, args.clients, args.rate,
                                       args.slow_seconds, slow=True))
            row.update({f"slow_{k}": v for k, v in slow.items()})
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
        return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--requests", type=int, default=500, choices=range(1, 551),
                        metavar="N (at most 550)")
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--rate", type=float, default=1000)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--slow-seconds", type=float, default=20,
                        help="the run with a client that never reads: long enough to fill "
                             "the kernel's buffers and its queue")
    args = parser.parse_args()
    load_before = os.getloadavg()
    rows = []
    for n in range(args.runs):
        rows.append(one_run(args))
        print(f"run {n + 1}/{args.runs}: " + ", ".join(f"{k} {v:.3f}" for k, v in
                                                        rows[-1].items()), file=sys.stderr)
    load_after = os.getloadavg()
    print(f"# {platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; load "
          f"{load_before[0]:.2f} before, {load_after[0]:.2f} after; median of {args.runs} runs")
    table = [("status/get p50", "status_p50_ms", "ms", ("<=", 1.0)),
             ("status/get p99", "status_p99_ms", "ms", None),
             (f"{args.clients} clients: delivery p50", "fan_p50_ms", "ms", None),
             (f"{args.clients} clients: delivery p99", "fan_p99_ms", "ms", ("<=", 50.0)),
             ("  events delivered (of those sent)", "fan_delivered", "", (">=", 1.0)),
             ("  server CPU (cores busy)", "fan_cpu", "", None),
             ("+ a client that never reads: others' p99", "slow_p99_ms", "ms", None),
             ("  server RSS growth", "slow_rss_growth_mb", "MB", None),
             ("  the slow client dropped", "slow_dropped", "", None)]
    print(f"{'measurement':44} {'median':>10} {'min .. max':>22}  target")
    for name, key, unit, target in table:
        values = [r[key] for r in rows]
        median = statistics.median(values)
        goal = ""
        if target is not None:
            op, bound = target
            ok = median <= bound if op == "<=" else median >= bound
            goal = f"{op} {bound:g} {'pass' if ok else 'FAIL'}"
        print(f"{name:44} {median:>8.3f} {unit:<2}{min(values):>10.3f} .. {max(values):<9.3f}"
              f"  {goal}")


if __name__ == "__main__":
    main()

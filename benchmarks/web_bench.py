"""The web monitor's first paint, in a real headless Chromium, on a project whose store
records 10,000 iterations (and on one with none, to compare).

    python benchmarks/web_bench.py [--runs 7] [--iterations 10000]

A real `ralph serve` on a scratch project; each run opens the page in a new browser
context (nothing cached: a new tab of a new browser profile) and reads the browser's own
timings:

- **first paint**: the page's first contentful paint (`first-contentful-paint`), from the
  start of the navigation (target: under 1 s with 10,000 iterations);
- **ready**: when everything is shown once (`ralph:ready`, marked by the page): connected,
  `initialize` answered, the loop's status, the tasks, the first page of the iteration
  history (25 items: never the whole history), sessions, notes and the git status;
- the first run is reported apart (**cold**): the server counts the history on its first
  `loop/iterations` (once per server), every later page is read from the index.

Medians of the warm runs, with min and max. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from playwright.sync_api import Browser, sync_playwright

from ralph.scaffold import scaffold
from ralph.store import Store
from ralph.testing.history import record_history

sys.path.insert(0, str(Path(__file__).resolve().parent))

from remote_bench import TOKEN, serve

TASKS = 10


def make_project(base: Path, iterations: int) -> Path:
    root = base / f"history-{iterations}"
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    scaffold(root, "md", False)
    tasks = "\n".join(f"- [ ] {n}. Task number {n}" for n in range(1, TASKS + 1))
    (root / "PRD.md").write_text(f"# Bench\n\n## Tasks\n\n{tasks}\n")
    (root / "ralph.toml").write_text('[loop]\ndefault_agent = "noop"\n\n'
                                     '[agents.noop]\nargv = ["true"]\n')
    with Store(root / ".ralph" / "store", durability="never") as store:
        record_history(store, iterations, TASKS)
    return root


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def timings(browser: Browser, http: str) -> tuple[float, float, int]:
    """(first paint ms, ready ms, iterations shown) of one fresh page load."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.goto(f"{http}/?token={TOKEN}")
        page.wait_for_selector("body[data-ready=true]", state="attached", timeout=60_000)
        paint = page.evaluate("performance.getEntriesByName('first-contentful-paint')"
                              "[0].startTime")
        ready = page.evaluate("performance.getEntriesByName('ralph:ready')[0].startTime")
        shown = page.locator("#iterations > li").count()
        return float(paint), float(ready), shown
    finally:
        context.close()


def measure(browser: Browser, root: Path, runs: int) -> dict[str, float]:
    proc, info = serve(root)
    http = str(info["http"])
    try:
        cold_paint, cold_ready, shown = timings(browser, http)
        paints, readies = [], []
        for n in range(runs):
            paint, ready, shown = timings(browser, http)
            paints.append(paint)
            readies.append(ready)
            print(f"  {root.name} run {n + 1}: first paint {paint:.0f} ms, ready "
                  f"{ready:.0f} ms", file=sys.stderr)
    finally:
        stop(proc)
    return {"cold_paint": cold_paint, "cold_ready": cold_ready, "shown": shown,
            "paint": statistics.median(paints), "paint_min": min(paints),
            "paint_max": max(paints), "ready": statistics.median(readies),
            "ready_min": min(readies), "ready_max": max(readies)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--iterations", type=int, default=10_000)
    args = parser.parse_args()
    chromium = os.environ.get("RALPH_CHROMIUM") or shutil.which("chromium")
    if not chromium:
        raise SystemExit("error: no chromium (apt-get install -y chromium, or RALPH_CHROMIUM)")
    with tempfile.TemporaryDirectory() as base, sync_playwright() as playwright:
        print(f"recording {args.iterations:,} iterations...", file=sys.stderr)
        projects = [make_project(Path(base), 0), make_project(Path(base), args.iterations)]
        browser = playwright.chromium.launch(executable_path=chromium)
        try:
            results = [(root, measure(browser, root, args.runs)) for root in projects]
        finally:
            browser.close()
        version = browser.version
    print(f"# web monitor, {datetime.now(UTC):%Y-%m-%d}, {platform.machine()}, "
          f"{os.cpu_count()} CPUs, Python {platform.python_version()}, Chromium {version}")
    print(f"median of {args.runs} warm page loads (min-max); cold = the server's first\n")
    print("| iterations recorded | first paint | ready | cold first paint | cold ready "
          "| iterations shown |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for root, r in results:
        size = int(root.name.split("-")[1])
        print(f"| {size:,} | {r['paint']:.0f} ms ({r['paint_min']:.0f}-{r['paint_max']:.0f}) "
              f"| {r['ready']:.0f} ms ({r['ready_min']:.0f}-{r['ready_max']:.0f}) "
              f"| {r['cold_paint']:.0f} ms | {r['cold_ready']:.0f} ms | {r['shown']:.0f} |")


if __name__ == "__main__":
    main()

"""Runs one Ralph iteration whose agent prints a lot, and reports how much the orchestrator's
peak RSS grew meanwhile (KiB). Used by test_limits.py and benchmarks/adapter_bench.py.

    python tests/agents/rss_driver.py --project DIR --adapter command|claude --mb 100
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ralph.loop import LoopService
from ralph.scaffold import scaffold

# A fake CLI: `text` prints plain lines; `claude` prints claude's stream-json (assistant text
# events, then a result), so the JSON parser does the work.
PRINTER = """
import json, sys
mode, total = sys.argv[1], int(sys.argv[2]) * 1024 * 1024
line = "x" * 990
out = sys.stdout
written = 0
if mode == "claude":
    out.write(json.dumps({"type": "system", "subtype": "init", "session_id": "s1"}) + "\\n")
    event = json.dumps({"type": "assistant", "message": {"content": [
        {"type": "text", "text": line}]}, "session_id": "s1"}) + "\\n"
    while written < total:
        out.write(event)
        written += len(event)
    out.write(json.dumps({"type": "result", "subtype": "success", "is_error": False,
                          "result": "done", "session_id": "s1", "usage": {
                              "input_tokens": 1, "output_tokens": 1}}) + "\\n")
else:
    chunk = (line + "\\n") * 64
    while written < total:
        out.write(chunk)
        written += len(chunk)
"""


def main() -> int:
    args = argparse.ArgumentParser()
    args.add_argument("--project", required=True, type=Path)
    args.add_argument("--adapter", choices=["command", "claude"], default="command")
    args.add_argument("--mb", type=int, default=100)
    opts = args.parse_args()
    root: Path = opts.project
    root.mkdir(parents=True)
    for git in (["init", "-q"], ["config", "user.name", "rss"],
                ["config", "user.email", "rss@localhost"]):
        subprocess.run(["git", *git], cwd=root, check=True, timeout=30)
    scaffold(root, "md", False)
    (root / "PRD.md").write_text("# RSS\n\n## Tasks\n\n- [ ] 1. Print a lot\n")
    printer = root.parent / "printer.py"
    printer.write_text(PRINTER)
    mode = "claude" if opts.adapter == "claude" else "text"
    argv = [sys.executable, str(printer), mode, str(opts.mb)]
    (root / "ralph.toml").write_text(
        f'[loop]\ndefault_agent = "loud"\n\n[agents.loud]\nadapter = "{opts.adapter}"\n'
        f"argv = {json.dumps(argv)}\ntimeout_seconds = 600\n")
    subprocess.run(["git", "add", "-A"], cwd=root, check=True, timeout=30)
    subprocess.run(["git", "commit", "-q", "-m", "rss"], cwd=root, check=True, timeout=30)
    service = LoopService(root)
    try:
        # Open the store before the baseline (it is not what is measured): an existing store
        # directory is opened at once, a missing one only by the first event.
        service.paths.store.mkdir(parents=True, exist_ok=True)
        _ = service.store
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        result = asyncio.run(service.step())
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    finally:
        service.close()
    log = root / ".ralph" / "logs" / "000001.log"
    print(json.dumps({"growth_kib": after - before, "peak_kib": after,
                      "log_bytes": log.stat().st_size, "agent_status": result.agent_status}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

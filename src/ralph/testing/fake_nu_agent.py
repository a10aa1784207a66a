"""A scriptable fake agent for named sessions (`ralph nu`):
`python -m ralph.testing.fake_nu_agent --plan PLAN.json`.

It learns the session and its iteration from the environment Ralph gives every agent
(`RALPH_SESSION`, `RALPH_SESSION_ITERATION`, `RALPH_STORE`) and plays the plan's step for that
iteration (`{"steps": [...]}`, the last one repeating). A step may:

    {"notes": [["remaining", "text"], ...],  # add notes
     "take": true,          # add an in_progress note resolving the first open remaining one
     "finish": true,        # add a completed note resolving every open in_progress one
     "finish_all": true,    # add a completed note resolving every open note
     "write": {"path": "content"},   # files in the project
     "done": true,          # claim completion with `ralph nu done` (the real command)
     "forge": true,         # append Ralph's verdict `completion_accepted` itself (a cheat)
     "pkill": true,         # SIGTERM every child of Ralph's process, as the original
                            # ralph.nu prompt told agents to (itself included)
     "sleep": 0.5, "exit_code": 0}

It prints what it did, one line each, and the prompt's first line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ralph.notes import add_note, list_notes, open_notes
from ralph.nu.record import log_verdict
from ralph.store import Store


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fake_nu_agent")
    parser.add_argument("--plan", required=True, type=Path)
    args = parser.parse_args(argv)
    prompt = sys.stdin.read()
    print(prompt.strip().splitlines()[0] if prompt.strip() else "(no prompt)", flush=True)
    name = os.environ["RALPH_SESSION"]
    n = int(os.environ["RALPH_SESSION_ITERATION"])
    steps: list[dict[str, Any]] = json.loads(args.plan.read_text())["steps"]
    step = steps[min(n, len(steps)) - 1]
    store_path = Path(os.environ["RALPH_STORE"])
    with Store(store_path) as store:
        for kind, text in step.get("notes", []):
            add_note(store, kind, text, session=name, iteration=n)
            print(f"noted {kind}: {text}", flush=True)
        still = open_notes(list_notes(store, session=name))
        if step.get("take"):
            first = next((note for note in still if note.type == "remaining"), None)
            if first is not None:
                add_note(store, "in_progress", first.text, session=name, iteration=n,
                         resolves=[first.id])
                print(f"took {first.text}", flush=True)
        still = open_notes(list_notes(store, session=name))
        settle = (still if step.get("finish_all")
                  else [note for note in still if note.type == "in_progress"]
                  if step.get("finish") else [])
        if settle:
            add_note(store, "completed", "; ".join(note.text for note in settle),
                     session=name, iteration=n, resolves=[note.id for note in settle])
            print(f"completed {len(settle)}", flush=True)
        if step.get("forge"):
            log_verdict(store, name, n, True, None)
            print("forged a verdict", flush=True)
    if step.get("done"):
        said = subprocess.run([sys.executable, "-m", "ralph", "nu", "done", "--name", name,
                               "--store", str(store_path)], capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL, check=False)
        print(said.stdout.strip() or said.stderr.strip(), flush=True)
    for path, content in step.get("write", {}).items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(content)
    if step.get("sleep"):
        time.sleep(float(step["sleep"]))
    if step.get("pkill"):
        _kill_siblings()
    return int(step.get("exit_code", 0))


def _kill_siblings() -> None:
    """`pkill -P <Ralph's pid>`: every child of this process's parent, this one last."""
    parent = os.getppid()
    me = os.getpid()
    children: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == parent:
            children.append(int(entry.name))
    print(f"killing {len(children)} children of {parent}", flush=True)
    for pid in sorted(children, key=lambda pid: pid == me):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)


if __name__ == "__main__":
    sys.exit(main())

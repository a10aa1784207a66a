"""Helpers for store tests: child writer processes and reading stream files directly."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any


def run_python(code: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run a Python snippet in a child process (own process group) and wait for it."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args],
                          capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, start_new_session=True, check=False)


def start_python(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, start_new_session=True)


def kill_group(proc: subprocess.Popen[str], sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
    proc.communicate(timeout=30)


def stream_lines(store_dir: Path) -> list[dict[str, Any]]:
    """Every parseable frame line of every stream file, straight from disk."""
    frames = []
    for path in sorted((store_dir / "streams").rglob("*.jsonl")):
        for line in path.read_bytes().split(b"\n"):
            try:
                frames.append(json.loads(line))
            except ValueError:
                continue
    return frames

"""examples/remote_client.py as its docstring runs it, against a real `ralph serve`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.cli.helpers import TIMEOUT
from tests.remote.test_serve import TOKEN, start, wait_served

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "remote_client.py"


def test_the_example_client_runs_an_agent_and_catches_up(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / ".ralph").mkdir(parents=True)
    (root / "ralph.toml").write_text('[loop]\ndefault_agent = "echo"\n\n'
                                     '[agents.echo]\nargv = ["sh", "-c", "cat; echo done"]\n')
    proc = start(root, "--token", TOKEN)
    try:
        wait_served(proc, root)
        first = subprocess.run([sys.executable, str(EXAMPLE), "--prompt", "hello there"],
                               cwd=root, capture_output=True, text=True, timeout=TIMEOUT,
                               stdin=subprocess.DEVNULL, check=False)
        assert first.returncode == 0, first.stderr
        assert "connected to ralph" in first.stdout
        assert "started echo as ses_" in first.stdout
        assert "text: hello there" in first.stdout and "agent_stopped" in first.stdout
        again = subprocess.run([sys.executable, str(EXAMPLE), str(root), "--since-seq", "0"],
                               capture_output=True, text=True, timeout=TIMEOUT, check=False,
                               stdin=subprocess.DEVNULL)
        assert again.returncode == 0, again.stderr
        assert "missed events replayed" in again.stdout and "agent_started" in again.stdout
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    gone = subprocess.run([sys.executable, str(EXAMPLE), str(root)], capture_output=True,
                          text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL, check=False)
    assert gone.returncode == 2 and "is `ralph serve` running there?" in gone.stderr

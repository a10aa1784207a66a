"""`python -m ralph.testing.fakellm`: prints its URL, serves, logs, stops on SIGTERM/SIGINT."""

from __future__ import annotations

import json
import select
import signal
import subprocess
import sys

import pytest

from tests.fakellm.helpers import decode, send


def _start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "ralph.testing.fakellm", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _first_line(proc: subprocess.Popen[str], timeout: float = 15) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "the server printed no URL"
    return proc.stdout.readline().strip()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_prints_url_serves_logs_and_stops_on_signal(tmp_path, sig):
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps({"rules": [
        {"match": {"user": "ping"}, "reply": {"text": "pong"}}]}))
    log = tmp_path / "log.jsonl"
    proc = _start("--scenario", str(scenario), "--port", "0", "--log", str(log))
    try:
        url = _first_line(proc)
        assert url.startswith("http://127.0.0.1:")
        assert decode("chat", send(url, "chat", [("user", "ping")])).text == "pong"
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert out == ""  # nothing after the URL line
    assert "Traceback" not in err
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["rule"] for e in entries] == ["rule0"]


def test_bad_scenario_is_an_error_line(tmp_path):
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps({"rules": [{"reply": {"nonsense": 1}}]}))
    proc = _start("--scenario", str(scenario))
    out, err = proc.communicate(timeout=15)
    assert proc.returncode == 2
    assert out == ""
    assert err.startswith("error: rule 'rule0'.reply: unknown key(s) nonsense")


def test_missing_scenario_file(tmp_path):
    proc = _start("--scenario", str(tmp_path / "missing.json"))
    _, err = proc.communicate(timeout=15)
    assert proc.returncode == 2
    assert "cannot read scenario" in err

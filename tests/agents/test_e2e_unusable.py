"""The real agent CLIs (pinned in tests/agents/package.json), run by `run_agent` against the
fake model server in a loopback-only network namespace, failing in ways no retry can fix: a
key the API refuses or no key at all end as `auth_error`; a model the API does not serve, an
option the CLI does not have and a broken config file as `config_error`. The loop stops a run
on either (docs/agents.md), so each is classified from the CLI's own signals.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.agents.clienv import CLIS
from tests.agents.test_e2e import ROOT, _require_clis

DRIVER = Path(__file__).with_name("unusable_driver.py")

# (cli, case) -> (status, words of the CLI's own message)
EXPECTED: dict[tuple[str, str], tuple[str, str]] = {
    ("codex", "401"): ("auth_error", "401 Unauthorized"),
    ("claude", "401"): ("auth_error", "401"),
    ("gemini", "401"): ("auth_error", "401"),
    ("opencode", "401"): ("auth_error", "Invalid API key"),
    ("codex", "no-key"): ("auth_error", "Missing environment variable: `FAKE_OPENAI_API_KEY`"),
    ("claude", "no-key"): ("auth_error", "Not logged in"),
    ("gemini", "no-key"): ("auth_error", "must specify the GEMINI_API_KEY"),
    ("opencode", "no-key"): ("auth_error", "provider 'anthropic' is not connected"),
    ("codex", "404"): ("config_error", "`no-such-model` does not exist"),
    ("claude", "404"): ("config_error", "issue with the selected model (no-such-model)"),
    ("gemini", "404"): ("config_error", "models/no-such-model is not found"),
    ("opencode", "404"): ("config_error", "`no-such-model` does not exist"),
    ("opencode", "unknown-model"): ("config_error", "Model not found: fake/no-such-model"),
    ("codex", "bad-flag"): ("config_error", "unexpected argument '--no-such-flag'"),
    ("claude", "bad-flag"): ("config_error", "unknown option '--no-such-flag'"),
    ("gemini", "bad-flag"): ("config_error", "Unknown arguments: such-flag"),
    ("opencode", "bad-flag"): ("config_error", "opencode rejected its command line"),
    ("codex", "bad-config"): ("config_error", "Error loading config.toml"),
    ("claude", "bad-config"): ("config_error", "Settings file not found"),
    ("gemini", "bad-config"): ("config_error", "settings.json"),
    ("opencode", "bad-config"): ("config_error", "is not valid JSON"),
}


def run_case(tmp_path: Path, cli: str, case: str) -> dict[str, Any]:
    """The driver for one CLI and case in a fresh loopback-only network namespace."""
    _require_clis()
    out = tmp_path / "out.json"
    command = (f"ip link set lo up && exec {sys.executable} {DRIVER} --cli {cli} --case {case} "
               f"--project {tmp_path / 'proj'} --out {out}")
    proc = subprocess.run(["unshare", "-n", "sh", "-c", command], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, stdin=subprocess.DEVNULL,
                          start_new_session=True, check=False)
    if proc.returncode != 0 or not out.exists():
        pytest.fail(f"the driver failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}",
                    pytrace=False)
    return dict(json.loads(out.read_text()))


@pytest.mark.parametrize(("cli", "case"), sorted(EXPECTED))
def test_a_failure_no_retry_fixes_is_classified(tmp_path: Path, cli: str, case: str) -> None:
    assert cli in CLIS
    result = run_case(tmp_path, cli, case)
    status, words = EXPECTED[cli, case]
    assert (result["status"], result["exit_code"] != 0) == (status, True), result["message"]
    assert words in result["message"]
    [finished] = [e["meta"] for e in result["events"] if e["topic"] == "agent.finished"]
    assert finished["status"] == status
    if case in ("bad-flag", "bad-config", "no-key", "unknown-model"):
        # found out before the model was asked (opencode looks up its plugin on the registry)
        assert all(r["endpoint"] == "not_found" for r in result["requests"])

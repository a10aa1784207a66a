"""Adapter limits and bad input: a CLI that prints 100 MB, one that crashes mid-stream, one
that is not installed; `ralph doctor`; cost from the price table."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ralph.agents import ADAPTERS, adapter_for
from ralph.agents.base import AgentError, Usage
from ralph.agents.runner import priced, resolve_program, run_agent
from ralph.cli.main import run
from ralph.config import parse_config
from tests.agents.clienv import NODE_BIN

RSS_DRIVER = Path(__file__).with_name("rss_driver.py")


@pytest.mark.parametrize("adapter", ["command", "claude"])
def test_100_mb_of_output_goes_to_disk_not_to_memory(tmp_path: Path, adapter: str) -> None:
    proc = subprocess.run([sys.executable, str(RSS_DRIVER), "--project", str(tmp_path / "p"),
                           "--adapter", adapter, "--mb", "100"], capture_output=True, text=True,
                          timeout=600, stdin=subprocess.DEVNULL, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["agent_status"] == "ok"
    assert report["log_bytes"] >= 100 * 1024 * 1024  # streamed to the log, all of it
    assert report["growth_kib"] < 50 * 1024, report  # the orchestrator grew by < 50 MB


_CRASHER = """
import json, os, signal, sys
print(json.dumps({"type": "system", "subtype": "init", "session_id": "crash-1"}), flush=True)
print(json.dumps({"type": "assistant", "message": {"content": [
    {"type": "text", "text": "working on it"}]}}), flush=True)
print('{"type": "assistant", "message": {"content": [{"type": "te', flush=True)
os.kill(os.getpid(), signal.SIGSEGV)
"""


async def test_a_cli_that_crashes_mid_stream(tmp_path: Path) -> None:
    script = tmp_path / "crasher.py"
    script.write_text(_CRASHER)
    config = parse_config(f'[agents.claude]\nargv = {json.dumps([sys.executable, str(script)])}'
                          "\n")
    events: list[tuple[str, dict[str, object]]] = []
    outcome = await run_agent(config.agent("claude"), "prompt", cwd=tmp_path,
                              prompt_file=tmp_path / "p.md", log_path=tmp_path / "log",
                              emit=lambda topic, meta: events.append((topic, meta)))
    assert outcome.status == "error"
    assert outcome.session_id == "crash-1"
    assert "working on it" in outcome.tail
    finished = [meta for topic, meta in events if topic == "agent.finished"]
    assert finished[0]["status"] == "error" and finished[0]["not_json_lines"] == 1
    assert outcome.exit_code == -11


@pytest.mark.parametrize("name", ["codex", "claude", "gemini", "opencode"])
def test_a_cli_that_is_not_installed_names_its_npm_package(name: str,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    adapter = adapter_for(name)
    agent = parse_config("").agent(name)
    command = adapter.build([], None, "p", "f")
    with pytest.raises(AgentError) as info:
        resolve_program(command.argv, agent, adapter.install_hint)
    assert f"{adapter.binary} not found on PATH" in str(info.value)
    assert f"npm install -g {adapter.install_hint.split()[-1]}" in str(info.value)  # type: ignore[union-attr]


def test_default_invocations() -> None:
    assert adapter_for("codex").build([], "gpt-5.5", "p", "f").argv == [
        "codex", "exec", "--json", "--sandbox", "workspace-write", "--skip-git-repo-check",
        "--color", "never", "--model", "gpt-5.5", "-"]
    claude = adapter_for("claude").build([], None, "p", "f")
    assert claude.argv[:5] == ["claude", "-p", "--output-format", "stream-json", "--verbose"]
    assert claude.stdin == b"p"
    gemini = adapter_for("gemini").build([], "gemini-2.5-flash", "the prompt", "f")
    assert gemini.argv[-2:] == ["-p", "the prompt"] and gemini.stdin is None
    assert gemini.shown[-1] == "{prompt}"  # events never carry the prompt itself
    opencode = adapter_for("opencode")
    argv = opencode.build([], None, "p", "f").argv
    assert argv == ["opencode", "run", "--format", "json", "--print-logs", "--log-level",
                    "ERROR"]
    assert opencode.attached_argv(argv, "http://127.0.0.1:5", "proj - Iteration #2") == [  # type: ignore[attr-defined]
        "opencode", "run", "--attach", "http://127.0.0.1:5", "--title", "proj - Iteration #2",
        "--format", "json", "--print-logs", "--log-level", "ERROR"]
    assert set(ADAPTERS) == {"command", "codex", "claude", "gemini", "opencode"}


def test_cost_from_the_price_table_never_a_guess() -> None:
    config = parse_config('[agents.codex]\nmodel = "gpt-5.5"\n\n[prices."gpt-5.5"]\n'
                          "input = 1.25\noutput = 10.0\ncached_input = 0.125\n")
    agent = config.agent("codex")
    usage = Usage(input_tokens=1_000_000, output_tokens=100_000, cached_tokens=400_000)
    assert priced(usage, "gpt-5.5", agent) == Usage(1_000_000, 100_000, 400_000,
                                                    round(0.6 * 1.25 + 0.4 * 0.125 + 1.0, 6))
    assert priced(usage, "unknown-model", agent) == usage  # cost stays None
    own = Usage(10, 10, 0, 0.5)
    assert priced(own, "gpt-5.5", agent) == own  # the CLI's own figure wins


def _doctor(capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
            tmp_path: Path, path: str) -> tuple[int, list[dict[str, object]]]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", path)
    # a scratch HOME, and the default agent logged in (doctor checks it): not the user's
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "fake-key-not-a-secret")
    (tmp_path / "ralph.toml").write_text('[loop]\ndefault_agent = "claude"\n\n[agents.mine]\n'
                                         'argv = ["no-such-program-here"]\n')
    code = run(["doctor", "--json"])
    out = capfd.readouterr().out
    return code, json.loads(out)


def test_doctor_with_every_cli_installed(capfd: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    code, reports = _doctor(capfd, monkeypatch, tmp_path, f"{NODE_BIN}:/usr/bin:/bin")
    by_name = {r["agent"]: r for r in reports}
    assert list(by_name) == ["mine", "codex", "claude", "gemini", "opencode"]
    for name in ("codex", "claude", "gemini", "opencode"):
        assert by_name[name]["ok"] is True, by_name[name]
        assert by_name[name]["version"]
    assert by_name["claude"]["default"] is True and code == 0
    assert by_name["mine"]["ok"] is False
    assert "no-such-program-here not found on PATH" in str(by_name["mine"]["problems"])


def test_doctor_without_the_clis(capfd: pytest.CaptureFixture[str],
                                 monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    code, reports = _doctor(capfd, monkeypatch, tmp_path, "/usr/bin:/bin")
    by_name = {r["agent"]: r for r in reports}
    assert code == 1  # the default agent (claude) cannot run
    assert "npm install -g @anthropic-ai/claude-code" in str(by_name["claude"]["problems"])
    assert "npm install -g opencode-ai" in str(by_name["opencode"]["problems"])
    assert by_name["gemini"]["prompt_via"] == "{prompt}"
    assert by_name["codex"]["prompt_via"] == "stdin"


def test_doctor_runs_without_a_ralph_toml(capfd: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    code = run(["doctor"])
    out = capfd.readouterr().out
    assert "codex (default) (codex adapter)" in out and "npm install -g @openai/codex" in out
    assert "command adapter: any program, not used here" in out  # every adapter is listed
    assert code == 1

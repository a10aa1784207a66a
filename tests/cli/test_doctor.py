"""`ralph doctor`: a program that cannot start is a problem (not "ok"), and each CLI's login is
shown, from a scratch HOME and the environment the agent gets (names only, never values). Not
logged in fails the exit code only for the default agent."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cli.helpers import Cli

SECRET = "sk-ant-secret-value-never-shown"
# What the CLIs read credentials from: none of the real user's may leak into these tests.
_CREDENTIAL_ENV = re.compile(r"API_KEY|TOKEN|^(CODEX|CLAUDE|GEMINI|GOOGLE|OPENCODE|XDG)_")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch HOME, a PATH with fake `claude` and `gemini` that print a version, and no
    credential variables from the environment the tests run in."""
    for name in list(os.environ):
        if _CREDENTIAL_ENV.search(name):
            monkeypatch.delenv(name)
    scratch = tmp_path / "home"
    scratch.mkdir()
    monkeypatch.setenv("HOME", str(scratch))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, version in (("claude", "2.1.328 (Claude Code)"), ("gemini", "0.61.0")):
        program(bin_dir / name, f"#!/bin/sh\necho '{version}'\n")
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return scratch


def program(path: Path, text: str, mode: int = 0o755) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def doctor(cli: Cli, toml: str) -> tuple[int, dict[str, dict[str, Any]], str]:
    """`ralph doctor --json` and `ralph doctor`: exit code, reports by agent, the text."""
    Path("ralph.toml").write_text(toml)
    result = cli("doctor", "--json")
    text = cli("doctor")
    assert text.code == result.code
    assert SECRET not in result.out + text.out
    return result.code, {r["agent"]: r for r in result.json()}, text.out


def test_a_program_that_cannot_start_is_a_problem(cli: Cli, home: Path, tmp_path: Path) -> None:
    plain = program(tmp_path / "plain.sh", "#!/bin/sh\necho hi\n", 0o644)
    no_format = program(tmp_path / "agent", "echo hi\n")
    code, reports, text = doctor(cli, (
        '[loop]\ndefault_agent = "mine"\n\n'
        f'[agents.mine]\nargv = ["{plain}"]\n\n'
        f'[agents.other]\nadapter = "claude"\nargv = ["{no_format}"]\n'))
    assert code == 1  # the default agent cannot start
    assert reports["mine"]["problems"] == [f"{plain} is not executable: run `chmod +x {plain}`"]
    assert reports["mine"]["ok"] is False and reports["mine"]["path"] == str(plain)
    [problem] = reports["other"]["problems"]
    if sys.platform.startswith("linux"):
        assert f"{no_format} cannot be executed (exec format error)" in problem
    assert reports["other"]["version"] is None  # never run
    assert f"mine (default) (command adapter): {plain} is not executable" in text


def test_the_default_agent_not_logged_in_fails(cli: Cli, home: Path) -> None:
    code, reports, text = doctor(cli, '[loop]\ndefault_agent = "claude"\n')
    claude = reports["claude"]
    assert (code, claude["logged_in"], claude["ok"]) == (1, False, False)
    assert claude["problems"] == [f"not logged in: {claude['login']}"]
    assert "claude auth login" in claude["login"] and "ANTHROPIC_API_KEY" in claude["login"]
    assert "  login:   no: run `claude auth login`" in text
    gemini = reports["gemini"]  # not the default: shown, not a problem
    assert (gemini["logged_in"], gemini["ok"], gemini["problems"]) == (False, True, [])


def test_logged_in_through_the_agents_env_or_its_files(cli: Cli, home: Path) -> None:
    code, reports, text = doctor(cli, (
        '[loop]\ndefault_agent = "claude"\n\n'
        f'[agents.claude]\nenv = {{ ANTHROPIC_API_KEY = "{SECRET}" }}\n'))
    assert code == 0
    assert (reports["claude"]["logged_in"], reports["claude"]["login"]) == (
        True, "ANTHROPIC_API_KEY (environment)")
    assert "  login:   yes: ANTHROPIC_API_KEY (environment)" in text
    (home / ".gemini").mkdir()
    (home / ".gemini" / "settings.json").write_text(json.dumps(
        {"security": {"auth": {"selectedType": "oauth-personal"}}}))
    (home / ".gemini" / "oauth_creds.json").write_text(json.dumps({"token": SECRET}))
    _, reports, _ = doctor(cli, '[loop]\ndefault_agent = "gemini"\n')
    assert (reports["gemini"]["logged_in"], reports["gemini"]["login"]) == (
        True, "~/.gemini/oauth_creds.json")


def test_cannot_tell_is_shown_and_is_no_problem(cli: Cli, home: Path) -> None:
    (home / ".gemini").mkdir()
    (home / ".gemini" / "settings.json").write_text(json.dumps(
        {"security": {"auth": {"selectedType": "gemini-api-key"}}}))
    code, reports, text = doctor(cli, '[loop]\ndefault_agent = "gemini"\n')
    assert (code, reports["gemini"]["logged_in"], reports["gemini"]["ok"]) == (0, None, True)
    assert "  login:   cannot tell: GEMINI_API_KEY is not set" in text

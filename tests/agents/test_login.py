"""Whether each CLI has credentials, from the places the pinned CLIs read them: variables in
the agent's environment and the CLIs' credential files under a scratch HOME (never the real
user's). Names and paths only: a secret's value never appears in what is reported."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ralph.agents import adapter_for
from ralph.agents.base import Login

SECRET = "sk-secret-value-never-shown"


def login(cli: str, home: Path, model: str | None = None, cwd: Path | None = None,
          **env: str) -> Login:
    result = adapter_for(cli).login({"HOME": str(home), **env}, cwd or home / "project", model)
    assert SECRET not in result.found
    return result


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# -- codex ----------------------------------------------------------------------------------

def test_codex(tmp_path: Path) -> None:
    assert login("codex", tmp_path) == Login(False, adapter_for("codex").login_hint)
    # codex exec does not send OPENAI_API_KEY (it must be saved with `codex login`)
    assert login("codex", tmp_path, OPENAI_API_KEY=SECRET).logged_in is False
    assert login("codex", tmp_path, CODEX_API_KEY=SECRET) == Login(
        True, "CODEX_API_KEY (environment)")
    write(tmp_path / ".codex" / "auth.json", json.dumps({"OPENAI_API_KEY": SECRET}))
    assert login("codex", tmp_path) == Login(True, "~/.codex/auth.json")


def test_codex_home_and_its_keyring(tmp_path: Path) -> None:
    codex_home = tmp_path / "elsewhere"
    write(codex_home / "config.toml", 'cli_auth_credentials_store = "keyring"\n')
    result = login("codex", tmp_path, CODEX_HOME=str(codex_home))
    assert result.logged_in is None and "keyring" in result.found
    write(codex_home / "config.toml", "model = [\n")
    assert login("codex", tmp_path, CODEX_HOME=str(codex_home)).logged_in is None


def test_codex_custom_provider_takes_its_env_key(tmp_path: Path) -> None:
    write(tmp_path / ".codex" / "config.toml",
          'model_provider = "mine"\n[model_providers.mine]\nbase_url = "http://h/v1"\n'
          'env_key = "MY_KEY"\n')
    missing = login("codex", tmp_path, CODEX_API_KEY=SECRET)
    assert missing.logged_in is False and "set MY_KEY" in missing.found
    assert login("codex", tmp_path, MY_KEY=SECRET) == Login(True, "MY_KEY (environment)")
    write(tmp_path / ".codex" / "config.toml", 'model_provider = "ollama"\n')
    assert login("codex", tmp_path).logged_in is None  # a built-in provider without a key


# -- claude ---------------------------------------------------------------------------------

@pytest.mark.skipif(sys.platform == "darwin", reason="a Mac keeps the login in its keychain")
def test_claude(tmp_path: Path) -> None:
    assert login("claude", tmp_path) == Login(False, adapter_for("claude").login_hint)
    assert login("claude", tmp_path, ANTHROPIC_API_KEY=SECRET, CLAUDE_CODE_OAUTH_TOKEN=SECRET) \
        == Login(True, "ANTHROPIC_API_KEY, CLAUDE_CODE_OAUTH_TOKEN (environment)")
    write(tmp_path / ".claude.json", json.dumps({"primaryApiKey": SECRET}))
    assert login("claude", tmp_path).found == "an API key saved by /login (~/.claude.json)"
    write(tmp_path / ".claude" / ".credentials.json", json.dumps({"claudeAiOauth": SECRET}))
    assert login("claude", tmp_path) == Login(True, "~/.claude/.credentials.json")


@pytest.mark.skipif(sys.platform == "darwin", reason="a Mac keeps the login in its keychain")
def test_claude_config_dir_and_cloud_logins(tmp_path: Path) -> None:
    config_dir = tmp_path / "claude-config"
    write(tmp_path / ".claude" / ".credentials.json", "{}")  # not the one claude reads now
    assert login("claude", tmp_path, CLAUDE_CONFIG_DIR=str(config_dir)).logged_in is False
    write(config_dir / "settings.json", json.dumps({"apiKeyHelper": "~/bin/key.sh"}))
    assert login("claude", tmp_path, CLAUDE_CONFIG_DIR=str(config_dir)).logged_in is True
    bedrock = login("claude", tmp_path / "empty", CLAUDE_CODE_USE_BEDROCK="1")
    assert bedrock.logged_in is None and "CLAUDE_CODE_USE_BEDROCK" in bedrock.found


# -- gemini ---------------------------------------------------------------------------------

def test_gemini(tmp_path: Path) -> None:
    nothing = login("gemini", tmp_path)
    assert nothing.logged_in is False and "no auth method" in nothing.found
    assert login("gemini", tmp_path, GEMINI_API_KEY=SECRET).logged_in is True
    settings = tmp_path / ".gemini" / "settings.json"
    write(settings, json.dumps({"security": {"auth": {"selectedType": "oauth-personal"}}}))
    assert login("gemini", tmp_path) == Login(False, adapter_for("gemini").login_hint)
    write(tmp_path / ".gemini" / "oauth_creds.json", json.dumps({"refresh_token": SECRET}))
    assert login("gemini", tmp_path) == Login(True, "~/.gemini/oauth_creds.json")


def test_gemini_api_key_from_its_env_file_or_its_keychain(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    write(home / ".gemini" / "settings.json",
          json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}}))
    assert login("gemini", home, cwd=project).logged_in is None  # maybe in the OS keychain
    write(project / ".env", f"OTHER=1\nGEMINI_API_KEY={SECRET}\n")
    assert login("gemini", home, cwd=project / "sub") == Login(
        True, "GEMINI_API_KEY (environment or .env)")


def test_gemini_cli_home_and_vertex(tmp_path: Path) -> None:
    gemini_home = tmp_path / "gh"
    write(gemini_home / ".gemini" / "settings.json",
          json.dumps({"security": {"auth": {"selectedType": "vertex-ai"}}}))
    where = str(gemini_home)
    assert login("gemini", tmp_path, GEMINI_CLI_HOME=where).logged_in is False
    assert login("gemini", tmp_path, GEMINI_CLI_HOME=where,
                 GOOGLE_CLOUD_PROJECT="p").logged_in is False
    assert login("gemini", tmp_path, GEMINI_CLI_HOME=where, GOOGLE_CLOUD_PROJECT="p",
                 GOOGLE_CLOUD_LOCATION="l").logged_in is True


# -- opencode -------------------------------------------------------------------------------

def test_opencode(tmp_path: Path) -> None:
    model = "anthropic/claude-sonnet-4-5"
    none = login("opencode", tmp_path, model)
    assert none.logged_in is False and "provider 'anthropic'" in none.found
    assert login("opencode", tmp_path, model, ANTHROPIC_API_KEY=SECRET) == Login(
        True, "ANTHROPIC_API_KEY (environment)")
    write(tmp_path / ".local" / "share" / "opencode" / "auth.json",
          json.dumps({"anthropic": {"type": "api", "key": SECRET}}))
    assert login("opencode", tmp_path, model) == Login(
        True, "anthropic in ~/.local/share/opencode/auth.json")
    assert login("opencode", tmp_path, "openai/gpt-5").logged_in is False
    assert login("opencode", tmp_path).logged_in is True  # no model: any saved provider


def test_opencode_provider_of_its_own_config(tmp_path: Path) -> None:
    config = {"model": "fake/fake-model", "provider": {"fake": {"options": {
        "baseURL": "http://127.0.0.1:1/v1", "apiKey": SECRET}}}}
    found = login("opencode", tmp_path, OPENCODE_CONFIG_CONTENT=json.dumps(config))
    assert found == Login(True, "apiKey of provider 'fake' in opencode's config")
    config["provider"]["fake"]["options"]["apiKey"] = "{env:FAKE_KEY}"  # type: ignore[index]
    write(tmp_path / "project" / "opencode.json", json.dumps(config))
    assert login("opencode", tmp_path, FAKE_KEY=SECRET).found == "FAKE_KEY (environment)"
    assert login("opencode", tmp_path).logged_in is None  # a provider of its own: maybe keyless
    assert login("opencode", tmp_path / "empty").logged_in is None  # no model at all


def test_the_command_adapter_cannot_tell(tmp_path: Path) -> None:
    assert login("command", tmp_path) == Login(None, "")

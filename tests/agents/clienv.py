"""How each real agent CLI runs isolated against the fake model server: its argv, its
environment, and the config files it reads (from tests/agents/recorded/README.md)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

NODE_BIN = Path(__file__).parent / "node_modules" / ".bin"
CLIS = ("codex", "claude", "gemini", "opencode")
MODELS = {"codex": "gpt-5.5", "claude": "claude-opus-5-5", "gemini": "gemini-2.5-flash",
          "opencode": "fake/fake-model"}
# Requests one run of each CLI makes when every answer is a 429 (its own retries included),
# as recorded: a rule that fails this many times makes exactly the first attempt fail.
REQUESTS_PER_429_RUN = {"codex": 1, "claude": 2, "gemini": 2, "opencode": 10}


@dataclass
class CliSetup:
    argv: list[str]
    env: dict[str, str]
    files: dict[Path, str] = field(default_factory=dict)

    def write_files(self) -> None:
        for path, text in self.files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)


def base_env(home: Path) -> dict[str, str]:
    """The environment every CLI process starts from (nothing else inherited but PATH)."""
    return {
        "PATH": f"{NODE_BIN}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home), "TMPDIR": str(home / "tmp"),
        "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_CACHE_HOME": str(home / ".cache"), "XDG_STATE_HOME": str(home / ".local/state"),
        "LANG": "C.UTF-8", "TERM": "dumb", "NO_COLOR": "1", "CI": "1",
    }


def setup(cli: str, url: str, home: Path) -> CliSetup:
    """argv (prompt on stdin unless it says {prompt}), env and config files for `cli`."""
    key = "fake-key-not-a-secret"
    if cli == "codex":
        codex_home = home / ".codex"
        config = f"""model = "{MODELS['codex']}"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "workspace-write"

[model_providers.fake]
name = "fake"
base_url = "{url}/v1"
env_key = "FAKE_OPENAI_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 30000

[features]
plugins = false
remote_plugin = false
apps = false

[analytics]
enabled = false
"""
        return CliSetup(["codex", "exec", "--json", "--skip-git-repo-check", "-s",
                         "workspace-write", "-"],
                        {"CODEX_HOME": str(codex_home), "FAKE_OPENAI_API_KEY": key},
                        {codex_home / "config.toml": config})
    if cli == "claude":
        return CliSetup(["claude", "-p", "--output-format", "stream-json", "--verbose",
                         "--permission-mode", "bypassPermissions", "--model", MODELS["claude"]],
                        {"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": key, "IS_SANDBOX": "1",
                         "CLAUDE_CONFIG_DIR": str(home / ".claude"),
                         "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                         "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1",
                         "DISABLE_ERROR_REPORTING": "1", "CLAUDE_CODE_MAX_RETRIES": "1"})
    if cli == "gemini":
        settings = {"security": {"auth": {"selectedType": "gemini-api-key"},
                                 "folderTrust": {"enabled": False}},
                    "general": {"enableAutoUpdate": False,
                                "enableAutoUpdateNotification": False, "maxAttempts": 2},
                    "privacy": {"usageStatisticsEnabled": False},
                    "telemetry": {"enabled": False}}
        return CliSetup(["gemini", "-o", "stream-json", "--approval-mode", "yolo", "-m",
                         MODELS["gemini"], "-p", "{prompt}"],
                        {"GEMINI_CLI_HOME": str(home), "GOOGLE_GEMINI_BASE_URL": url,
                         "GEMINI_API_KEY": key},
                        {home / ".gemini" / "settings.json": json.dumps(settings)})
    if cli == "opencode":
        oc_config: dict[str, Any] = {"$schema": "https://opencode.ai/config.json",
                  "provider": {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "Fake",
                                        "options": {"baseURL": f"{url}/v1", "apiKey": key},
                                        "models": {"fake-model": {"name": "Fake model"}}}},
                  "model": MODELS["opencode"], "permission": {"*": "allow"}, "lsp": False,
                  "formatter": False, "autoupdate": False, "share": "disabled"}
        env = dict.fromkeys((
            "OPENCODE_DISABLE_AUTOUPDATE",
            "OPENCODE_DISABLE_LSP_DOWNLOAD",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS",
            "OPENCODE_DISABLE_MODELS_FETCH",
            "OPENCODE_DISABLE_SHARE",
            "OPENCODE_DISABLE_CLAUDE_CODE",
            "OPENCODE_DISABLE_EXTERNAL_SKILLS",
            "OPENCODE_DISABLE_TERMINAL_TITLE",
        ), "1")
        env.update(OPENCODE_CONFIG_CONTENT=json.dumps(oc_config), npm_config_registry=f"{url}/")
        return CliSetup(["opencode", "run", "--format", "json", "-m", MODELS["opencode"]], env)
    raise ValueError(f"unknown CLI {cli}")


def run_driver(driver: Path, args: str, out: Path, *, cli: str, what: str) -> dict[str, Any]:
    """Run the e2e `driver` (with `args`, and `--out OUT`) in a fresh network namespace that
    has only loopback; the findings it wrote to `out`. `cli`: the agent CLI it needs."""
    if not (NODE_BIN / cli).exists():
        pytest.fail(f"the {cli} CLI is not installed: run `make test` (it runs `npm install` "
                    "in tests/agents) or `cd tests/agents && npm install`", pytrace=False)
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.fail("`unshare` and `ip` (util-linux, iproute2) are needed to run the agent CLIs "
                    "in a loopback-only network namespace", pytrace=False)
    command = f"ip link set lo up && exec {sys.executable} {driver} {args} --out {out}"
    proc = subprocess.run(["unshare", "-n", "sh", "-c", command], cwd=Path(__file__).parents[2],
                          capture_output=True, text=True, timeout=600,
                          stdin=subprocess.DEVNULL, start_new_session=True, check=False)
    if proc.returncode != 0 or not out.exists():
        pytest.fail(f"the {what} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}",
                    pytrace=False)
    return dict(json.loads(out.read_text()))

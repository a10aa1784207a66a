"""Record the real agent CLIs' output streams against the fake model server.

Run it only inside a private network namespace that has nothing but loopback:

    unshare -n -m sh -c 'mount --make-rprivate / && mount -t tmpfs tmpfs /tmp &&
        ip link set lo up && exec .venv/bin/python tests/agents/recorded/record.py
        [--cli codex] [--case success] [--keep]'

(`-m` and the tmpfs only keep /tmp clean: codex creates /tmp/codex-daemon-<uid> whatever
TMPDIR says; `unshare -n sh -c 'ip link set lo up && exec ...'` works too.)
It refuses to run when any other network interface is visible. For each CLI and case it
starts the fake model server (`ralph.testing.fakellm`) in this process, runs the CLI with its
own HOME, config directories and TMPDIR under a scratch directory, and writes
`<cli>-<case>.stdout`, `.stderr` and `.json` (argv, env keys, config files, exit code, the
requests the server saw) next to this file. The full request log (JSON lines, with bodies)
stays in the scratch directory (`--keep` keeps it; its path is printed).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ralph.testing.fakellm import FakeLLM

HERE = Path(__file__).resolve().parent
BIN = HERE.parent / "node_modules" / ".bin"
PROMPT = (
    "Create a file named hello.txt in the current directory containing exactly the word "
    "hello. When you are done, reply with: Done. EXIT_SIGNAL: true"
)
API_KEY = "fake-key-not-a-secret"
TIMEOUT = 90.0

SCENARIOS: dict[str, dict[str, Any]] = {
    "success": {
        "rules": [
            {
                "name": "create",
                "match": {"user": "hello.txt"},
                "reply": {"write_file": {"path": "hello.txt", "content": "hello"}},
                "then": [{"text": "Done. EXIT_SIGNAL: true"}],
            }
        ],
        "default": {"text": "OK"},
    },
    "shell": {
        "rules": [
            {
                "name": "create",
                "match": {"user": "hello.txt"},
                "reply": {"shell": "printf hello > hello.txt && ls"},
                "then": [{"text": "Done. EXIT_SIGNAL: true"}],
            }
        ],
        "default": {"text": "OK"},
    },
    "429": {
        "rules": [
            {
                "name": "rate_limited",
                "reply": {"error": {"status": 429, "retry_after": 1,
                                    "message": "Rate limit reached. Please try again in 1s."}},
            }
        ],
    },
    "429-stream": {
        "rules": [
            {
                "name": "rate_limited",
                "reply": {"error": {"status": 429, "retry_after": 1, "in_stream": True,
                                    "message": "Rate limit reached. Please try again in 1s."}},
            }
        ],
    },
    # claude only: the subscription rate-limit headers on the 429 (they do not make claude -p
    # with an API key emit `rate_limit_event`; recorded to show that)
    "429-unified": {
        "rules": [
            {
                "name": "rate_limited",
                "reply": {"error": {
                    "status": 429, "retry_after": 1,
                    "message": "Rate limit reached. Please try again in 1s.",
                    "headers": {
                        "anthropic-ratelimit-unified-status": "rejected",
                        "anthropic-ratelimit-unified-reset": str(int(time.time()) + 3600),
                        "anthropic-ratelimit-unified-representative-claim": "five_hour",
                        "anthropic-ratelimit-unified-5h-status": "rejected",
                        "anthropic-ratelimit-unified-5h-reset": str(int(time.time()) + 3600),
                        "anthropic-ratelimit-unified-5h-utilization": "1.0",
                    },
                }},
            }
        ],
    },
    "401": {
        "rules": [
            {"name": "unauthorized",
             "reply": {"error": {"status": 401, "message": "Invalid API key (fake)."}}}
        ],
    },
    # every request: the API's answer for a model it does not serve (a 404 naming the model)
    "404": {"rules": [{"name": "no_such_model", "reply": {"error": {"status": 404}}}]},
    # the CLI is given an option it does not have (see `vary`)
    "bad-flag": {"default": {"text": "OK"}},
    # the CLI is given no key (see `vary`)
    "no-key": {"default": {"text": "OK"}},
    # opencode only: a model its config does not have (see `vary`)
    "unknown-model": {"default": {"text": "OK"}},
}
# The key each CLI is given in the environment (left out in the no-key case).
KEY_ENV = {"codex": "FAKE_OPENAI_API_KEY", "claude": "ANTHROPIC_API_KEY",
           "gemini": "GEMINI_API_KEY"}


@dataclass
class Run:
    """One CLI invocation: argv, environment additions, files to write, stdin."""

    argv: list[str]
    env: dict[str, str]
    files: dict[str, str] = field(default_factory=dict)  # path relative to the scratch dir
    stdin: str | None = None


def _base_env(scratch: Path) -> dict[str, str]:
    home = scratch / "home"
    return {
        "PATH": f"{BIN}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "TMPDIR": str(scratch / "tmp"),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "CI": "1",
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
    }


def codex(url: str, scratch: Path, case: str) -> Run:
    config = f"""\
model = "gpt-5.5"
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
    return Run(
        argv=["codex", "exec", "--json", "--skip-git-repo-check", "-s", "workspace-write",
              "-"],
        env={"CODEX_HOME": str(scratch / "home" / ".codex"), "FAKE_OPENAI_API_KEY": API_KEY},
        files={"home/.codex/config.toml": config},
        stdin=PROMPT,
    )


def claude(url: str, scratch: Path, case: str) -> Run:
    return Run(
        argv=["claude", "-p", "--output-format", "stream-json", "--verbose",
              "--permission-mode", "bypassPermissions"],
        env={
            "ANTHROPIC_BASE_URL": url,
            "ANTHROPIC_API_KEY": API_KEY,
            "IS_SANDBOX": "1",
            "CLAUDE_CONFIG_DIR": str(scratch / "home" / ".claude"),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "CLAUDE_CODE_MAX_RETRIES": "1",
        },
        stdin=PROMPT,
    )


def gemini(url: str, scratch: Path, case: str) -> Run:
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"},
                     "folderTrust": {"enabled": False}},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False,
                    "maxAttempts": 2},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
    }
    return Run(
        argv=["gemini", "-o", "stream-json", "--approval-mode", "yolo", "-m", "gemini-2.5-flash",
              "-p", PROMPT],
        env={
            "GEMINI_CLI_HOME": str(scratch / "home"),
            "GOOGLE_GEMINI_BASE_URL": url,
            "GEMINI_API_KEY": API_KEY,
        },
        files={"home/.gemini/settings.json": json.dumps(settings, indent=2) + "\n"},
    )


def opencode(url: str, scratch: Path, case: str) -> Run:
    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "fake": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Fake",
                "options": {"baseURL": f"{url}/v1", "apiKey": API_KEY},
                "models": {"fake-model": {"name": "Fake model"}},
            }
        },
        "model": "fake/fake-model",
        "permission": {"*": "allow"},
        "lsp": False,
        "formatter": False,
        "autoupdate": False,
        "share": "disabled",
    }
    return Run(
        argv=["opencode", "run", "--format", "json", "-m", "fake/fake-model", PROMPT],
        env={
            "OPENCODE_CONFIG_CONTENT": json.dumps(config),
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_SHARE": "1",
            "OPENCODE_DISABLE_CLAUDE_CODE": "1",
            "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
            "OPENCODE_DISABLE_TERMINAL_TITLE": "1",
            "npm_config_registry": f"{url}/",
        },
    )


ONLY = {"429-unified": "claude", "unknown-model": "opencode"}  # cases for one CLI
# The cases recorded after opencode's default argv gained `--print-logs --log-level ERROR`
# (what went wrong before the model was asked is only in its log).
OPENCODE_LOGS = {"404", "bad-flag", "no-key", "unknown-model"}


def vary(run: Run, cli: str, case: str) -> Run:
    """The run of a case that changes the invocation rather than the model's answers."""
    if cli == "opencode" and case in OPENCODE_LOGS:
        run.argv[-1:-1] = ["--print-logs", "--log-level", "ERROR"]
    if case == "bad-flag":  # not between an option and its value (gemini's -p PROMPT)
        at = {"claude": len(run.argv), "gemini": run.argv.index("-p")}.get(cli, len(run.argv) - 1)
        run.argv[at:at] = ["--no-such-flag"]
    if case == "no-key" and cli in KEY_ENV:
        del run.env[KEY_ENV[cli]]
    if case == "no-key" and cli == "opencode":
        # a model of a provider opencode knows but has no key for
        run.argv[run.argv.index("fake/fake-model")] = "anthropic/claude-sonnet-4-5"
    if case == "unknown-model":
        run.argv[run.argv.index("fake/fake-model")] = "fake/no-such-model"
    return run

CLIS: dict[str, Callable[[str, Path, str], Run]] = {
    "codex": codex, "claude": claude, "gemini": gemini, "opencode": opencode,
}


def _only_loopback() -> bool:
    return [name for _, name in socket.if_nameindex()] == ["lo"]


def _kill_group(pgid: int) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        time.sleep(0.5)


def record(cli: str, case: str, keep: bool) -> dict[str, Any]:
    scratch = Path(tempfile.mkdtemp(prefix=f"ralph-rec-{cli}-{case}-"))
    for sub in ("home", "tmp", "work"):
        (scratch / sub).mkdir()
    log_path = scratch / "requests.jsonl"
    server = FakeLLM(SCENARIOS[case], log_path=log_path)
    server.start()
    try:
        run = vary(CLIS[cli](server.url, scratch, case), cli, case)
        for rel, text in run.files.items():
            target = scratch / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        env = {**_base_env(scratch), **run.env}
        out_path = HERE / f"{cli}-{case}.stdout"
        err_path = HERE / f"{cli}-{case}.stderr"
        started = time.monotonic()
        with out_path.open("wb") as out, err_path.open("wb") as err:
            proc = subprocess.Popen(
                [str(BIN / run.argv[0]), *run.argv[1:]], cwd=scratch / "work", env=env,
                stdin=subprocess.PIPE if run.stdin is not None else subprocess.DEVNULL,
                stdout=out, stderr=err, start_new_session=True,
            )
            timed_out = False
            try:
                proc.communicate(run.stdin.encode() if run.stdin is not None else None,
                                 timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(proc.pid)
                proc.wait()
            _kill_group(proc.pid)
        elapsed = round(time.monotonic() - started, 2)
        hello = scratch / "work" / "hello.txt"
        env_shown: dict[str, Any] = {
            k: v.replace(str(scratch), "<scratch>").replace(server.url, "<url>")
            .replace(API_KEY, "<any key>")
            for k, v in run.env.items()
        }
        if "OPENCODE_CONFIG_CONTENT" in run.env:  # shown as the JSON it is
            env_shown["OPENCODE_CONFIG_CONTENT"] = json.loads(env_shown["OPENCODE_CONFIG_CONTENT"])
        summary: dict[str, Any] = {
            "cli": cli,
            "case": case,
            "argv": run.argv,  # the key is passed in the environment only
            "stdin": run.stdin,
            "cwd": "<scratch>/work",
            "env_keys": sorted(env),
            "env": env_shown,
            "config_files": {rel: text.replace(server.url, "<url>").replace(API_KEY, "<any key>")
                             for rel, text in run.files.items()},
            "exit_code": proc.returncode,
            "timed_out": timed_out,
            "seconds": elapsed,
            "hello_txt": hello.read_text() if hello.exists() else None,
            "requests": [
                {"method": r.method, "path": r.path, "endpoint": r.endpoint, "model": r.model,
                 "stream": r.stream, "rule": r.rule, "reply": r.reply, "status": r.status,
                 "tools": list(r.tools), "tool_calls": list(r.tool_calls),
                 "last_is_tool_result": r.last_is_tool_result}
                for r in server.requests
            ],
        }
        (HERE / f"{cli}-{case}.json").write_text(json.dumps(summary, indent=2) + "\n")
        return summary
    finally:
        server.stop()
        if keep:
            print(f"scratch kept: {scratch}", file=sys.stderr)
        else:
            shutil.rmtree(scratch, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cli", choices=sorted(CLIS), action="append")
    parser.add_argument("--case", choices=sorted(SCENARIOS), action="append")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directories")
    args = parser.parse_args()
    if not _only_loopback():
        print("refusing to run: not in a loopback-only network namespace (use unshare -n)",
              file=sys.stderr)
        return 2
    for cli in args.cli or sorted(CLIS):
        for case in args.case or list(SCENARIOS):
            if ONLY.get(case, cli) != cli:
                continue
            summary = record(cli, case, args.keep)
            print(f"{cli}-{case}: exit {summary['exit_code']} in {summary['seconds']}s, "
                  f"{len(summary['requests'])} requests, hello.txt={summary['hello_txt']!r}",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

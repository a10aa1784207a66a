"""Runs one real agent CLI through `run_agent` against the fake model server, in a way no retry
can fix (a key the API refuses, no key, a model the API or the CLI does not know, an option
the CLI does not have, a broken config file), inside a network namespace that has only
loopback (the test starts it under `unshare -n`), and writes the outcome to a JSON file.

    python tests/agents/unusable_driver.py --cli codex --case 401 --project DIR --out FILE
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ralph.agents.runner import run_agent
from ralph.config import parse_config
from ralph.testing.fakellm import FakeLLM
from tests.agents.clienv import CliSetup, base_env, setup

CASES = ("401", "404", "bad-flag", "no-key", "bad-config", "unknown-model")
KEY_ENV = {"codex": "FAKE_OPENAI_API_KEY", "claude": "ANTHROPIC_API_KEY",
           "gemini": "GEMINI_API_KEY"}
UNKNOWN = "no-such-model"
TIMEOUT_S = 120


def scenario(case: str) -> dict[str, Any]:
    """401: every request refused as an invalid key; 404: the model is one the API does not
    serve (answered as each real API answers it); otherwise the model would answer OK."""
    if case == "401":
        return {"rules": [{"name": "unauthorized",
                           "reply": {"error": {"status": 401,
                                               "message": "Invalid API key (fake)."}}}]}
    if case == "404":
        return {"default": {"text": "OK"},
                "rules": [{"name": "no_such_model", "match": {"model": UNKNOWN},
                           "reply": {"error": {"status": 404}}}]}
    return {"default": {"text": "OK"}}


def vary(cli: str, case: str, run: CliSetup, home: Path) -> CliSetup:
    """The invocation for the case (the opencode argv as Ralph's default: errors on stderr)."""
    argv, env = list(run.argv), dict(run.env)
    if cli == "opencode":
        argv += ["--print-logs", "--log-level", "ERROR"]
    if case == "bad-flag":  # not between an option and its value, nor after codex's `-`
        at = argv.index("-p") if cli == "gemini" else len(argv) - 1 if cli == "codex" else (
            len(argv))
        argv[at:at] = ["--no-such-flag"]
    if case == "no-key" and cli in KEY_ENV:
        del env[KEY_ENV[cli]]
    if case == "no-key" and cli == "opencode":
        _set_model(argv, "anthropic/claude-sonnet-4-5")  # a provider it has no key for
    if case == "404":
        _model_404(cli, argv, env)
    if case == "unknown-model":  # opencode only: a model its config does not have
        _set_model(argv, f"fake/{UNKNOWN}")
    if case == "bad-config":
        return _bad_config(cli, CliSetup(argv, env, dict(run.files)), home)
    return CliSetup(argv, env, dict(run.files))


def _set_model(argv: list[str], model: str) -> None:
    flag = next(f for f in ("-m", "--model") if f in argv)
    argv[argv.index(flag) + 1] = model


def _model_404(cli: str, argv: list[str], env: dict[str, str]) -> None:
    """Ask for the model the fake API does not serve."""
    if cli == "codex":
        argv[argv.index("exec") + 1:argv.index("exec") + 1] = ["-m", UNKNOWN]
    elif cli == "opencode":  # in opencode's config, so that it asks the API
        config = json.loads(env["OPENCODE_CONFIG_CONTENT"])
        config["provider"]["fake"]["models"][UNKNOWN] = {"name": "unknown"}
        env["OPENCODE_CONFIG_CONTENT"] = json.dumps(config)
        _set_model(argv, f"fake/{UNKNOWN}")
    else:
        _set_model(argv, UNKNOWN)


def _bad_config(cli: str, run: CliSetup, home: Path) -> CliSetup:
    """Each CLI's config file broken (claude: a --settings file that is not there)."""
    if cli == "codex":
        run.files[home / ".codex" / "config.toml"] = "model = \n[[[\n"
    elif cli == "gemini":
        run.files[home / ".gemini" / "settings.json"] = "{not json"
    elif cli == "opencode":
        run.env["OPENCODE_CONFIG_CONTENT"] = "{not json"
    else:
        run.argv += ["--settings", str(home / "no-such-settings.json")]
    return run


def loopback_only() -> bool:
    return sorted(name for _, name in socket.if_nameindex()) == ["lo"]


def main() -> int:
    args = argparse.ArgumentParser()
    args.add_argument("--cli", required=True)
    args.add_argument("--case", required=True, choices=CASES)
    args.add_argument("--project", required=True, type=Path)
    args.add_argument("--out", required=True, type=Path)
    opts = args.parse_args()
    if not loopback_only():
        print("refusing to run: a network interface other than lo is visible", file=sys.stderr)
        return 3
    root: Path = opts.project
    home = root.parent / "home"
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    root.mkdir(parents=True, exist_ok=True)
    with FakeLLM(scenario(opts.case)) as fake:
        run = vary(opts.cli, opts.case, setup(opts.cli, fake.url, home), home)
        run.write_files()
        os.environ.clear()
        os.environ.update(base_env(home))
        agent = replace(parse_config("").agent(opts.cli), argv=tuple(run.argv), env=run.env,
                        timeout_seconds=TIMEOUT_S)
        events: list[dict[str, Any]] = []
        outcome = asyncio.run(run_agent(
            agent, "Say OK", cwd=root, prompt_file=root / "prompt.md",
            log_path=root / "agent.log",
            emit=lambda topic, meta: events.append({"topic": topic, "meta": meta})))
        result = {"status": outcome.status, "message": outcome.message,
                  "exit_code": outcome.exit_code, "events": events,
                  "requests": [r.to_dict() for r in fake.requests]}
    opts.out.write_text(json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())

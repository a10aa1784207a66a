"""Runs Ralph with a real agent CLI against the fake model server, inside a network
namespace that has only loopback (the test starts it under `unshare -n`), and writes what
happened to a JSON file for the test to check.

    python tests/agents/e2e_driver.py --cli codex --case success --project DIR --out FILE
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ralph.approvals.rules import ApprovalMode
from ralph.config import load_config
from ralph.loop import LoopService
from ralph.scaffold import scaffold
from ralph.sessions import SessionService
from ralph.store import Store
from ralph.testing.fakellm import FakeLLM
from tests.agents.clienv import REQUESTS_PER_429_RUN, base_env, setup

TASKS = ["hello.txt", "world.txt", "again.txt"]


def prd(done: int, tasks: int) -> str:
    lines = ["# E2E", "", "## Tasks", ""]
    for i in range(tasks):
        box = "x" if i < done else " "
        lines.append(f"- [{box}] {i + 1}. Create {TASKS[i]} containing {TASKS[i][:-4]}")
    return "\n".join(lines) + "\n"


def scenario(case: str, cli: str, tasks: int) -> dict[str, Any]:
    """One rule per task: write its file, then the ticked PRD, then say it is done."""
    rules: list[dict[str, Any]] = []
    for i in range(tasks):
        name = TASKS[i]
        rule: dict[str, Any] = {
            "name": f"task{i + 1}", "match": {"user": f"- Title: Create {name}"},
            "reply": {"write_file": {"path": name, "content": name[:-4]}},
            "then": [{"write_file": {"path": "PRD.md", "content": prd(i + 1, tasks)}},
                     {"text": "Done. EXIT_SIGNAL: true"}]}
        if case == "hang":
            rule["reply"] = {"hang": 600}
        rules.append(rule)
    if case == "approvals":  # the model runs one shell command, then says it is finished
        return {"default": {"text": "OK"}, "rules": [
            {"name": name, "match": {"user": f"proof-{name}"},
             "reply": {"shell": f"echo {name} > {name}.txt"},
             "then": [{"text": "finished"}]} for name in APPROVAL_CASES]}
    if case == "readonly":  # approvals deny: the model tries to write a file, then a command
        return {"default": {"text": "OK"}, "rules": [
            {"name": "escape", "match": {"user": "proof-readonly"},
             "reply": {"write_file": {"path": "written.txt", "content": "x"}},
             "then": [{"shell": "echo escaped > escaped.txt"}, {"text": "finished"}]}]}
    if case == "401":  # the key is refused: the run must stop at once, no attempt counted
        rules.insert(0, {"name": "unauthorized",
                         "reply": {"error": {"status": 401,
                                             "message": "Invalid API key (fake)."}}})
    if case == "429":
        rules.insert(0, {"name": "limited", "match": {"user": "- Title: Create hello.txt"},
                         "times": REQUESTS_PER_429_RUN[cli],
                         "reply": {"error": {"status": 429, "retry_after": 1}}})
    return {"default": {"text": "OK"}, "rules": rules}


def loopback_only() -> bool:
    return sorted(name for _, name in socket.if_nameindex()) == ["lo"]


def main() -> int:
    args = argparse.ArgumentParser()
    args.add_argument("--cli", required=True)
    args.add_argument("--case", required=True,
                      choices=["success", "429", "hang", "server", "401", "continue",
                               "approvals", "readonly"])
    args.add_argument("--project", required=True, type=Path)
    args.add_argument("--out", required=True, type=Path)
    opts = args.parse_args()
    if not loopback_only():
        print("refusing to run: a network interface other than lo is visible", file=sys.stderr)
        return 3
    root: Path = opts.project
    tasks = 3 if opts.case == "server" else 1
    home = root.parent / "home"
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    with FakeLLM(scenario(opts.case, opts.cli, tasks)) as fake:
        cli = setup(opts.cli, fake.url, home)
        cli.write_files()
        os.environ.clear()
        os.environ.update(base_env(home))
        make_project(root, opts.cli, cli.argv, cli.env, opts.case, tasks)
        if opts.case in ("continue", "approvals", "readonly"):
            turns = (two_turns(root) if opts.case == "continue" else approvals(root)
                     if opts.case == "approvals" else readonly(root))
            turns["requests"] = [r.to_dict() for r in fake.requests]
            opts.out.write_text(json.dumps(turns, default=str))
            return 0
        service = LoopService(root)
        try:
            if opts.case in ("server", "401"):
                outcome = asyncio.run(service.run(max_iterations=3))
                result: dict[str, Any] = {"outcome": outcome.model_dump(mode="json")}
            else:
                step = asyncio.run(service.step())
                result = {"step": step.model_dump(mode="json")}
            result["events"] = [f.to_dict() for f in service.store.read()]
            result["state"] = json.loads((root / ".ralph" / "state.json").read_text())
            result["prd"] = (root / "PRD.md").read_text()
            result["commits"] = subprocess.run(
                ["git", "log", "--format=%s"], cwd=root, check=True, capture_output=True,
                text=True, timeout=30).stdout.splitlines()
        finally:
            service.close()
        result["requests"] = [r.to_dict() for r in fake.requests]
    opts.out.write_text(json.dumps(result, default=str))
    return 0


FIRST_TURN = "Remember the code word PINEAPPLE."
SECOND_TURN = "Which code word did I give you?"


def two_turns(root: Path) -> dict[str, Any]:
    """An agent session, then a second one continuing its conversation (ralph.sessions)."""

    async def go() -> dict[str, Any]:
        with Store(root / ".ralph" / "store") as store:
            sessions = SessionService(root, load_config(root), store)
            first = await sessions.wait(await sessions.launch(FIRST_TURN), 240)
            second = await sessions.wait(await sessions.launch(
                SECOND_TURN, continue_from=first.session_id), 240)
            return {"first": dataclasses.asdict(first), "second": dataclasses.asdict(second),
                    "native": [dataclasses.asdict(c) for c in sessions.native()]}

    return asyncio.run(go())


APPROVAL_CASES = ("allow", "deny", "timeout", "rule", "mode")


def approvals(root: Path) -> dict[str, Any]:
    """Agent sessions whose tool call is decided by each mechanism: a person allows it or
    denies it (another process answering through the store: `ralph agent approve`), nobody
    answers (timeout), a rule allows it (approvals deny), the mode denies it."""

    async def go() -> dict[str, Any]:
        found: dict[str, Any] = {}
        with Store(root / ".ralph" / "store") as store:
            config = load_config(root)
            for name in APPROVAL_CASES:
                mode: ApprovalMode = "deny" if name in ("rule", "mode") else "ask"
                rules = config.approvals.model_copy(update={
                    "timeout_seconds": 4 if name == "timeout" else 120,
                    "allow": ["Bash(echo rule > *)"]})  # a redirection is allowed if spelled
                sessions = SessionService(root, config.model_copy(update={"approvals": rules}),
                                          store)
                session_id = await sessions.launch(f"Run proof-{name}", approvals=mode)
                if name in ("allow", "deny"):
                    tool_use_id = await _first_request(sessions, session_id)
                    answer = subprocess.run(
                        [sys.executable, "-m", "ralph", "agent", "approve", session_id,
                         tool_use_id, f"--{name}", "--message", f"{name} by the e2e test",
                         "--root", str(root)], capture_output=True, text=True, timeout=60,
                        check=False)
                    found[f"{name}_answer"] = {"exit": answer.returncode,
                                               "stdout": answer.stdout,
                                               "stderr": answer.stderr}
                info = await sessions.wait(session_id, 240)
                found[name] = {
                    "session": dataclasses.asdict(info),
                    "ran": (root / f"{name}.txt").exists(),
                    "events": [f.to_dict() for f in store.read(stream=f"sessions/{session_id}")
                               if f.topic.startswith("session.")]}
        return found

    return asyncio.run(go())


def readonly(root: Path) -> dict[str, Any]:
    """A session under approvals deny whose model tries to write (and, for gemini, to leave
    its read-only plan mode first)."""

    async def go() -> dict[str, Any]:
        with Store(root / ".ralph" / "store") as store:
            sessions = SessionService(root, load_config(root), store)
            info = await sessions.wait(await sessions.launch("Run proof-readonly",
                                                             approvals="deny"), 240)
            return {"session": dataclasses.asdict(info),
                    "escaped": (root / "escaped.txt").exists(),
                    "written": (root / "written.txt").exists(),
                    "log": Path(info.log_path).read_text(errors="replace")[-4000:]}

    return asyncio.run(go())


async def _first_request(sessions: SessionService, session_id: str) -> str:
    for _ in range(2400):
        pending = sessions.pending(session_id)
        if pending:
            return pending[0].tool_use_id
        if sessions.get(session_id).ended:
            break
        await asyncio.sleep(0.05)
    raise RuntimeError(f"session {session_id} asked nothing: {sessions.get(session_id)}")


def make_project(root: Path, cli: str, argv: list[str], env: dict[str, str], case: str,
                 tasks: int) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for args in (["init", "-q"], ["config", "user.name", "e2e"],
                 ["config", "user.email", "e2e@localhost"]):
        subprocess.run(["git", *args], cwd=root, check=True, timeout=30)
    scaffold(root, "md", False)
    (root / "PRD.md").write_text(prd(0, tasks))
    # A task's gate holds once it is ticked: its file must then have the right content.
    gates = [f"! grep -q '^- \\[x\\] {i + 1}\\.' PRD.md || "
             f'test "$(cat {TASKS[i]})" = {TASKS[i][:-4]}' for i in range(tasks)]
    timeout = 8 if case == "hang" else 240
    section = {"argv": argv, "env": env, "timeout_seconds": timeout}
    if case == "server":
        section["server"] = True
    agent = "".join(f"{k} = {_value(v)}\n" for k, v in section.items())
    commands = json.dumps(gates)
    toml = (f'[loop]\ndefault_agent = "{cli}"\nrate_limit_max_wait_seconds = 2\n'
            f"max_attempts_per_task = 3\n\n[agents.{cli}]\n{agent}\n"
            f"[gates]\ncommands = {commands}\n")
    (root / "ralph.toml").write_text(toml)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True, timeout=30)
    subprocess.run(["git", "commit", "-q", "-m", "e2e project"], cwd=root, check=True,
                   timeout=30)


def _value(value: object) -> str:
    """A TOML value: JSON spells strings, numbers, booleans and arrays the same way."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {json.dumps(v)}"
                                for k, v in value.items()) + " }"
    return json.dumps(value)


if __name__ == "__main__":
    sys.exit(main())

"""The real agent CLIs (pinned in tests/agents/package.json) driven by Ralph against the fake
model server, each run inside a network namespace that has only loopback (`unshare -n`): no
test traffic can leave the machine, whatever a CLI tries.

For each CLI: an iteration in which the fake model makes the CLI write the file the task asks
for (gate passes, task verified, normalized events and usage in the store); a 429 that is
classified rate_limited, waited out and retried; a model that hangs, whose CLI the timeout
ends with its whole process tree. Plus opencode's server mode over a three-task run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.agents.clienv import CLIS, NODE_BIN
from tests.proc.helpers import group_members

DRIVER = Path(__file__).with_name("e2e_driver.py")
ROOT = Path(__file__).resolve().parents[2]


def _require_clis() -> None:
    missing = [cli for cli in CLIS if not (NODE_BIN / cli).exists()]
    if missing:
        pytest.fail(f"agent CLIs not installed: {', '.join(missing)}: run `make test` (it "
                    "runs `npm install` in tests/agents) or `cd tests/agents && npm install`",
                    pytrace=False)
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.fail("`unshare` and `ip` (util-linux, iproute2) are needed to run the agent CLIs "
                    "in a loopback-only network namespace", pytrace=False)


def drive(tmp_path: Path, cli: str, case: str) -> dict[str, Any]:
    """Run the driver for one CLI and case in a fresh network namespace; its findings."""
    _require_clis()
    out = tmp_path / "out.json"
    # codex makes /tmp/codex-daemon-<uid> whatever TMPDIR says: remove it if it is ours.
    daemon_dir = Path(f"/tmp/codex-daemon-{os.getuid()}")
    had_daemon_dir = daemon_dir.exists()
    command = (f"ip link set lo up && exec {sys.executable} {DRIVER} --cli {cli} --case {case} "
               f"--project {tmp_path / 'proj'} --out {out}")
    proc = subprocess.run(["unshare", "-n", "sh", "-c", command], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, stdin=subprocess.DEVNULL,
                          start_new_session=True, check=False)
    if not had_daemon_dir and daemon_dir.is_dir() and not any(daemon_dir.iterdir()):
        daemon_dir.rmdir()
    if proc.returncode != 0 or not out.exists():
        pytest.fail(f"the e2e driver failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}",
                    pytrace=False)
    return dict(json.loads(out.read_text()))


def topics(result: dict[str, Any], topic: str) -> list[dict[str, Any]]:
    return [e["meta"] for e in result["events"] if e["topic"] == topic]




@pytest.mark.parametrize("cli", CLIS)
def test_an_iteration_with_the_real_cli(tmp_path: Path, cli: str) -> None:
    result = drive(tmp_path, cli, "success")
    step = result["step"]
    assert (step["status"], step["verified"], step["gates_ok"]) == ("done", True, True), step
    assert step["exit_signal"] is True and step["agent_status"] == "ok"
    assert (tmp_path / "proj" / "hello.txt").read_text().strip() == "hello"
    [started] = topics(result, "agent.started")
    assert started["agent"] == cli and started["argv"][0] == cli
    outputs = topics(result, "agent.output")
    assert {"tool_use", "text"} <= {o["kind"] for o in outputs}
    assert all(set(o) >= {"kind", "content", "tool"} for o in outputs)
    # gemini streams its answer in pieces, which may land in separate events
    assert "EXIT_SIGNAL: true" in "".join(o["content"] for o in outputs if o["kind"] == "text")
    [usage] = topics(result, "agent.usage")
    assert usage["input_tokens"] and usage["output_tokens"]
    assert set(usage) >= {"input_tokens", "output_tokens", "cached_tokens", "cost_usd"}
    [finished] = topics(result, "agent.finished")
    assert finished["status"] == "ok" and finished["session_id"]
    assert finished["reset_at"] is None and finished["not_json_lines"] == 0
    assert any(r["path"].startswith(("/v1/", "/v1beta/")) for r in result["requests"])


@pytest.mark.parametrize("cli", CLIS)
def test_a_rate_limit_is_waited_out_and_retried(tmp_path: Path, cli: str) -> None:
    result = drive(tmp_path, cli, "429")
    step = result["step"]
    assert step["verified"], step
    statuses = [f["status"] for f in topics(result, "agent.finished")]
    assert statuses == ["rate_limited", "ok"]
    [wait] = topics(result, "agent.rate_limited")
    assert 0 < wait["wait_seconds"] <= 2
    state = json.loads((tmp_path / "proj" / ".ralph" / "state.json").read_text())
    assert "1" not in state["tasks"]  # verified done: state.json no longer follows it
    assert (tmp_path / "proj" / ".ralph" / "attempts" / "1" / "1-1.json").is_file()
    assert step["no_progress_streak"] == 0


@pytest.mark.parametrize("cli", CLIS)
def test_a_hanging_cli_is_ended_with_its_process_tree(tmp_path: Path, cli: str) -> None:
    result = drive(tmp_path, cli, "hang")
    step = result["step"]
    assert (step["status"], step["agent_status"]) == ("agent_failed", "timeout"), step
    [finished] = topics(result, "agent.finished")
    assert finished["status"] == "timeout" and finished["pid"]
    assert group_members(finished["pid"]) == []


@pytest.mark.parametrize("cli", CLIS)
def test_a_refused_key_stops_the_run_without_an_attempt(tmp_path: Path, cli: str) -> None:
    """The API answers 401: the run ends with reason `error` and one message naming the
    agent and how to log in; no attempt is counted, no task blocked, nothing committed."""
    result = drive(tmp_path, cli, "401")
    outcome = result["outcome"]
    assert outcome["reason"] == "error" and outcome["iterations"] == 1, outcome
    assert f"agent '{cli}' could not authenticate" in outcome["message"]
    assert "401" in outcome["message"] or "Invalid API key" in outcome["message"]
    task = result["state"]["tasks"]["1"]
    assert task["failures"] == 0 and task["blocked"] is None
    assert result["commits"] == ["e2e project"]
    assert "Blocked" not in result["prd"] and "- [ ] 1." in result["prd"]
    finished = [e["meta"] for e in result["events"] if e["topic"] == "iteration.finished"]
    assert [f["status"] for f in finished] == ["error"]


def test_opencode_server_mode(tmp_path: Path) -> None:
    result = drive(tmp_path, "opencode", "server")
    outcome = result["outcome"]
    assert (outcome["reason"], outcome["iterations"], outcome["done"]) == ("complete", 3, 3)
    argvs = [s["argv"] for s in topics(result, "agent.started")]
    assert len(argvs) == 3
    urls = {argv[argv.index("--attach") + 1] for argv in argvs}
    assert len(urls) == 1 and next(iter(urls)).startswith("http://127.0.0.1:")
    titles = [argv[argv.index("--title") + 1] for argv in argvs]
    assert titles == [f"proj - Iteration #{n}" for n in (1, 2, 3)]
    log = (tmp_path / "proj" / ".ralph" / "logs" / "server.log").read_text()
    assert log.count("listening on") == 1  # one server for the whole run
    leftovers = [pid for pid in os.listdir("/proc") if pid.isdigit() and
                 str(tmp_path) in _cmdline(pid)]
    assert leftovers == []


def _cwd(pid: str) -> str:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return ""


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


@pytest.mark.parametrize("cli", CLIS)
def test_an_agent_session_continues_the_clis_conversation(tmp_path: Path, cli: str) -> None:
    result = drive(tmp_path, cli, "continue")
    first, second = result["first"], result["second"]
    assert first["status"] == "completed" and first["agent_session_id"], first
    assert second["status"] == "completed", second
    assert second["continue_from"] == first["session_id"]
    model_calls = [r for r in result["requests"] if r["rule"] is not None]
    last = model_calls[-1]
    assert last["last_user_text"] and "Which code word" in last["last_user_text"]
    # The CLI sent the earlier turn along: the conversation went on, it did not start over.
    assert "PINEAPPLE" in json.dumps(last["body"])
    if cli in ("claude", "codex"):  # the CLI's own record of it, listed (ralph agent list --all)
        [native] = [c for c in result["native"]
                    if c["conversation_id"] == first["agent_session_id"]]
        assert native["id"] == f"{cli}:{first['agent_session_id']}"
        assert native["summary"] == "Remember the code word PINEAPPLE."
        assert native["messages"] == 4  # two turns: two prompts, two answers


# How each CLI names its shell tool, and what the model is sent for a command that printed
# nothing (the tool result of the allowed call).
SHELL_TOOL = {"claude": "Bash", "opencode": "bash"}


@pytest.mark.parametrize("cli", ["claude", "opencode"])
def test_the_agent_asks_ralph_before_each_tool_call(tmp_path: Path, cli: str) -> None:
    """approvals ask / deny with the real CLI (Claude Code: its PreToolUse hook; opencode:
    its server, driven by ralph.approvals.opencode_run): each request is recorded in the
    session's stream and waits for the answer, which another process gives (`ralph agent
    approve`), a rule gives, the mode gives, or the timeout gives."""
    result = drive(tmp_path, cli, "approvals")
    proj = tmp_path / "proj"
    for name in ("allow", "deny"):
        answered = result[f"{name}_answer"]
        assert answered["exit"] == 0, answered
        verb = "allowed" if name == "allow" else "denied"
        assert answered["stdout"].strip().endswith(f": {verb}"), answered
    expected = {"allow": ("allow", "ralph agent approve", True),
                "deny": ("deny", "ralph agent approve", False),
                "timeout": ("deny", "timeout", False),
                "rule": ("allow", "rule", True),
                "mode": ("deny", "mode", False)}
    for name, (decision, by, ran) in expected.items():
        case = result[name]
        assert case["session"]["status"] == "completed", (name, case["session"])
        assert case["session"]["approvals"] == ("deny" if name in ("rule", "mode") else "ask")
        assert case["ran"] is ran and (proj / f"{name}.txt").exists() is ran, name
        [request] = [e["meta"] for e in case["events"]
                     if e["topic"] == "session.approval_requested"]
        assert request["tool_name"] == SHELL_TOOL[cli]
        assert request["input"]["command"] == f"echo {name} > {name}.txt"
        [answer] = [e["meta"] for e in case["events"]
                    if e["topic"] == "session.approval_answered"]
        assert answer["tool_use_id"] == request["tool_use_id"]
        assert (answer["decision"], answer["by"]) == (decision, by), (name, answer)
    assert result["rule"]["events"][-2]["meta"]["rule"] == "Bash(echo rule > *)"
    # A denial's reason reaches the model: the tool result it is sent next says so.
    tool_results = {r["rule"]: r["tool_result_text"] for r in result["requests"]
                    if r["rule"] is not None and r["tool_result_text"]}
    assert "deny by the e2e test" in tool_results["deny"]
    assert "nobody answered within 4 s" in tool_results["timeout"]
    assert "only the tools" in tool_results["mode"]
    if cli == "claude":
        assert "denied" not in tool_results["allow"] and "Bash" in tool_results["allow"]
    else:  # opencode: the command's output, "(no output)"; a rejection would say "rejected"
        assert tool_results["allow"] == "(no output)", tool_results["allow"]
        assert all(tool_results[name].startswith("The user rejected permission")
                   for name in ("deny", "timeout", "mode"))
        for name in expected:  # the model's tool call id names the request; the
            # conversation is opencode's session, its server stopped with the turn
            [request] = [e["meta"] for e in result[name]["events"]
                         if e["topic"] == "session.approval_requested"]
            assert request["tool_use_id"].startswith("call_"), request
            assert result[name]["session"]["agent_session_id"].startswith("ses_")
        logs = list((proj / ".ralph" / "sessions").glob("*/opencode-server.log"))
        assert len(logs) == len(expected)
        assert all("listening on http://127.0.0.1:" in log.read_text() for log in logs)
        assert [pid for pid in os.listdir("/proc") if pid.isdigit()
                and _cwd(pid).startswith(str(proj))] == []


@pytest.mark.parametrize("cli", ["codex", "gemini"])
def test_approvals_deny_keeps_codex_and_gemini_read_only(tmp_path: Path, cli: str) -> None:
    """They ask nobody: `deny` is their own read-only sandbox (codex) or plan mode held by a
    policy (gemini: plan mode's way out, exit_plan_mode, would switch to yolo with nobody
    to ask; the policy keeps it from being offered), and a model that tries to write a file
    or run a command that writes changes nothing."""
    result = drive(tmp_path, cli, "readonly")
    session = result["session"]
    assert session["approvals"] == "deny" and session["status"] in ("completed", "failed")
    assert not result["escaped"] and not result["written"], result["log"]
    flags = {"codex": ["--sandbox", "read-only"], "gemini": ["--approval-mode", "plan"]}[cli]
    argv = session["argv"]
    assert any(argv[i:i + 2] == flags for i in range(len(argv))), argv
    asked = [r for r in result["requests"] if r["rule"] == "escape"]
    assert asked and asked[0]["tool_calls"], "the model never tried"
    if cli == "gemini":
        offered = {tool for r in result["requests"] for tool in r["tools"]}
        assert "write_file" in offered and "exit_plan_mode" not in offered, offered

"""`ac server:start`, `ralph company serve` and `ac rpc:call` as real processes: JSON-RPC
2.0 over newline-delimited stdio (protocol messages only on stdout), the workspace methods,
bad params and unknown methods, and the end at EOF."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ralph.company.files import read_yaml
from ralph.company.ids import is_id
from ralph.company.workspace import init_workspace, validate_workspace
from tests.cli.helpers import TIMEOUT

AC = str(Path(sys.executable).with_name("ac"))
RALPH = str(Path(sys.executable).with_name("ralph"))


def exchange(command: list[str], *messages: dict[str, Any]) -> list[dict[str, Any]]:
    """Send every message, close stdin, and read every line the server wrote."""
    done = subprocess.run(command, input="".join(json.dumps(m) + "\n" for m in messages),
                          capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def request(n: int, method: str, params: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": n, "method": method}
    if params is not None:
        message["params"] = params
    return message


@pytest.mark.parametrize("command", [[AC, "server:start"], [RALPH, "company", "serve"]])
def test_the_workspace_methods_over_stdio(tmp_path: Path, command: list[str]) -> None:
    ws = str(tmp_path / "ws")
    answers = exchange(
        command,
        request(1, "workspace.init", {"workspace_dir": ws, "company_name": "Acme",
                                      "unknown": "ignored"}),
        request(2, "workspace.validate", {"workspace_dir": ws}),
        request(3, "workspace.open", {"workspace_dir": ws}),
        request(4, "workspace.init", {"workspace_dir": ws}),
        request(5, "workspace.open", {"workspace_dir": str(tmp_path / "none")}),
        request(6, "workspace.validate", {"workspace_dir": "relative/ws"}),
        request(7, "workspace.init", {"workspace_dir": ws, "force": "yes"}),
        request(8, "no.such_method", {}),
        {"jsonrpc": "2.0", "method": "workspace.validate", "params": {"workspace_dir": ws}})
    by_id = {answer["id"]: answer for answer in answers}
    assert len(answers) == 8  # the notification is not answered
    assert by_id[1]["result"] == {"ok": True}
    assert by_id[2]["result"] == {"ok": True}  # no `issues` key when valid
    assert by_id[3]["result"] == {"workspace_dir": ws, "valid": True, "issues": []}
    assert by_id[4]["error"] == {
        "code": -32000, "message": f"Refusing to initialize in a non-empty directory ({ws}). "
                                   "Use --force to override.", "data": {"workspace_dir": ws}}
    missing = by_id[5]["result"]
    assert missing["valid"] is False and len(missing["issues"]) == 14
    assert missing["issues"][0] == {"code": "missing_dir", "message": "Missing directory: "
                                    "company", "path": "company"}
    for n, field in ((6, "workspace_dir"), (7, "force")):
        error = by_id[n]["error"]
        assert error["code"] == -32602 and error["message"] == "Invalid params"
        assert [problem["loc"] for problem in error["data"]] == [[field]]
    assert "absolute" in by_id[6]["error"]["data"][0]["msg"]
    assert by_id[8]["error"] == {"code": -32601, "message": "Method not found",
                                 "data": {"method": "no.such_method"}}


def test_rpc_call_prints_one_result_or_one_error_line(tmp_path: Path) -> None:
    ws = str(tmp_path / "ws")
    made = subprocess.run([AC, "rpc:call", "--method", "workspace.init", "--params",
                           json.dumps({"workspace_dir": ws})], capture_output=True, text=True,
                          timeout=TIMEOUT, check=False)
    assert made.returncode == 0 and json.loads(made.stdout) == {"ok": True}, made.stderr
    again = subprocess.run([AC, "rpc:call", "--method", "workspace.init", "--params",
                            json.dumps({"workspace_dir": ws})], capture_output=True,
                           text=True, timeout=TIMEOUT, check=False)
    assert again.returncode == 1 and again.stdout == ""
    assert again.stderr.startswith("error: Refusing to initialize in a non-empty directory")
    assert len(again.stderr.splitlines()) == 1
    broken = subprocess.run([AC, "rpc:call", "--method", "workspace.open", "--params", "{x"],
                            capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert broken.returncode == 2 and broken.stderr.startswith("error: --params is not JSON")
    usage = subprocess.run([AC, "rpc:call"], capture_output=True, text=True, timeout=TIMEOUT,
                           check=False)
    assert usage.returncode == 2 and usage.stderr == (
        "error: Missing option '--method'. (see 'ac rpc:call --help')\n")
    assert "Traceback" not in broken.stderr + again.stderr


def test_lines_that_are_not_requests(tmp_path: Path) -> None:
    done = subprocess.run([AC, "server:start"], input='not json\n{"id": 3}\n\n',
                          capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert done.returncode == 0, done.stderr
    parse, invalid = (json.loads(line) for line in done.stdout.splitlines())
    assert (parse["id"], parse["error"]["code"], parse["error"]["message"]) == (
        None, -32700, "Parse error")
    assert "reason" in parse["error"]["data"]
    assert (invalid["id"], invalid["error"]["code"]) == (3, -32600)


def test_teams_agents_and_projects_from_the_command_line(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    init_workspace(ws)

    def ac(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([AC, *args], capture_output=True, text=True, timeout=TIMEOUT,
                              check=False)

    team = ac("team:new", str(ws), "--name", "Core").stdout.strip()
    agent = ac("agent:new", str(ws), "--name", "Ada", "--role", "worker", "--provider",
               "claude", "--team", team).stdout.strip()
    project = ac("project:new", str(ws), "--name", "Shop").stdout.strip()
    assert is_id(team, "team") and is_id(agent, "agent") and is_id(project, "proj")
    made = read_yaml(ws / "org/agents" / agent / "agent.yaml")
    assert list(made) == ["schema_version", "type", "id", "name", "role", "provider",
                          "team_id", "created_at", "launcher"]
    assert made["team_id"] == team and made["launcher"] == {}
    assert (ws / "work/projects" / project / "memory.md").read_text() == (
        "# Project Memory (Curated)\n\n## Summary\n\n## Decisions\n\n## Links\n")
    assert {p.name for p in (ws / "work/projects" / project).iterdir()} == {
        "tasks", "artifacts", "context_packs", "runs", "share_packs", "project.yaml",
        "memory.md"}
    assert validate_workspace(ws) == []
    bad = ac("agent:new", str(ws), "--name", "X", "--role", "boss", "--provider", "codex")
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr == 'error: Invalid role "boss". Valid: ceo, director, manager, worker\n'
    elsewhere = ac("project:new", str(tmp_path / "none"), "--name", "X")
    assert elsewhere.returncode == 1 and "Not an AgentCompany workspace" in elsewhere.stderr

"""opencode's server mode with a stand-in `opencode` program: one server per run, health
checked, every iteration attached, and the server's process group ended when the run ends,
is stopped (Ctrl-C) or fails."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from ralph.agents.base import AgentError
from ralph.agents.server import AgentServer
from ralph.store import Frame
from tests.loop.conftest import Project, git
from tests.proc.helpers import group_members

# `opencode serve --port P ...` serves HTTP until killed (its child too: a group to end);
# `opencode run ...` ticks the task in PRD.md (or sleeps, if told to) and prints JSON.
FAKE_OPENCODE = """
import http.server, json, os, re, subprocess, sys, time
args = sys.argv[1:]
if args[0] == "serve":
    port = int(args[args.index("--port") + 1])
    if os.environ.get("FAKE_SERVE_FAIL"):
        sys.exit(3)
    subprocess.Popen(["sleep", "300"])  # a child in the server's group
    http.server.HTTPServer(("127.0.0.1", port), http.server.SimpleHTTPRequestHandler
                           ).serve_forever()
prompt = sys.stdin.read()
task = re.search(r"- Task id: (\\S+)", prompt).group(1)
title = args[args.index("--title") + 1]
attach = args[args.index("--attach") + 1]
print(json.dumps({"type": "text", "sessionID": "s", "part": {"text": f"{title} via {attach}"}}))
if os.environ.get("FAKE_RUN_SLEEP"):
    time.sleep(float(os.environ["FAKE_RUN_SLEEP"]))
prd = open("PRD.md").read()
open("PRD.md", "w").write(re.sub(rf"- \\[ \\] {task}\\.", f"- [x] {task}.", prd))
print(json.dumps({"type": "text", "sessionID": "s", "part": {"text": "EXIT_SIGNAL: true"}}))
"""


@pytest.fixture
def opencode_project(project: Project, tmp_path: Path) -> Project:
    script = tmp_path / "fake_opencode.py"
    script.write_text(FAKE_OPENCODE)
    wrapper = tmp_path / "opencode"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {script} \"$@\"\n")
    wrapper.chmod(0o755)
    (project.root / "ralph.toml").write_text(
        '[loop]\ndefault_agent = "opencode"\nmax_iterations = 5\n\n'
        f'[agents.opencode]\nargv = ["{wrapper}", "run", "--format", "json"]\n'
        "server = true\ntimeout_seconds = 60\n")
    project.commit("opencode server")
    return project


async def test_one_server_per_run_and_gone_afterwards(opencode_project: Project) -> None:
    events: list[Frame] = []
    service = opencode_project.service(events)
    pgids: list[int] = []
    original = AgentServer.start

    async def spy(self: AgentServer) -> str:
        url = await original(self)
        assert self.pgid is not None
        pgids.append(self.pgid)
        return url

    AgentServer.start = spy  # type: ignore[method-assign]
    try:
        outcome = await service.run()
    finally:
        AgentServer.start = original  # type: ignore[method-assign]
        await service.aclose()
    assert outcome.reason == "complete" and outcome.iterations == 3
    assert len(pgids) == 1 and group_members(pgids[0]) == []
    said = [f.meta["content"] for f in events if f.topic == "agent.output"]
    titles = [s.split(" via ")[0] for s in said if " via " in s]
    assert titles == [f"proj - Iteration #{n}" for n in (1, 2, 3)]
    assert len({s.split(" via ")[1] for s in said if " via " in s}) == 1
    # Each text part is an event of its own, whether the two lines came in one read or two.
    assert said.count("EXIT_SIGNAL: true") == 3
    state = json.loads((opencode_project.root / ".ralph/state.json").read_text())
    assert state["active_run"] is None


async def test_stopping_the_run_ends_the_server(opencode_project: Project,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_RUN_SLEEP", "60")
    events: list[Frame] = []
    service = opencode_project.service(events)
    try:
        await service.start_run()
        for _ in range(600):
            if any(f.topic == "agent.started" for f in events):
                break
            await asyncio.sleep(0.05)
        state = json.loads((opencode_project.root / ".ralph/state.json").read_text())
        pgid = state["active_run"]["server_pgid"]
        assert pgid and group_members(pgid)
        service.stop()  # what Ctrl-C does
        outcome = await asyncio.wait_for(service.wait(), 60)
    finally:
        await service.aclose()
    assert outcome is not None and outcome.reason == "stopped"
    assert group_members(pgid) == []


async def test_a_server_that_does_not_start_is_a_clear_error(
        opencode_project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_SERVE_FAIL", "1")
    service = opencode_project.service()
    try:
        with pytest.raises(AgentError, match=r"its server \(`\S+ serve`\) exited with 3"):
            await service.run()
    finally:
        await service.aclose()
    state = json.loads((opencode_project.root / ".ralph/state.json").read_text())
    assert state.get("active_run") is None and state.get("in_flight") is None
    assert git(opencode_project.root, "status", "--short") == ""

"""`ralph nu` and `ralph nu done` as a user runs them, with a stand-in `opencode`: one server
for the session (`web`, or `serve` where there is no `web`), every iteration attached with
its title, bad input refused in one line, Ctrl-C cleaning up, and an agent that kills the
loop's children survived."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ralph.agents.server import free_port
from ralph.nu.record import read_record
from ralph.store import Store
from tests.cli.helpers import RALPH, WITH_SIGINT, Result, assert_error, run_ralph
from tests.loop.conftest import git, new_repository
from tests.proc.helpers import group_members

# `opencode web|serve --port P`: an HTTP server (unless told to be missing or silent), its
# command line logged; `opencode run ...`: its command line logged, then the fake session
# agent plays the plan.
FAKE_OPENCODE = """
import http.server, json, os, sys, time
args = sys.argv[1:]
with open(os.environ["FAKE_OC_LOG"], "a") as log:
    log.write(json.dumps([os.getpid(), *args]) + "\\n")
if args[0] in ("web", "serve"):
    if args[0] == "web" and os.environ.get("FAKE_NO_WEB"):
        sys.stderr.write("Commands: opencode serve ...\\n")
        sys.exit(1)
    if os.environ.get("FAKE_SILENT"):
        time.sleep(300)
    port = int(args[args.index("--port") + 1])
    http.server.HTTPServer(("127.0.0.1", port), http.server.SimpleHTTPRequestHandler
                           ).serve_forever()
from ralph.testing.fake_nu_agent import main
title = args[args.index("--title") + 1]
print(json.dumps({"type": "text", "sessionID": "s", "part": {"text": title}}), flush=True)
sys.exit(main(["--plan", os.environ["FAKE_NU_PLAN"]]))
"""
SPEC = "# Spec\n\n- Task A\n"
TWO_ITERATIONS: list[dict[str, object]] = [{"notes": [["remaining", "Task A"]]},
                  {"take": True, "finish": True, "write": {"a.txt": "a"}, "done": True}]


class Nu:
    """A project whose `opencode` agent is the stand-in."""

    def __init__(self, tmp_path: Path) -> None:
        self.root = tmp_path / "proj"
        self.log = tmp_path / "opencode.log"
        self.plan_path = tmp_path / "plan.json"
        new_repository(self.root)
        (self.root / "specs").mkdir()
        (self.root / "specs" / "SPEC.md").write_text(SPEC)
        script = tmp_path / "fake_opencode.py"
        script.write_text(FAKE_OPENCODE)
        self.program = tmp_path / "bin" / "opencode"
        self.program.parent.mkdir()
        self.program.write_text(f"#!/bin/sh\nexec {sys.executable} {script} \"$@\"\n")
        self.program.chmod(0o755)
        self.port = free_port()
        self.configure()

    def configure(self, server_env: dict[str, str] | None = None, extra: str = "") -> None:
        env = {"FAKE_OC_LOG": str(self.log), "FAKE_NU_PLAN": str(self.plan_path),
               **(server_env or {})}
        (self.root / "ralph.toml").write_text(
            f'[agents.opencode]\nargv = ["{self.program}", "run", "--format", "json"]\n'
            f"timeout_seconds = 60\n{extra}env = {_toml_table(env)}\n")
        git(self.root, "add", "-A")
        git(self.root, "commit", "-q", "-m", "config")

    def plan(self, steps: list[dict[str, object]]) -> None:
        self.plan_path.write_text(json.dumps({"steps": steps}))

    def nu(self, *args: str) -> Result:
        return run_ralph("nu", "--name", "demo", "--port", str(self.port), *args,
                         cwd=self.root, timeout=120)

    def calls(self) -> list[list[str]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def store(self) -> Store:
        return Store(self.root / ".ralph" / "store")


def _toml_table(values: dict[str, str]) -> str:
    return "{ " + ", ".join(f"{key} = {json.dumps(value)}" for key, value in values.items()) + " }"


@pytest.fixture
def nu(tmp_path: Path) -> Iterator[Nu]:
    made = Nu(tmp_path)
    yield made
    for pid, *_ in made.calls():  # nothing the session started is left
        assert group_members(int(pid)) == [], made.calls()


def test_a_session_on_one_server_with_titled_iterations(nu: Nu) -> None:
    nu.plan(TWO_ITERATIONS)
    result = nu.nu("--model", "fake/model-1")
    assert result.code == 0, result
    assert f"Starting opencode web on port {nu.port}...\n" in result.err
    assert f"Web UI: http://localhost:{nu.port}\n" in result.err
    assert "demo - Iteration #1...\n" in result.err and "demo - Iteration #2...\n" in result.err
    assert result.err.rstrip().endswith("session demo is verified complete"), result.err
    servers = [c for c in nu.calls() if c[1] in ("web", "serve")]
    runs = [c[1:] for c in nu.calls() if c[1] == "run"]
    assert [s[1:] for s in servers] == [["web", "--port", str(nu.port), "--hostname",
                                         "127.0.0.1"]]
    url = f"http://127.0.0.1:{nu.port}"
    for n, argv in enumerate(runs, 1):
        assert argv[:5] == ["run", "--attach", url, "--title", f"demo - Iteration #{n}"]
        assert argv[argv.index("--model") + 1] == "fake/model-1"  # --model reaches the agent
    assert len(runs) == 2
    with nu.store() as store:
        assert read_record(store, "demo").accepted == {2}


def test_resuming_shows_the_state_and_continues_the_numbering(nu: Nu) -> None:
    nu.plan(TWO_ITERATIONS)
    assert nu.nu("-i", "1").code == 0
    result = nu.nu("-i", "1")
    assert result.code == 0, result
    assert "Session demo: 1 iteration so far, continuing from iteration #2" in result.err
    assert "\nremaining (1)\n" in result.err and "iteration 1  " in result.err
    assert re.search(r"\[[0-9a-z]{25}\] Task A\n", result.err), result.err
    assert "demo - Iteration #2...\n" in result.err
    titles = [c[c.index("--title") + 1] for c in nu.calls() if c[1] == "run"]
    assert titles == ["demo - Iteration #1", "demo - Iteration #2"]


def test_serve_is_used_where_there_is_no_web(nu: Nu) -> None:
    nu.configure({"FAKE_NO_WEB": "1"})
    nu.plan(TWO_ITERATIONS)
    result = nu.nu()
    assert result.code == 0, result
    assert [c[1] for c in nu.calls() if c[1] != "run"] == ["web", "serve"]


def test_a_port_in_use_is_refused_at_once(nu: Nu) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", nu.port))
        taken.listen()
        result = nu.nu()
    assert_error(result, f"port {nu.port} is already in use", "--port")
    assert result.code == 1 and nu.calls() == []


def test_a_server_that_never_answers_is_given_up(nu: Nu) -> None:
    nu.configure({"FAKE_SILENT": "1"}, extra="server_wait_seconds = 2\n")
    nu.plan(TWO_ITERATIONS)
    result = nu.nu()
    assert result.code == 1, result
    last = result.err.splitlines()[-1]
    assert last.startswith("error: agent 'opencode': its server did not answer on "), last
    assert "within 2 s" in last and "Traceback" not in result.err
    assert [c[1] for c in nu.calls()] == ["web"]


def test_an_agent_that_kills_the_loops_children_is_survived(nu: Nu) -> None:
    nu.plan([{"notes": [["remaining", "Task A"]], "pkill": True},
             {"take": True, "finish": True, "done": True}])
    result = nu.nu()
    assert result.code == 0, result
    servers = [c for c in nu.calls() if c[1] in ("web", "serve")]
    assert len(servers) == 2, nu.calls()  # the killed server was started again
    with nu.store() as store:
        record = read_record(store, "demo")
        restarted = [f.meta for f in store.read(topic="agent.server_restarted")]
    assert record.completed[1].meta["status"] == "failure"
    assert record.accepted == {2} and 1 not in record.claims
    assert restarted and restarted[0]["agent"] == "opencode"


def start_session(nu: Nu) -> subprocess.Popen[bytes]:
    """`ralph nu` in the background, once its first iteration's agent runs."""
    proc = subprocess.Popen([*WITH_SIGINT, *RALPH, "nu", "--name", "demo", "--port",
                             str(nu.port)], cwd=nu.root, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    deadline = time.monotonic() + 60
    try:
        while not (nu.root / "claimed").exists():  # the plan's step writes it, then sleeps
            assert time.monotonic() < deadline and proc.poll() is None, nu.calls()
            time.sleep(0.05)
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    return proc


SLEEPER = [{"notes": [["remaining", "Task A"]], "done": True, "write": {"claimed": ""},
            "sleep": 300}]


def test_ctrl_c_cleans_up_and_exits_130(nu: Nu) -> None:
    nu.plan(SLEEPER)
    proc = start_session(nu)
    try:
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = err.decode()
    assert proc.returncode == 130, text
    assert "Cleaning up background jobs...\n" in text and "Traceback" not in text
    assert out == b""
    with nu.store() as store:
        record = read_record(store, "demo")
    stopped = record.completed[1].meta
    assert (stopped["status"], stopped["loop_status"]) == ("failure", "stopped")
    # The claim made before the stop was never verified: rejected, and nothing reopened.
    assert record.rejected[1] == "the iteration ended before its claim was verified (stopped)"
    assert "reopened" not in (nu.root / "progress.md").read_text()


def test_a_killed_session_is_recorded_and_goes_on(nu: Nu) -> None:
    nu.plan([*SLEEPER, {"notes": [["learning", "after"]]}])
    proc = start_session(nu)
    os.kill(proc.pid, signal.SIGKILL)  # its guard ends the agent and the server
    proc.communicate(timeout=60)
    late = run_ralph("nu", "done", "--name", "demo", cwd=nu.root)
    assert_error(late, "no iteration of session 'demo' is running")
    result = nu.nu("-i", "1")
    assert result.code == 0, result
    with nu.store() as store:
        record = read_record(store, "demo")
    dead = record.completed[1].meta
    assert (dead["status"], dead["loop_status"]) == ("failure", "interrupted")
    assert sorted(record.completed) == [1, 2] and 1 not in record.accepted


def test_a_relative_store_from_a_subdirectory(nu: Nu, tmp_path: Path) -> None:
    nu.plan(TWO_ITERATIONS)
    (nu.root / "sub").mkdir()
    result = run_ralph("nu", "-n", "demo", "--port", str(nu.port), "--store", "../../sess",
                       cwd=nu.root / "sub", timeout=120)
    assert result.code == 0, result
    with Store(tmp_path / "sess") as store:  # the session's frames, the agent's notes too
        assert read_record(store, "demo").accepted == {2}
        assert not list(store.read(topic="run.started"))
    with nu.store() as project:  # the loop's own record, where `ralph stop` looks
        assert len(list(project.read(topic="run.started"))) == 1
        assert not list(project.read(topic="ralph.*"))


def test_changes_in_the_tree_are_refused_unless_allowed(nu: Nu) -> None:
    nu.plan(TWO_ITERATIONS)
    (nu.root / "stray.txt").write_text("mine")
    refused = nu.nu()
    assert refused.code == 1 and "--allow-dirty" in refused.err.splitlines()[-1], refused
    assert nu.nu("--allow-dirty").code == 0
    assert "stray.txt" in git(nu.root, "log", "--stat", "--format=%s", "-3")


def test_bad_input(nu: Nu, tmp_path: Path) -> None:
    missing = run_ralph("nu", cwd=nu.root)
    assert missing.code == 2 and "a session needs a name" in missing.err, missing
    assert "'--name' / '-n'" in missing.err
    bad = run_ralph("nu", "-n", "no spaces", cwd=nu.root)
    assert bad.code == 2 and "use letters, digits, '_' and '-'" in bad.err, bad
    assert_error(nu.nu("-s", "specs/other.md"), "spec file specs/other.md not found")
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    (nu.root / "ralph.toml").write_text("")
    git(nu.root, "commit", "-qam", "plain opencode")
    none = run_ralph("nu", "-n", "demo", cwd=nu.root, env=env)
    line = assert_error(none, "opencode", "npm install -g opencode-ai")
    assert none.code == 1, line
    outside = run_ralph("nu", "done", "--name", "demo", "--store", str(tmp_path / "s"))
    assert_error(outside, "no iteration of session 'demo' is running")
    assert nu.calls() == []


def test_ctrl_c_while_the_server_starts_ends_it_at_once(nu: Nu) -> None:
    nu.configure({"FAKE_SILENT": "1"}, extra="server_wait_seconds = 120\n")
    nu.plan(TWO_ITERATIONS)
    proc = subprocess.Popen([*WITH_SIGINT, *RALPH, "nu", "--name", "demo", "--port",
                             str(nu.port)], cwd=nu.root, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not nu.calls():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)  # well before the server's 120 s
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err.decode()
    assert "Cleaning up background jobs...\n" in err.decode()
    assert [c[1] for c in nu.calls()] == ["web"]

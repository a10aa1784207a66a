"""Runs `ralph nu` (a named session) with the real opencode CLI against the fake model server,
inside a network namespace that has only loopback (the test starts it under `unshare -n`),
and writes what happened to a JSON file for the test to check.

    python tests/agents/nu_e2e_driver.py --project DIR --out FILE

`ralph nu --name e2e` runs as a subprocess, as a user runs it: one `opencode web` server for
the session, each iteration an `opencode run --attach` on it. The fake model plays an honest
agent, told which iteration it is by the prompt's first line ("You are iteration N of the
named session `e2e`") and using Ralph's commands exactly as the prompt shows them (a rule
matches only if the prompt has the line its command starts with): iteration 1 adds the
spec's two tasks as `remaining` notes, iterations 2 and 3 each take one (an `in_progress`
note resolving it), write its file and settle it (a `completed` note resolving the
`in_progress` one); iteration 3 then claims completion (`ralph nu done`). Note ids are only
known at run time: the commands find them with `ralph notes list --json` / the JSON `ralph
notes add` prints.

While iteration 3's first model request waits for its answer (the server is up and the
iteration is attached to it), the driver looks at the running session: the server's own
session list (`GET /session`), its process group (state.json) and the processes carrying
the driver's marker.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ralph.loop.iteration import ralph_command
from ralph.notes import list_notes
from ralph.scaffold import scaffold
from ralph.store import Store
from ralph.testing.fakellm import FakeLLM
from ralph.testing.fakellm.common import RequestView
from ralph.testing.fakellm.scenario import Reply
from tests.agents.clienv import MODELS, base_env, setup
from tests.agents.e2e_driver import loopback_only
from tests.agents.workflow_e2e_driver import git, toml_value

NAME = "e2e"
MARKER = "RALPH_NU_E2E_MARKER"  # in the environment of everything the driver starts
TASKS = {"a": "Create a.txt containing a", "b": "Create b.txt containing b"}
SPEC = ("# Spec: two files\n\n## Tasks\n\n"
        + "".join(f"{i}. {text}\n" for i, text in enumerate(TASKS.values(), 1)))
# A file, once there, must hold its letter: checked after every iteration, so also when
# the completion is claimed (that every task was done is the notes' part of the check).
GATES = [f'! test -e {key}.txt || test "$(cat {key}.txt)" = {key}' for key in TASKS]
# The id of the JSON object (a note) on stdin; of the first note of a list whose text
# mentions argv[1].
NOTE_ID = "python3 -c 'import json, sys; print(json.load(sys.stdin)[\"id\"])'"
FIRST_ID = ("python3 -c 'import json, sys; print(next(n[\"id\"] for n in json.load(sys.stdin) "
            "if sys.argv[1] in n[\"text\"]))'")


def first_line(n: int) -> str:
    return f"You are iteration {n} of the named session `{NAME}`"


def scenario(ralph: str, store: str) -> dict[str, Any]:
    """One rule per iteration: a shell call running Ralph's commands, then a short answer."""

    def notes(n: int) -> str:
        return f"{ralph} notes add --store {store} --name {NAME} --iteration {n}"

    def task(n: int, key: str) -> str:
        return (f'ID=$({ralph} notes list --store {store} --name {NAME} --open --type '
                f'remaining --json | {FIRST_ID} {key}.txt)\n'
                f'P=$({notes(n)} --type in_progress --resolves "$ID" "{TASKS[key]}" | '
                f"{NOTE_ID})\n"
                f"printf {key} > {key}.txt\n"
                f'{notes(n)} --type completed --resolves "$P" "Created {key}.txt containing '
                f'{key}"\n')

    steps = {
        1: "".join(f'{notes(1)} --type remaining "{text}"\n' for text in TASKS.values()),
        2: task(2, "a"),
        3: task(3, "b") + f"{ralph} nu done --store {store} --name {NAME}\n",
    }
    answers = {1: "Added the spec's two tasks as remaining notes.",
               2: "Task a is done: a.txt contains a.",
               3: "Task b is done: b.txt contains b. Every task is done: completion claimed."}
    # The prompt shows the command for adding a note of this iteration just so.
    shown = {1: "remaining", 2: "in_progress --resolves ID", 3: "in_progress --resolves ID"}
    return {"default": {"text": "OK"}, "rules": [
        {"name": f"iteration{n}",
         "match": {"user_regex": f"^{re.escape(first_line(n))}",
                   "user": f"{notes(n)} --type {shown[n]}"},
         "reply": {"shell": "set -e\n" + steps[n]},
         "then": [{"text": answers[n]}]} for n in steps]}


class WatchingFakeLLM(FakeLLM):
    """The fake model, looking at the running session before it answers iteration 3's first
    request (the iteration waits for the answer, its server too)."""

    def __init__(self, scenario: dict[str, Any], root: Path, port: int, marker: str) -> None:
        super().__init__(scenario)
        self.root = root
        self.opencode_port = port
        self.marker = marker
        self.seen: dict[str, Any] | None = None
        self._looking = threading.Lock()  # requests are answered in threads of their own

    def _choose(self, view: RequestView) -> tuple[str, Reply]:
        if (view.last_user_text or "").startswith(first_line(3)):
            with self._looking:
                if self.seen is None:
                    self.seen = self._look()
        return super()._choose(view)

    def _look(self) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        try:
            direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
            with direct.open(f"http://127.0.0.1:{self.opencode_port}/session",
                             timeout=30) as answer:
                seen["sessions"] = json.loads(answer.read())
        except (OSError, ValueError) as exc:
            seen["sessions_error"] = repr(exc)
        state = json.loads((self.root / ".ralph" / "state.json").read_text())
        seen["active_run"] = state.get("active_run")
        seen["marked"] = marked(self.marker)
        return seen


def marked(marker: str) -> dict[int, str]:
    """Running processes whose environment has the marker (pid: command line)."""
    needle = f"{MARKER}={marker}".encode()
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            if needle not in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                continue
            state = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if state not in (b"Z", b"X"):
            found[int(entry)] = cmdline.replace(b"\0", b" ").decode(errors="replace").strip()
    return found


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def make_project(root: Path, argv: list[str], env: dict[str, str]) -> None:
    """A git repository with Ralph's files (`ralph init`'s), the spec, opencode as agent and
    the gates; committed."""
    root.mkdir(parents=True, exist_ok=True)
    for args in (["init", "-q"], ["config", "user.name", "e2e"],
                 ["config", "user.email", "e2e@localhost"]):
        git(root, *args)
    scaffold(root, "md", False)
    (root / "specs").mkdir()
    (root / "specs" / "SPEC.md").write_text(SPEC)
    agent = {"argv": argv, "env": env, "timeout_seconds": 240}
    toml = ('[loop]\ndefault_agent = "opencode"\n\n[agents.opencode]\n'
            + "".join(f"{key} = {toml_value(value)}\n" for key, value in agent.items())
            + f"\n[gates]\ncommands = {json.dumps(GATES)}\n")
    (root / "ralph.toml").write_text(toml)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "e2e project")


def main() -> int:
    args = argparse.ArgumentParser()
    args.add_argument("--project", required=True, type=Path)
    args.add_argument("--out", required=True, type=Path)
    opts = args.parse_args()
    if not loopback_only():
        print("refusing to run: a network interface other than lo is visible", file=sys.stderr)
        return 3
    root: Path = opts.project.resolve()
    home = root.parent / "home"
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    store = root / ".ralph" / "store"
    ralph = ralph_command()
    port = free_port()
    marker = uuid.uuid4().hex
    fake = WatchingFakeLLM(scenario(ralph, shlex.quote(str(store))), root, port, marker)
    with fake:
        cli = setup("opencode", fake.url, home)
        cli.write_files()
        os.environ.clear()
        os.environ.update(base_env(home))
        os.environ[MARKER] = marker
        make_project(root, cli.argv, cli.env)
        started = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-m", "ralph", "nu", "--name", NAME, "--spec", "specs/SPEC.md",
             "--model", MODELS["opencode"], "--port", str(port), "--iterations", "3"],
            cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, start_new_session=True)
        try:  # within pytest's timeout (120 s), so that the driver still reports
            stdout, stderr = proc.communicate(timeout=100)
        except subprocess.TimeoutExpired:  # stopped as Ctrl-C would (exit 130), then killed
            proc.terminate()
            try:
                stdout, stderr = proc.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                stdout, stderr = proc.communicate()
        result: dict[str, Any] = {
            "exit": proc.returncode, "stdout": stdout, "stderr": stderr, "pid": proc.pid,
            "port": port, "marker": marker, "ralph": ralph, "store": str(store),
            "seconds": round(time.monotonic() - started, 1), "seen": fake.seen}
        with Store(store) as opened:
            result["events"] = [f.to_dict() for f in opened.read()]
            result["notes"] = [n.to_dict() for n in list_notes(opened, session=NAME)]
        server_log = root / ".ralph" / "logs" / "server.log"
        result["server_log"] = server_log.read_text() if server_log.is_file() else None
        result["commits"] = git(root, "log", "--format=%s").splitlines()
        result["file_commits"] = {
            name: git(root, "log", "--format=%s", "--", name).splitlines()
            for name in ("a.txt", "b.txt")}
        result["tracked"] = git(root, "ls-files").splitlines()
        result["dirty"] = git(root, "status", "--porcelain", "--untracked-files=all"
                              ).splitlines()
        result["requests"] = [r.to_dict() for r in fake.requests]
    opts.out.write_text(json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())

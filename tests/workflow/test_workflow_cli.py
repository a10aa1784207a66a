"""`ralph workflow start|resume|answer|stop|status|list` run as child processes on a scratch
project whose roles are all played by the scripted fake (ralph.testing.fake_roles): exit
codes, what goes to stdout and what to stderr, bad input refused with one line and nothing
written, and a session stopped by Ctrl-C, by `ralph workflow stop` or by a SIGKILL of its
process taken up again by `resume`, leaving no agent process behind."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.cli.helpers import RALPH, TIMEOUT, WITH_SIGINT, Result, assert_error, run_ralph
from tests.loop.conftest import git, kill_guard_of, new_repository
from tests.proc.helpers import group_members

REQUEST = "Write greet.py that prints hello"
GREET = "print('hello')\n"
HONEST: dict[str, Any] = {"executor": [{"write": {"greet.py": GREET}}]}
# The executor's first call hangs once it has marked its task [/]; its next call finishes.
HANGING: dict[str, Any] = {"executor": [{"hang": 120}, {"write": {"greet.py": GREET}}]}
BLOCKERS = ["Which greeting should it print?", "Python 2 or 3?"]
BLOCKING: dict[str, Any] = {
    "planner": {"INITIALIZE": [{"status": "needs_clarification", "blockers": BLOCKERS}]},
    "executor": [{"write": {"greet.py": GREET}}]}
SESSION_ID = re.compile(r"\d{6}-\d{6}")
POLL_S = 0.05


# -- the project ---------------------------------------------------------------------------------


@dataclass
class Running:
    """A `ralph workflow ...` child process, its stdout and stderr going to files."""

    proc: subprocess.Popen[bytes]
    out_path: Path
    err_path: Path

    def wait(self, timeout: float = TIMEOUT) -> Result:
        code = self.proc.wait(timeout=timeout)
        return Result(code, self.out_path.read_text(), self.err_path.read_text())

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise AssertionError(f"ralph exited early with {self.proc.returncode}:\n"
                                 f"{self.out_path.read_text()}\n{self.err_path.read_text()}")


@dataclass
class Project:
    """A git repository with `ralph init`'s files, the fake playing every role (agent `fake`,
    loop.default_agent) from the script at `script_path`, outside the tree."""

    root: Path
    script_path: Path
    started: list[Running] = field(default_factory=list)
    groups: list[int] = field(default_factory=list)  # agent process groups seen

    def script(self, script: dict[str, Any]) -> None:
        """The fake's script, its call counts reset."""
        self.script_path.write_text(json.dumps(script))
        self.script_path.with_name(self.script_path.name + ".calls.json").unlink(
            missing_ok=True)

    def ralph(self, *args: str, input: bytes | None = None) -> Result:
        return run_ralph(*args, input=input, cwd=self.root)

    def workflow(self, *args: str, input: bytes | None = None) -> Result:
        return self.ralph("workflow", *args, input=input)

    def spawn(self, *args: str) -> Running:
        """`ralph workflow ARGS...` in the background, in a process group of its own (a
        terminal's foreground group: SIGINT to it is a Ctrl-C), SIGINT at its default."""
        n = len(self.started)
        out_path, err_path = (self.root.parent / f"run{n}.out", self.root.parent / f"run{n}.err")
        with out_path.open("wb") as out, err_path.open("wb") as err:
            proc = subprocess.Popen([*WITH_SIGINT, *RALPH, "workflow", *args], cwd=self.root,
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                    start_new_session=True)
        running = Running(proc, out_path, err_path)
        self.started.append(running)
        return running

    def status(self, session_id: str | None = None) -> dict[str, Any]:
        result = self.workflow("status", "--json", *([session_id] if session_id else []))
        assert result.code == 0, result
        found = result.json()
        assert isinstance(found, dict)
        return found

    def frames(self, stream: str, topic: str | None = None) -> list[dict[str, Any]]:
        result = self.ralph("store", "cat", "--store", str(self.root / ".ralph" / "store"),
                            "--stream", stream, *(["--topic", topic] if topic else []))
        assert result.code == 0, result
        return result.frames()

    def events(self, session_id: str, topic: str | None = None) -> list[dict[str, Any]]:
        return self.frames(f"workflows/{session_id}", topic)

    def sessions(self) -> list[str]:
        base = self.root / ".ralph-sessions"
        return sorted(p.name for p in base.iterdir() if p.is_dir()) if base.is_dir() else []

    def files(self) -> dict[str, bytes]:
        """Every file of the project (.git's included) by path, but Ralph's caches, the lock
        files (they hold their last holder's pid) and the store's own files."""
        return {str(p.relative_to(self.root)): p.read_bytes()
                for p in sorted(self.root.rglob("*")) if p.is_file()
                and not str(p.relative_to(self.root)).startswith((".ralph/cache/",
                                                                  ".ralph/store/"))
                and p.suffix != ".lock"}

    def snapshot(self) -> tuple[dict[str, bytes], str]:
        """What a refused command must leave as it was: the files and every stored event."""
        listed = self.ralph("store", "cat", "--store", str(self.root / ".ralph" / "store"))
        assert listed.code == 0, listed
        return self.files(), listed.out

    def agent_pgid(self, agent_session: str) -> int:
        """The process group of an agent session (recorded in its `session.process`)."""
        found = self.frames(f"sessions/{agent_session}", "session.process")
        assert len(found) == 1, found
        pgid = found[0]["meta"]["pgid"]
        assert isinstance(pgid, int)
        self.groups.append(pgid)
        return pgid

    def wait_for_call(self, running: Running, role: str) -> dict[str, Any]:
        """Wait until the agent of `role` runs (the call recorded as running with its
        process; the executor's also marked its task [/]); the session's status then."""
        deadline = time.monotonic() + TIMEOUT
        while True:
            running.check_alive()
            sessions = self.sessions()
            progress = (self.root / ".ralph-sessions" / sessions[-1] / "progress.md"
                        if sessions else None)
            if role != "executor" or (progress is not None and progress.is_file()
                                      and "- [/] task-1" in progress.read_text()):
                result = self.workflow("status", "--json")
                call = result.json()["last_call"] if result.code == 0 else None
                if call and call["role"] == role and call["outcome"] == "running" and \
                        self.frames(f"sessions/{call['agent_session']}", "session.process"):
                    found: dict[str, Any] = result.json()
                    return found
            assert time.monotonic() < deadline, f"the {role} never started"
            time.sleep(POLL_S)

    def cleanup(self) -> None:
        """SIGKILL whatever this test started and is still running (by pid and group)."""
        for running in self.started:
            if running.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(running.proc.pid, signal.SIGKILL)
                running.proc.wait(timeout=TIMEOUT)
        for pgid in self.groups:
            if group_members(pgid):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pgid, signal.SIGKILL)


def make_project(base: Path, script: dict[str, Any] | None = None) -> Project:
    root = base / "proj"
    new_repository(root)
    project = Project(root, base / "script.json")
    project.script(script if script is not None else HONEST)
    toml = (root / "ralph.toml").read_text()
    assert 'default_agent = "codex"' in toml
    argv = [sys.executable, "-m", "ralph.testing.fake_roles", "--script",
            str(project.script_path)]
    toml = toml.replace('default_agent = "codex"', 'default_agent = "fake"')
    (root / "ralph.toml").write_text(toml + f"\n[agents.fake]\nargv = {json.dumps(argv)}\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "setup")
    return project


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    made = make_project(tmp_path)
    try:
        yield made
    finally:
        made.cleanup()


def session_of(result: Result, state: str, *, line: int = -1) -> str:
    """The session id stdout's last line (or `line`) names with `state` (`<id> STATE: why`)."""
    lines = result.out.splitlines()
    assert lines, result
    match = re.fullmatch(rf"({SESSION_ID.pattern}) {state}: .+", lines[line])
    assert match, result
    return match.group(1)


def wait_until_gone(pgid: int) -> None:
    deadline = time.monotonic() + TIMEOUT
    while group_members(pgid):
        assert time.monotonic() < deadline, f"agent group {pgid} still runs"
        time.sleep(POLL_S)


# -- start to COMPLETE ---------------------------------------------------------------------------


def test_start_runs_the_request_to_complete_and_shows_each_step(project: Project) -> None:
    done = project.workflow("start", REQUEST)
    assert done.code == 0, done
    assert len(done.out.splitlines()) == 1, done.out
    sid = session_of(done, "COMPLETE")
    assert project.sessions() == [sid]
    lines = done.err.splitlines()
    assert "Traceback" not in done.err
    assert lines[0] == f"workflow {sid}: {REQUEST}"
    assert lines[1] == "  agents: planner fake, executor fake, reviewer fake, questioner fake"
    assert "-> INITIALIZING: a new session" in lines
    assert any(line.startswith("-> EXECUTING") for line in lines), done.err
    states = [line for line in lines if line.startswith("-> ")]
    assert states[-1].startswith("-> COMPLETE: "), done.err
    for role in ("planner INITIALIZE", "executor task-1", "reviewer task-1", "planner UPDATE"):
        assert any(line.startswith(f"   {role}: fake working, session ses_")
                   for line in lines), (role, done.err)
    assert "   task-1 [P] -> [x]" in lines
    commits = [line for line in lines if line.startswith("   commit ")]
    assert any(re.fullmatch(r"   commit [0-9a-f]{10} ralph: task-1 .+", line)
               for line in commits), done.err
    # the work is committed, the tree left clean
    assert (project.root / "greet.py").read_text() == GREET
    assert any(subject.startswith("ralph: task-1 ")
               for subject in git(project.root, "log", "--format=%s").splitlines())
    assert git(project.root, "status", "--porcelain") == ""
    status = project.status()
    assert (status["session_id"], status["status"], status["state"]) == (sid, "complete",
                                                                         "COMPLETE")


def test_quiet_shows_nothing_while_it_runs(project: Project) -> None:
    done = project.workflow("start", REQUEST, "--quiet")
    assert done.code == 0, done
    assert done.err == ""
    assert len(done.out.splitlines()) == 1
    session_of(done, "COMPLETE")


def test_start_dash_reads_the_request_from_stdin(project: Project) -> None:
    text = "Write greet.py\nthat prints hello (from stdin)"
    done = project.workflow("start", "-", "-q", input=text.encode())
    assert done.code == 0, done
    sid = session_of(done, "COMPLETE")
    assert project.status(sid)["request"] == text
    assert project.events(sid, "workflow.started")[0]["meta"]["request"] == text


def test_a_dirty_tree_is_refused_unless_allow_dirty(project: Project) -> None:
    (project.root / "notes.txt").write_text("mine\n")
    before = project.snapshot()
    refused = project.workflow("start", REQUEST)
    assert refused.code == 2, refused
    assert_error(refused, "changes Ralph did not make", "notes.txt", "--allow-dirty")
    assert not (project.root / ".ralph-sessions").exists()
    assert project.snapshot() == before
    done = project.workflow("start", REQUEST, "-q", "--allow-dirty")
    assert done.code == 0, done
    session_of(done, "COMPLETE")
    log = git(project.root, "log", "--format=%s").splitlines()
    assert log[-2] == "ralph: changes present before run workflow", log  # first, on its own
    assert "notes.txt" in git(project.root, "show", "--name-only", "--format=", "HEAD~2")
    assert git(project.root, "status", "--porcelain") == ""


# -- status and list -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def complete_project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Project, str]:
    """A project whose one session is COMPLETE (shared: the commands run on it change
    nothing, and each test checks that)."""
    made = make_project(tmp_path_factory.mktemp("complete"))
    done = made.workflow("start", REQUEST, "-q")
    assert done.code == 0, done
    return made, session_of(done, "COMPLETE")


def test_status_as_json_and_in_words(complete_project: tuple[Project, str]) -> None:
    project, sid = complete_project
    status = project.status(sid)
    assert {"session_id", "status", "state", "tasks", "qa_cycles", "last_call",
            "violations"} <= set(status)
    assert (status["session_id"], status["status"], status["state"]) == (sid, "complete",
                                                                         "COMPLETE")
    assert status["request"] == REQUEST
    assert [(t["task_id"], t["marker"], t["attempts"]) for t in status["tasks"]] == [
        ("task-1", "[x]", 1)]
    assert (status["qa_cycles"], status["violations"], status["blockers"]) == (0, [], [])
    call = status["last_call"]
    assert (call["role"], call["mode"], call["agent"], call["outcome"]) == (
        "planner", "UPDATE", "fake", "ok")
    assert call["agent_session"].startswith("ses_")
    assert project.status() == status  # no id: the newest session

    words = project.workflow("status")
    assert (words.code, words.err) == (0, ""), words
    lines = words.out.splitlines()
    assert lines[0] == f"session {sid} (.ralph-sessions/{sid}/): complete, state COMPLETE"
    assert f"request: {REQUEST}" in lines
    assert "Q&A cycles: 0 of 3" in lines
    assert any(line.split() == ["[x]", "task-1", "1/3", *REQUEST.split()] for line in lines), \
        words.out
    assert any(line.startswith("last role call: planner UPDATE by fake, ok") for line in lines)


def test_list_shows_every_session_oldest_first(project: Project) -> None:
    # The first session completes; the second one's planner asks (call count: INITIALIZE #2).
    project.script({"planner": {"INITIALIZE": [{}, {"status": "needs_clarification",
                                                    "blockers": BLOCKERS}]},
                    "executor": [{"write": {"greet.py": GREET}}]})
    first = project.workflow("start", REQUEST, "-q")
    assert first.code == 0, first
    complete = session_of(first, "COMPLETE")
    second = project.workflow("start", "Add a farewell", "-q")
    assert second.code == 3, second
    blocked = session_of(second, "BLOCKED", line=0)
    assert project.sessions() == [complete, blocked]
    listed = project.workflow("list", "--json")
    assert (listed.code, listed.err) == (0, ""), listed
    assert [(s["session_id"], s["status"], s["state"], s["request"]) for s in listed.json()] == [
        (complete, "complete", "COMPLETE", REQUEST),
        (blocked, "blocked", "BLOCKED", "Add a farewell")]
    table = project.workflow("list")
    assert (table.code, table.err) == (0, ""), table
    rows = [line.split() for line in table.out.splitlines()]
    assert rows[0] == ["session", "status", "state", "done", "request"]
    assert rows[2] == [complete, "complete", "COMPLETE", "1/1", *REQUEST.split()]
    assert rows[3] == [blocked, "blocked", "BLOCKED", "0/1", "Add", "a", "farewell"]
    assert len(rows) == 4, table.out


def test_status_and_list_before_any_session(project: Project) -> None:
    listed = project.workflow("list")
    assert (listed.code, listed.err) == (0, ""), listed
    assert listed.out == "no workflow session yet: `ralph workflow start \"...\"` starts one\n"
    as_json = project.workflow("list", "--json")
    assert (as_json.code, as_json.json()) == (0, [])
    for args in (["status"], ["status", "--json"]):
        result = project.workflow(*args)
        assert result.code == 1
        assert_error(result, "no workflow session yet")


# -- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "stdin", "words"), [
    pytest.param(["start", ""], None, ["the request is empty"], id="empty"),
    pytest.param(["start", "  \n\t"], None, ["the request is empty"], id="blank"),
    pytest.param(["start", "-"], b"", ["the request is empty"], id="empty-stdin"),
    pytest.param(["start", "-"], b"\xff\xfe", ["not valid UTF-8"], id="stdin-not-utf8"),
    pytest.param(["start", REQUEST, "--agent", "nope"], None, ["unknown agent 'nope'"],
                 id="unknown-agent"),
    pytest.param(["start", REQUEST, "<role-agent>"], None,
                 ["workflow.roles.planner.agent", "unknown agent 'nope'"],
                 id="unknown-role-agent"),
])
def test_a_refused_start_writes_nothing(project: Project, args: list[str], stdin: bytes | None,
                                        words: list[str]) -> None:
    if "<role-agent>" in args:
        args = [arg for arg in args if arg != "<role-agent>"]
        toml = project.root / "ralph.toml"
        toml.write_text(toml.read_text() + '\n[workflow.roles.planner]\nagent = "nope"\n')
        git(project.root, "commit", "-q", "-am", "planner nope")
    before = project.snapshot()
    result = project.workflow(*args, input=stdin)
    assert result.code == 2, result
    assert_error(result, *words)
    assert not (project.root / ".ralph-sessions").exists()
    assert project.snapshot() == before
    assert before[1] == ""  # no event stored


@pytest.mark.parametrize(("args", "code", "words"), [
    # exit 1: no session answers; exit 2: bad input
    pytest.param(["resume", "999999-999999"], 1, ["no workflow session '999999-999999'"],
                 id="resume-unknown"),
    pytest.param(["resume", "not-an-id"], 2, ["invalid session id 'not-an-id'"],
                 id="resume-not-an-id"),
    pytest.param(["resume", "../<sid>"], 2, ["invalid session id"], id="resume-path"),
    pytest.param(["resume", "<sid>"], 2, ["<sid>", "complete", "nothing to resume"],
                 id="resume-complete"),
    pytest.param(["resume"], 1, ["no workflow session to resume"], id="resume-none"),
    pytest.param(["answer", "<sid>", ""], 2, ["the answer is empty"], id="answer-empty"),
    pytest.param(["answer", "<sid>", "more"], 2, ["<sid>", "not blocked", "COMPLETE"],
                 id="answer-complete"),
    pytest.param(["answer", "999999-999999", "x"], 1, ["no workflow session '999999-999999'"],
                 id="answer-unknown"),
    pytest.param(["answer", "not-an-id", "x"], 2, ["invalid session id"], id="answer-not-an-id"),
    pytest.param(["status", "999999-999999"], 1, ["no workflow session '999999-999999'"],
                 id="status-unknown"),
    pytest.param(["status", "not-an-id", "--json"], 2, ["invalid session id"],
                 id="status-not-an-id"),
    pytest.param(["stop"], 1, ["no workflow session is running"], id="stop-nothing-runs"),
    pytest.param(["stop", "<sid>"], 1, ["<sid>", "not running"], id="stop-complete"),
    pytest.param(["stop", "999999-999999"], 1, ["no workflow session '999999-999999'"],
                 id="stop-unknown"),
])
def test_bad_input_on_a_complete_session_is_one_line_and_changes_nothing(
        complete_project: tuple[Project, str], args: list[str], code: int,
        words: list[str]) -> None:
    project, sid = complete_project
    args = [arg.replace("<sid>", sid) for arg in args]
    words = [word.replace("<sid>", sid) for word in words]
    before = project.snapshot()
    result = project.workflow(*args)
    assert result.code == code, result
    assert_error(result, *words)
    assert project.snapshot() == before


def test_outside_a_project_nothing_is_made(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    for args in (["start", REQUEST], ["resume"], ["stop"], ["status"], ["list"]):
        result = run_ralph("workflow", *args, "--root", str(empty), cwd=empty)
        assert result.code == 2, (args, result)
        assert_error(result, "no Ralph project", "ralph init")
    assert list(empty.iterdir()) == []


@pytest.mark.parametrize(("edit", "words"), [
    pytest.param(("- [ ] task-1 (Not Started)\n",
                  "- [ ] task-1 (Not Started)\n- [ ] task-9 (Not Started)\n"),
                 ["progress.md", "task-9 is not in tasks.md"], id="task-missing-from-tasks.md"),
    pytest.param(("- [ ] task-1", "- [?] task-1"), ["progress.md", "[?]"],
                 id="unknown-marker"),
])
def test_a_session_edited_by_hand_into_an_invalid_state_is_refused(
        project: Project, edit: tuple[str, str], words: list[str]) -> None:
    """resume and answer refuse it with one line naming the file and the problem, and
    write nothing; status shows the problem."""
    project.script(BLOCKING)
    asked = project.workflow("start", REQUEST, "-q")
    assert asked.code == 3, asked
    sid = session_of(asked, "BLOCKED", line=0)
    progress = project.root / ".ralph-sessions" / sid / "progress.md"
    good = progress.read_text()
    assert edit[0] in good
    progress.write_text(good.replace(*edit))
    before = project.snapshot()
    for args in (["resume", sid], ["answer", sid, "Print hello, in Python 3"]):
        result = project.workflow(*args)
        assert result.code == 2, (args, result)
        assert_error(result, *words)
    assert project.snapshot() == before
    problem = project.status(sid)["problem"]
    assert all(word in problem for word in words), problem
    progress.write_text(good)
    assert project.status(sid)["problem"] is None


# -- BLOCKED, and the answer ---------------------------------------------------------------------


def test_blocked_lists_the_blockers_and_an_answer_completes_it(project: Project) -> None:
    project.script(BLOCKING)
    asked = project.workflow("start", REQUEST)
    assert asked.code == 3, asked
    lines = asked.out.splitlines()
    sid = session_of(asked, "BLOCKED", line=0)
    assert lines[1:] == [f"  - {BLOCKERS[0]}", f"  - {BLOCKERS[1]}",
                         f"answer with: ralph workflow answer {sid} \"...\""]
    assert "-> BLOCKED" in asked.err
    status = project.status(sid)
    assert (status["status"], status["state"], status["blockers"]) == ("blocked", "BLOCKED",
                                                                       BLOCKERS)
    words = project.workflow("status", sid)
    assert words.code == 0, words
    assert f"  - {BLOCKERS[1]}" in words.out.splitlines()
    assert f"blockers (answer with `ralph workflow answer {sid} \"...\"`):" in words.out
    answered = project.workflow("answer", sid, "Print hello, in Python 3")
    assert answered.code == 0, answered
    assert session_of(answered, "COMPLETE") == sid
    assert "   answered: Print hello, in Python 3" in answered.err.splitlines()
    assert f"workflow {sid} taken up again in BLOCKED" in answered.err.splitlines()
    assert [e["meta"]["text"] for e in project.events(sid, "workflow.answered")] == [
        "Print hello, in Python 3"]
    assert project.status(sid)["status"] == "complete"
    assert (project.root / "greet.py").read_text() == GREET


def test_answer_reads_stdin_for_dash(project: Project) -> None:
    project.script(BLOCKING)
    asked = project.workflow("start", REQUEST, "-q")
    assert asked.code == 3, asked
    sid = session_of(asked, "BLOCKED", line=0)
    answered = project.workflow("answer", sid, "-", "-q", input=b"Python 3,\nplease")
    assert answered.code == 0, answered
    assert [e["meta"]["text"] for e in project.events(sid, "workflow.answered")] == [
        "Python 3,\nplease"]


# -- stopping ------------------------------------------------------------------------------------


def _executor_calls(project: Project, sid: str) -> list[dict[str, Any]]:
    return [e["meta"] for e in project.events(sid, "workflow.role_call")
            if e["meta"]["role"] == "executor"]


def test_ctrl_c_is_a_recorded_stop_and_resume_goes_on(project: Project) -> None:
    project.script(HANGING)
    running = project.spawn("start", REQUEST)
    status = project.wait_for_call(running, "executor")
    sid = status["session_id"]
    assert status["status"] == "running"
    agent_session = status["last_call"]["agent_session"]
    pgid = project.agent_pgid(agent_session)
    assert group_members(pgid)
    os.killpg(running.proc.pid, signal.SIGINT)  # Ctrl-C: to the terminal's foreground group
    stopped = running.wait()
    assert stopped.code == 130, stopped
    assert stopped.out == (f"{sid} stopped (ctrl-c) in EXECUTING: `ralph workflow resume "
                           f"{sid}` goes on\n")
    assert "Traceback" not in stopped.err
    assert "stopped by ctrl-c in EXECUTING" in stopped.err.splitlines()
    assert not group_members(pgid)  # the agent's whole group ended with the CLI
    assert [e["meta"]["by"] for e in project.events(sid, "workflow.stopped")] == ["ctrl-c"]
    assert [e["meta"]["role"] for e in project.events(sid, "workflow.role_stopped")] == [
        "executor"]
    shown = project.ralph("agent", "show", agent_session, "--json")
    assert shown.code == 0, shown
    assert shown.json()["status"] == "stopped"
    after = project.status(sid)
    assert (after["status"], after["state"]) == ("stopped", "EXECUTING")
    assert after["last_call"]["outcome"] == "stopped"

    resumed = project.workflow("resume", sid)
    assert resumed.code == 0, resumed
    assert session_of(resumed, "COMPLETE") == sid
    assert resumed.err.splitlines()[0] == f"workflow {sid} taken up again in EXECUTING"
    calls = _executor_calls(project, sid)
    assert len(calls) == 2 and calls[0]["call_id"] == calls[1]["call_id"], calls
    assert calls[1]["agent_session"] != agent_session
    assert (project.root / "greet.py").read_text() == GREET
    assert project.status(sid)["tasks"][0]["marker"] == "[x]"


def test_stop_from_another_terminal(project: Project) -> None:
    project.script(HANGING)
    running = project.spawn("start", REQUEST, "-q")
    status = project.wait_for_call(running, "executor")
    sid = status["session_id"]
    pgid = project.agent_pgid(status["last_call"]["agent_session"])
    for args in (["start", "Something else"], ["resume", sid], ["answer", sid, "x"]):
        refused = project.workflow(*args)  # one session at a time
        assert refused.code == 2, (args, refused)
        assert_error(refused, "another workflow session is active")
    stop = project.workflow("stop")
    assert stop.code == 0, stop
    assert stop.out == f"{sid} stopped (EXECUTING)\n"
    assert stop.err == ""
    stopped = running.wait()
    assert stopped.code == 130, stopped
    assert stopped.out == (f"{sid} stopped (user) in EXECUTING: `ralph workflow resume "
                           f"{sid}` goes on\n")
    assert stopped.err == ""  # --quiet
    assert not group_members(pgid)
    assert [e["meta"]["by"] for e in project.events(sid, "workflow.stop_requested")] == ["user"]
    assert [e["meta"]["by"] for e in project.events(sid, "workflow.stopped")] == ["user"]
    again = project.workflow("stop")
    assert again.code == 1
    assert_error(again, "no workflow session is running")
    resumed = project.workflow("resume", "-q")  # no id: the stopped session
    assert resumed.code == 0, resumed
    assert session_of(resumed, "COMPLETE") == sid


def test_stop_reports_the_session_stopped_only_once_it_has_let_go(project: Project) -> None:
    """`stop` returns once the running process has let the session go, and says `stopped`.

    The stopped step's work is committed after `workflow.stopped` is recorded, so a slow
    commit (here a pre-commit hook that waits for `stop` to answer, 3 s at most) keeps the
    session's owner lock held past that event: `stop` must wait for the lock, not report
    the session still `running` (exit 1, "did not stop within 30 s") as soon as it sees the
    event."""
    project.script(HANGING)
    running = project.spawn("start", REQUEST, "-q")
    status = project.wait_for_call(running, "executor")
    sid = status["session_id"]
    stop_out = project.root.parent / "stop.out"
    hook = project.root / ".git" / "hooks" / "pre-commit"
    hook.write_text(f"#!/bin/sh\ni=0\nwhile [ ! -s '{stop_out}' ] && [ $i -lt 60 ]; do "
                    "sleep 0.05; i=$((i+1)); done\n")
    hook.chmod(0o755)
    with stop_out.open("wb") as out:
        stop = subprocess.run([*RALPH, "workflow", "stop", sid], cwd=project.root,
                              stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.PIPE,
                              timeout=TIMEOUT, check=False)
    assert running.wait().code == 130
    assert (stop.returncode, stop_out.read_text(), stop.stderr) == (
        0, f"{sid} stopped (EXECUTING)\n", b"")


@pytest.mark.parametrize(("role", "guard"), [
    ("executor", "guard-alive"), ("executor", "guard-killed"), ("reviewer", "guard-killed")])
def test_resume_after_the_process_was_killed(project: Project, role: str, guard: str) -> None:
    """SIGKILL of the process running the session mid-call: the session reads `interrupted`,
    and resume runs the interrupted call again (same call id, a new agent session) and
    nothing that finished twice. With the orchestrator's guard killed first, the role's agent
    outlives it, and resume ends it."""
    write = {"write": {"greet.py": GREET}}
    project.script({"executor": [write], role: [{"hang": 120}, write if role == "executor"
                                                else {}]})
    running = project.spawn("start", REQUEST, "-q")
    status = project.wait_for_call(running, role)
    sid = status["session_id"]
    agent_session = status["last_call"]["agent_session"]
    call_id = status["last_call"]["call_id"]
    pgid = project.agent_pgid(agent_session)
    if guard == "guard-killed":
        started = project.frames(f"sessions/{agent_session}", "session.started")
        kill_guard_of(started[0]["meta"]["owner"])
    os.kill(running.proc.pid, signal.SIGKILL)
    assert running.wait().code == -signal.SIGKILL
    if guard == "guard-killed":
        assert group_members(pgid), "the killed process's agent should still run"
    else:
        wait_until_gone(pgid)  # the guard's work
    state = {"executor": "EXECUTING", "reviewer": "REVIEWING"}[role]
    interrupted = project.status(sid)
    assert (interrupted["status"], interrupted["state"]) == ("interrupted", state)
    assert (interrupted["last_call"]["call_id"], interrupted["last_call"]["outcome"]) == (
        call_id, "interrupted")

    resumed = project.workflow("resume", "-q")
    assert resumed.code == 0, resumed
    assert session_of(resumed, "COMPLETE") == sid
    assert not group_members(pgid)  # what the killed process left was ended
    calls = [e["meta"] for e in project.events(sid, "workflow.role_call")]
    again = [c for c in calls if c["role"] == role]
    assert [c["call_id"] for c in again] == [call_id, call_id], again
    assert again[0]["agent_session"] == agent_session
    assert again[1]["agent_session"] not in (None, agent_session)
    done_before = {"executor": ["planner"], "reviewer": ["planner", "executor"]}[role]
    assert [c["role"] for c in calls if c["role"] in done_before and c["mode"] != "UPDATE"] \
        == done_before, calls  # the planner's INITIALIZE (and the executor) ran once
    assert project.events(sid, "workflow.stopped") == []
    shown = project.ralph("agent", "show", agent_session, "--json")
    assert shown.code == 0, shown
    assert shown.json()["status"] == "lost"
    final = project.status(sid)
    assert (final["status"], final["tasks"][0]["marker"]) == ("complete", "[x]")
    assert (project.root / "greet.py").read_text() == GREET
    assert [line for line in git(project.root, "log", "--format=%s").splitlines()
            if line.startswith("ralph: task-1 ")] == [f"ralph: task-1 {REQUEST}"]
    assert git(project.root, "status", "--porcelain") == ""

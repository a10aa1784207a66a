"""`ralph log`: the latest run by default, `--run ID`, `--json` (the frames themselves),
`--verbose`, and `--follow` across processes; a project with nothing recorded says so and
creates nothing. A run reads the same in `ralph log` as it did live."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import TracebackType
from typing import Any

from ralph.store import Store
from tests.cli.helpers import RALPH, TIMEOUT, Result, assert_error, check_frame, json_lines
from tests.loop import conftest as loop_fixtures
from tests.loop.conftest import Project
from tests.loop.test_cli_loop import wait_until
from tests.proc.helpers import group_members

project = loop_fixtures.project  # the loop tests' scratch project (a fixture)

TICK: dict[str, Any] = {"tick": True, "print": ["ticked it"]}
_STAMP = re.compile(r"^\d\d:\d\d:\d\d ")


def ralph(root: Path, *args: str) -> Result:
    proc = subprocess.run([*RALPH, *args], cwd=root, stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=TIMEOUT, check=False)
    return Result(proc.returncode, proc.stdout.decode(), proc.stderr.decode(), proc.stdout)


class LogFollower:
    """`ralph log --follow ARGS...` in its own process group; stdout read line by line."""

    def __init__(self, root: Path, *args: str) -> None:
        self.proc = subprocess.Popen([*RALPH, "log", "--follow", *args], cwd=root,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, start_new_session=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.decode())
        self.lines.put("")

    def wait_for(self, pattern: str, timeout: float = TIMEOUT) -> str:
        """The first line (from now on) matching `pattern`."""
        regex = re.compile(pattern)
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no line matching {pattern!r}; saw {self.seen}") from None
            assert line, f"the follower ended (exit {self.proc.poll()}); saw {self.seen}"
            self.seen.append(line)
            if regex.search(line):
                return line

    def rest(self) -> list[str]:
        """After the process ended: the lines not read yet."""
        self._reader.join(timeout=TIMEOUT)
        lines = []
        while line := self.lines.get(timeout=TIMEOUT):
            lines.append(line)
        return lines

    def stop(self) -> int:
        """SIGTERM the group; wait for the process (it must go)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
        return self.proc.wait(timeout=TIMEOUT)

    def __enter__(self) -> LogFollower:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=TIMEOUT)
        self._reader.join(timeout=TIMEOUT)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()


def unstamped(text: str) -> list[str]:
    """Lines without their `HH:MM:SS ` (every rendered line has one)."""
    out = []
    for line in text.splitlines():
        assert _STAMP.match(line), line
        out.append(line[9:])
    return out


# -- nothing recorded --------------------------------------------------------------------------


def test_an_initialised_project_has_no_run_and_log_creates_nothing(project: Project) -> None:
    store = project.root / ".ralph" / "store"
    before = sorted(store.rglob("*")) if store.exists() else None
    result = ralph(project.root, "log")
    assert (result.code, result.out) == (0, "")
    assert result.err == "no run recorded yet\n"
    after = sorted(store.rglob("*")) if store.exists() else None
    assert after == before  # not even the store's own files


def test_a_project_without_a_store_has_no_run_and_log_creates_none(project: Project) -> None:
    store = project.root / ".ralph" / "store"
    shutil.rmtree(store, ignore_errors=True)
    for args in ((), ("--json",), ("--verbose",)):
        result = ralph(project.root, "log", *args)
        assert (result.code, result.out, result.err) == (0, "", "no run recorded yet\n")
    assert not store.exists()


# -- the latest run, a named run, JSON ---------------------------------------------------------


def test_log_shows_the_latest_run_and_run_picks_one(project: Project) -> None:
    project.plan({"tasks": {"1": [{"print": ["first attempt words"]},
                                  {**TICK, "print": ["second attempt words"]}]}})
    first = ralph(project.root, "step", "--json")
    second = ralph(project.root, "step", "--json")
    assert (first.code, second.code) == (1, 0), second.err
    first_run = first.json()["run_id"]

    latest = ralph(project.root, "log")
    assert latest.code == 0 and latest.err == ""
    lines = unstamped(latest.out)
    assert lines[0] == f"step {second.json()['run_id']} with agent fake"
    assert "iteration 2  task 1: First task  (attempt 1-2)" in lines
    assert "    second attempt words" in lines
    assert not any("first attempt words" in line for line in lines)
    assert "  verified done  (" in "\n".join(lines)
    assert re.search(r"log \.ralph/logs/000002\.log  commit [0-9a-f]{10}", latest.out)
    # a step's log has no run-ended line and no summary
    assert "run ended" not in latest.out and "tokens in" not in latest.out

    named = ralph(project.root, "log", "--run", first_run)
    assert named.code == 0
    assert "    first attempt words" in unstamped(named.out)
    assert "iteration 1  task 1: First task  (attempt 1-1)" in named.out
    assert "second attempt words" not in named.out


def test_an_unknown_run_is_one_error_line(project: Project) -> None:
    project.plan({"default": TICK})
    assert ralph(project.root, "step").code == 0
    result = ralph(project.root, "log", "--run", "run_nosuchrun")
    assert result.code == 1
    assert_error(result, "no run", "run_nosuchrun")


def test_json_prints_the_runs_frames(project: Project) -> None:
    project.plan({"default": TICK})
    step = ralph(project.root, "step", "--json")
    run_id = step.json()["run_id"]
    result = ralph(project.root, "log", "--json")
    assert result.code == 0 and result.err == ""
    frames = [check_frame(f) for f in json_lines(result.out)]
    assert {f["stream"] for f in frames} == {f"runs/{run_id}"}
    topics = [f["topic"] for f in frames]
    assert topics[0] == "run.started" and topics[-1] == "run.stopped"
    assert "agent.output" in topics and topics.count("iteration.finished") == 1
    assert [f["seq"] for f in frames] == sorted(f["seq"] for f in frames)
    assert all(f["meta"]["run_id"] == run_id for f in frames)
    again = ralph(project.root, "log", "--json", "--run", run_id)
    assert again.out == result.out


def test_a_run_reads_the_same_in_the_log_as_it_did_live(project: Project) -> None:
    project.plan({"tasks": {"1": [TICK], "2": [{"print": ["not this time"]}]}})
    project.config(gates=["true"])
    project.commit("gate")
    live = ralph(project.root, "run", "--max-iterations", "2")
    assert live.code == 1, live.err
    later = ralph(project.root, "log")
    assert later.code == 0
    assert later.out == live.err  # same lines, same event times, same summary table
    assert "run ended: iteration limit reached" in later.out
    assert "tasks: 1 done, 0 blocked, 2 open of 3; iterations: 2" in later.out


def test_verbose_adds_agent_details(project: Project) -> None:
    project.plan({"default": TICK})
    assert ralph(project.root, "step").code == 0
    plain = ralph(project.root, "log")
    verbose = ralph(project.root, "log", "--verbose")
    assert "started: " not in plain.out and "agent finished (" not in plain.out
    assert re.search(r"started: \S*python\S* -m ralph\.testing\.fake_agent", verbose.out)
    assert re.search(r"agent finished \(exit 0, \d+\.\d s\)", verbose.out)


# -- --follow ----------------------------------------------------------------------------------


def test_follow_shows_a_step_run_by_another_process(project: Project) -> None:
    project.plan({"default": {**TICK, "print": ["hello from the agent"]}})
    with LogFollower(project.root) as follower:
        step = ralph(project.root, "step")
        assert step.code == 0, step.err
        follower.wait_for(r"^\d\d:\d\d:\d\d step run_\w+ with agent fake$")
        follower.wait_for(r"iteration 1  task 1: First task  \(attempt 1-1\)")
        follower.wait_for(r"    hello from the agent$")
        follower.wait_for(r"  verified done  \(")
        follower.wait_for(r"log \.ralph/logs/000001\.log  commit [0-9a-f]{10}")
        # it keeps following: the next step shows up as well
        assert ralph(project.root, "step").code == 0
        follower.wait_for(r"iteration 2  task 2: Second task")
        code = follower.stop()
        assert follower.proc.poll() is not None
        assert code in (0, 130, -signal.SIGTERM)
        assert group_members(follower.proc.pid) == []


def test_follow_in_a_project_with_nothing_recorded_waits_for_the_first_run(
        project: Project) -> None:
    store = project.root / ".ralph" / "store"
    shutil.rmtree(store)
    project.plan({"default": TICK})
    with LogFollower(project.root) as follower:
        assert follower.proc.poll() is None  # it waits, it did not give up
        assert ralph(project.root, "step").code == 0
        follower.wait_for(r"iteration 1  task 1: First task")
        follower.wait_for(r"  verified done")
        follower.stop()


def test_follow_a_named_run_that_ended_returns_at_once(project: Project) -> None:
    project.plan({"default": TICK})
    run_id = ralph(project.root, "step", "--json").json()["run_id"]
    proc = subprocess.run([*RALPH, "log", "--follow", "--run", run_id], cwd=project.root,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=TIMEOUT, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "verified done" in proc.stdout


# A run's stream appended to as fast as the writer can (no sleep: a follower's cut falls among
# appends): at least 2,000 frames, and more until the file `enough` exists (200,000 at most),
# then run.stopped.
_WRITER = """
import sys
from pathlib import Path
from ralph.store import Store
store, run_id, enough = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
stream = "runs/" + run_id
with Store(store) as s:
    n = 0
    while n < 2000 or (not enough.exists() and n < 200_000):
        s.append("agent.output", {"run_id": run_id, "kind": "text", "content": f"line {n}"},
                 stream=stream)
        n += 1
    s.append("run.stopped", {"run_id": run_id, "reason": "complete", "message": "done",
                             "mode": "run"}, stream=stream)
"""


def test_follow_a_run_being_written_shows_each_frame_once(project: Project,
                                                          tmp_path: Path) -> None:
    """`ralph log --follow --json --run RID` started while another process appends to the
    run's stream: the history and what follows meet without a frame shown twice or missed,
    and it ends by itself after the run's run.stopped."""
    store = project.root / ".ralph" / "store"
    run_id = "run_followedwhilewritten"
    with Store(store) as s:
        s.append("run.started", {"run_id": run_id, "agent": "fake", "maxIterations": 1,
                                 "mode": "run"}, stream=f"runs/{run_id}")
        base = s.last_seq
    enough = tmp_path / "enough"
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(store), run_id, str(enough)],
                              stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        with Store(store) as s:  # the writer is under way before the follower starts
            wait_until(lambda: s.last_seq >= base + 50, "the writer's first frames")
        with LogFollower(project.root, "--json", "--run", run_id) as follower:
            follower.wait_for(r".")
            enough.touch()  # it has made its cut: the writer may finish
            follower.wait_for(r'"topic":"run\.stopped"')
            assert follower.proc.wait(timeout=TIMEOUT) == 0
            lines = follower.seen + follower.rest()
        assert writer.wait(timeout=TIMEOUT) == 0
    finally:
        enough.touch()
        if writer.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(writer.pid, signal.SIGKILL)
            writer.wait(timeout=TIMEOUT)
    frames = [json.loads(line) for line in lines]
    seqs = [f["seq"] for f in frames]
    assert all(a < b for a, b in itertools.pairwise(seqs)), "a frame shown twice or out of order"
    with Store(store) as s:
        recorded = [f.seq for f in s.read(stream=f"runs/{run_id}")]
    assert seqs == recorded  # none missed
    assert len(seqs) >= 2002
    assert frames[0]["topic"] == "run.started" and frames[-1]["topic"] == "run.stopped"


def test_odd_frames_are_said_and_the_rest_of_the_run_is_shown(project: Project) -> None:
    """Anyone may append to a run's stream: an event `ralph log` cannot show is one line
    saying so, the summary of an odd run.stopped shows what it can, and everything after an
    odd event is still shown (exit 0)."""
    run_id = "run_withoddframes"
    stream = f"runs/{run_id}"
    base = {"run_id": run_id}
    with Store(project.root / ".ralph" / "store") as store:
        store.append("run.started", {**base, "agent": "fake", "maxIterations": 2,
                                     "startIteration": 1, "mode": "run"}, stream=stream)
        store.append("iteration.started", {**base, "iteration": 1, "task_id": "1",
                                           "title": "First task", "attempt_id": "1-1"},
                     stream=stream)
        store.append("agent.output", {**base, "iteration": 1, "kind": "text",
                                      "content": "odd words", "chars": "abc"}, stream=stream)
        store.append("agent.output", {**base, "iteration": 1, "kind": "text",
                                      "content": "after the odd output"}, stream=stream)
        store.append("iteration.finished", {**base, "iteration": 1, "verified": True,
                                            "status": "done", "duration_seconds": "x"},
                     stream=stream)
        store.append("loop.warning", {**base, "message": "after the odd verdict"},
                     stream=stream)
        store.append("run.stopped", {**base, "mode": "run", "reason": "complete",
                                     "message": "all done", "done": 1, "total": 3,
                                     "iterations": 1, "agents": {"a": "b"},
                                     "tokens_in": "x", "tokens_out": 5}, stream=stream)
    result = ralph(project.root, "log", "--run", run_id)
    assert result.code == 0, result.err
    assert "Traceback" not in result.err
    out = result.out
    assert re.search(r"agent\.output: an event that cannot be shown", out), out
    assert re.search(r"iteration\.finished: an event that cannot be shown", out), out
    for later in ("after the odd output", "warning: after the odd verdict",
                  "run ended: complete (all done)", "tasks: 1 done"):
        assert later in out, (later, out)
    assert "agent a " in out  # the odd agent's row, with no figures
    assert out.index("after the odd output") < out.index("after the odd verdict")
    assert re.search(r"all agents\s+│?\s*0\s", out), out  # tokens_in "x": not a count

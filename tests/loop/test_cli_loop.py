"""`ralph step`, `ralph run` and `ralph status` as a user and a script see them: exit codes,
the bridge protocol's fields in `--json`, the progress display on stderr only, `--quiet`,
and Ctrl-C ending a run and its agent's whole process group."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import ralph
from ralph.cli.main import run as ralph_main
from ralph.store import Frame, Store
from tests.loop.conftest import Project, git

RALPH = [sys.executable, "-m", "ralph"]
TIMEOUT = 120
TICK: dict[str, Any] = {"tick": True, "print": ["ticked it"]}

# The bridge protocol's `step` result: every field, with the types it may take.
STEP_FIELDS: dict[str, tuple[type | None, ...]] = {
    "iteration": (int,), "agent": (str,), "task_id": (str, None),
    "exit_signal": (bool, None), "return_code": (int, None), "log_path": (str, None),
    "progress_made": (bool,), "no_progress_streak": (int,), "gates_ok": (bool,),
    "repo_clean": (bool,), "judge_ok": (bool, None), "review_ok": (bool, None),
    "blocked": (bool,), "attempt_id": (str, None), "receipts_dir": (str, None),
    "context_dir": (str, None), "task_title": (str, None),
}
STATUS_FIELDS: dict[str, tuple[type | None, ...]] = {
    "version": (str,), "cwd": (str,), "prd": (str,), "progress": (str,), "agents": (str,),
    "prompt": (str,), "done": (int,), "total": (int,), "next": (dict, None),
    "running": (bool,), "paused": (bool,), "activeRunId": (str, None), "last": (dict, None),
    "blocked": (list,),
}
LAST_FIELDS: dict[str, tuple[type | None, ...]] = {
    "iteration_id": (str,), "task_id": (str, None), "status": (str,),
    "exit_code": (int, None), "started_at": (str,), "finished_at": (str, None),
}
RUN_OUTCOME_FIELDS: dict[str, tuple[type | None, ...]] = {
    "run_id": (str,), "reason": (str,), "message": (str,), "iterations": (int,),
    "done": (int,), "total": (int,),
}
_TS = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")


# -- helpers (also used by test_bad_input.py) ------------------------------------------------------


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    def error_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.startswith("error:")]


def ralph_cli(root: Path, *args: str, env: dict[str, str] | None = None,
              timeout: float = TIMEOUT) -> Result:
    """`python -m ralph ARGS...` in `root`, stdin from /dev/null."""
    proc = subprocess.run([*RALPH, *args], cwd=root, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout, env=env,
                          check=False)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def check_fields(value: Any, fields: dict[str, tuple[type | None, ...]]) -> None:
    """Every field present, each of one of its allowed types (a bool is not an int here)."""
    assert isinstance(value, dict), value
    missing = set(fields) - set(value)
    assert not missing, f"missing fields {sorted(missing)} in {value}"
    for name, allowed in fields.items():
        item = value[name]
        if item is None:
            assert None in allowed, f"{name} is null: {value}"
            continue
        kinds = [kind for kind in allowed if kind is not None]
        assert any(type(item) is kind for kind in kinds), f"{name}={item!r} not {allowed}"


def set_loop(project: Project, **values: object) -> None:
    """Add or change `[loop]` keys of the project's ralph.toml (written by project.config)."""
    toml = project.root / "ralph.toml"
    text = toml.read_text()
    for key, value in values.items():
        rendered = json.dumps(value)
        text, count = re.subn(rf"(?m)^{key} = .*$", f"{key} = {rendered}", text)
        if not count:
            text = text.replace("[loop]\n", f"[loop]\n{key} = {rendered}\n", 1)
    toml.write_text(text)


def events(root: Path, topic: str) -> list[Frame]:
    with Store(root / ".ralph" / "store") as store:
        return list(store.read(topic=topic))


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of process group `pgid`, from /proc."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
            members.append(int(entry))
    return members


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@contextlib.contextmanager
def in_process(capfd: pytest.CaptureFixture[str]) -> Iterator[Callable[..., Result]]:
    """`ralph ARGS...` run in this process through ralph.cli.main.run (cwd as set by the
    caller); the `ralph` logger is put back afterwards (run() routes it to stderr)."""
    logger = logging.getLogger("ralph")
    saved = (list(logger.handlers), logger.level, logger.propagate)

    def invoke(*args: str) -> Result:
        capfd.readouterr()
        code = ralph_main(list(args))
        out, err = capfd.readouterr()
        return Result(code, out, err)

    try:
        yield invoke
    finally:
        logger.handlers[:] = saved[0]
        logger.setLevel(saved[1])
        logger.propagate = saved[2]


@pytest.fixture
def inproc(project: Project, capfd: pytest.CaptureFixture[str],
           monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Result]]:
    monkeypatch.chdir(project.root)
    monkeypatch.delenv("RALPH_DEBUG", raising=False)
    with in_process(capfd) as invoke:
        yield invoke


def cli(project: Project, *args: str) -> Result:
    return ralph_cli(project.root, *args)


# -- ralph step ------------------------------------------------------------------------------------


def test_step_verified_done_exits_0_with_every_step_field(project: Project) -> None:
    project.plan({"tasks": {"1": [{**TICK, "write": {"one.txt": "1"}, "exit_signal": True}]}})
    project.config(gates=["test -f one.txt"])
    result = cli(project, "step", "--json")
    assert result.code == 0, result.err
    step = result.json()
    check_fields(step, STEP_FIELDS)
    root = project.root
    assert step["iteration"] == 1 and step["agent"] == "fake" and step["task_id"] == "1"
    assert step["task_title"] == "First task" and step["attempt_id"] == "1-1"
    assert step["exit_signal"] is True and step["return_code"] == 0
    assert step["progress_made"] is True and step["no_progress_streak"] == 0
    assert step["gates_ok"] is True and step["repo_clean"] is True
    assert step["judge_ok"] is None and step["review_ok"] is None  # disabled: null, not true
    assert step["blocked"] is False
    assert (root / step["log_path"]).is_file()
    assert "fake agent working on task 1" in (root / step["log_path"]).read_text()
    assert (root / step["receipts_dir"] / "gate-1.json").is_file()
    assert (root / step["context_dir"] / "prompt.md").is_file()
    assert "- [x] 1. First task" in project.read_prd()
    assert project.log()[0] == "ralph: 1 First task"


def test_step_not_done_exits_1(project: Project) -> None:
    project.config(gates=["true"])
    result = cli(project, "step", "--json")
    assert result.code == 1, result.err
    step = result.json()
    check_fields(step, STEP_FIELDS)
    assert step["task_id"] == "1" and step["exit_signal"] is None
    assert step["progress_made"] is False and step["no_progress_streak"] == 1
    assert step["gates_ok"] is True and step["blocked"] is False
    assert "- [ ] 1. First task" in project.read_prd()
    assert result.error_lines() == []


def test_step_ticked_but_gate_failed_exits_1_and_reopens(project: Project) -> None:
    project.plan({"tasks": {"1": [TICK]}})
    project.config(gates=["test -f proof.txt"])
    result = cli(project, "step", "--json")
    assert result.code == 1, result.err
    step = result.json()
    check_fields(step, STEP_FIELDS)
    assert step["gates_ok"] is False
    assert "- [ ] 1. First task" in project.read_prd()  # the orchestrator reopened it
    assert "gate test -f proof.txt: failed" in result.err


def test_step_blocks_after_max_attempts(project: Project) -> None:
    project.config()
    set_loop(project, max_attempts_per_task=2)
    project.commit("config")
    first = cli(project, "step", "--json")
    second = cli(project, "step", "--json")
    assert (first.code, second.code) == (1, 1)
    assert first.json()["blocked"] is False
    assert second.json()["blocked"] is True and second.json()["attempt_id"] == "1-2"
    status = cli(project, "status", "--json").json()
    assert [b["task_id"] for b in status["blocked"]] == ["1"]
    assert status["blocked"][0]["reason"]


def test_step_in_process(inproc: Callable[..., Result], project: Project) -> None:
    project.plan({"tasks": {"1": [TICK]}})
    result = inproc("step", "--json", "--agent", "fake")
    assert result.code == 0, result.err
    check_fields(result.json(), STEP_FIELDS)
    assert "iteration 1  task 1" in result.err  # a step has no "k/max"
    again = inproc("status", "--json")
    assert again.code == 0
    assert again.json()["done"] == 1 and again.json()["running"] is False


def test_step_json_keeps_stdout_for_the_json_only(project: Project) -> None:
    project.plan({"tasks": {"1": [TICK]}})
    result = cli(project, "step", "--json")
    assert result.code == 0
    json.loads(result.out)  # stdout is exactly one JSON document
    assert result.out.lstrip().startswith("{") and result.out.rstrip().endswith("}")
    assert "iteration 1" in result.err and "verified done" in result.err
    assert "verified done" not in result.out and "run ended" not in result.out


def test_step_without_json_prints_nothing_on_stdout(project: Project) -> None:
    project.plan({"tasks": {"1": [TICK]}})
    result = cli(project, "step")
    assert result.code == 0
    assert result.out == ""
    assert "verified done" in result.err


def test_step_when_every_task_is_done(project: Project) -> None:
    project.prd("# P\n\n## Tasks\n\n- [x] 1. First task\n- [x] 2. Second task\n")
    project.commit("all done")
    result = cli(project, "step")
    assert result.code == 0, result.err
    assert result.out == ""
    assert "nothing to do: all 2 tasks are done" in result.err
    as_json = cli(project, "step", "--json")
    assert as_json.code == 0
    assert as_json.json() == {"nothing_to_do": True, "complete": True,
                              "message": "nothing to do: all 2 tasks are done"}


BLOCKED_PRD = """# P

## Tasks

- [x] 1. First task
- [-] 2. Second task
  - Blocked: waiting for the API key
- [ ] 3. Third task
  - Depends on: 2
"""


def test_step_when_the_remaining_tasks_are_blocked(project: Project) -> None:
    project.prd(BLOCKED_PRD)
    project.commit("blocked")
    result = cli(project, "step")
    assert result.code == 1, result.err
    assert result.out == ""
    assert "no task is ready" in result.err and "blocked: 2" in result.err
    as_json = cli(project, "step", "--json")
    assert as_json.code == 1
    body = as_json.json()
    assert body["nothing_to_do"] is True and body["complete"] is False


@pytest.mark.parametrize("prd", ["# P\n\n## Tasks\n\n- [x] 1. First task\n", BLOCKED_PRD],
                         ids=["all-done", "all-blocked"])
def test_step_with_nothing_to_do_is_not_recorded_as_an_error(project: Project,
                                                             prd: str) -> None:
    """Nothing to do is an answer, not a failure: no `error` on the terminal and no run
    recorded as stopped by an error (a bridge would report it as one)."""
    project.prd(prd)
    project.commit("nothing to do")
    result = cli(project, "step")
    assert result.code in (0, 1)
    assert "error" not in result.err.lower(), result.err
    assert [f.meta["reason"] for f in events(project.root, "run.stopped")
            if f.meta["reason"] == "error"] == []


# -- ralph run -------------------------------------------------------------------------------------


def test_run_to_complete_exits_0(project: Project) -> None:
    project.plan({"default": TICK})
    result = cli(project, "run", "--json")
    assert result.code == 0, result.err
    outcome = result.json()
    check_fields(outcome, RUN_OUTCOME_FIELDS)
    assert outcome["run_id"].startswith("run_")
    assert (outcome["reason"], outcome["iterations"], outcome["done"], outcome["total"]) == (
        "complete", 3, 3, 3)
    assert "iteration 1 (1/10 of this run)" in result.err
    assert "iteration 3 (3/10 of this run)" in result.err
    assert "run ended: complete" in result.err
    assert project.log()[:3] == ["ralph: 3 Third task", "ralph: 2 Second task",
                                 "ralph: 1 First task"]
    stopped = events(project.root, "run.stopped")
    assert stopped[-1].meta["reason"] == "complete"
    assert stopped[-1].meta["run_id"] == outcome["run_id"]


def test_run_max_iterations_exits_1(project: Project) -> None:
    result = cli(project, "run", "--json", "--max-iterations", "2")
    assert result.code == 1, result.err
    outcome = result.json()
    check_fields(outcome, RUN_OUTCOME_FIELDS)
    assert (outcome["reason"], outcome["iterations"], outcome["done"]) == (
        "max_iterations", 2, 0)
    assert "iteration 2 (2/2 of this run)" in result.err
    assert events(project.root, "run.started")[-1].meta["maxIterations"] == 2


def test_run_max_iterations_defaults_to_the_config(project: Project) -> None:
    project.config()
    set_loop(project, max_iterations=1)
    project.commit("config")
    result = cli(project, "run", "--json")
    assert result.code == 1, result.err
    assert (result.json()["reason"], result.json()["iterations"]) == ("max_iterations", 1)


def test_run_without_progress_exits_1(project: Project) -> None:
    project.config()
    set_loop(project, max_attempts_per_task=50, no_progress_limit=2)
    project.commit("config")
    result = cli(project, "run", "--json")
    assert result.code == 1, result.err
    outcome = result.json()
    assert (outcome["reason"], outcome["iterations"]) == ("no_progress", 2)
    assert events(project.root, "run.stopped")[-1].meta["reason"] == "no_progress"


def test_run_that_ends_in_an_error_exits_2(project: Project) -> None:
    # every task is marked done, but the gate fails when the run checks it once more
    project.prd("# P\n\n## Tasks\n\n- [x] 1. First task\n")
    project.config(gates=["false"])
    project.commit("done but broken")
    result = cli(project, "run", "--json")
    assert result.code == 2, result.err
    outcome = result.json()
    check_fields(outcome, RUN_OUTCOME_FIELDS)
    assert outcome["reason"] == "error" and "false" in outcome["message"]


def test_run_with_blocked_tasks_only_exits_1(project: Project) -> None:
    project.prd(BLOCKED_PRD)
    project.commit("blocked")
    result = cli(project, "run", "--json")
    assert result.code == 1, result.err
    assert result.json()["reason"] == "no_progress"


def test_quiet_run_prints_nothing(project: Project) -> None:
    project.plan({"default": TICK})
    result = cli(project, "run", "--quiet")
    assert result.code == 0
    assert result.err == ""
    assert result.out == ""
    quiet_json = cli(project, "run", "--quiet", "--json")  # already complete: 0 iterations
    assert quiet_json.code == 0 and quiet_json.err == ""
    assert quiet_json.json()["reason"] == "complete"


def test_quiet_step_prints_nothing(project: Project) -> None:
    project.plan({"default": TICK})
    result = cli(project, "step", "-q")
    assert (result.code, result.out, result.err) == (0, "", "")


def test_run_in_process_json(inproc: Callable[..., Result], project: Project) -> None:
    project.plan({"default": TICK})
    result = inproc("run", "--json", "--max-iterations", "5")
    assert result.code == 0, result.err
    assert result.json()["reason"] == "complete"
    assert "run ended: complete" in result.err


# -- ralph status ----------------------------------------------------------------------------------


def test_status_json_of_a_fresh_project(project: Project) -> None:
    result = cli(project, "status", "--json")
    assert result.code == 0, result.err
    assert result.err == ""
    status = result.json()
    check_fields(status, STATUS_FIELDS)
    assert status["version"] == ralph.__version__
    assert status["cwd"] == str(project.root)
    assert (status["prd"], status["progress"], status["agents"], status["prompt"]) == (
        "PRD.md", "progress.md", "AGENTS.md", "PROMPT_build.md")
    assert (status["done"], status["total"]) == (0, 3)
    assert status["next"] == {"task_id": "1", "title": "First task", "kind": "build"}
    assert (status["running"], status["paused"], status["activeRunId"]) == (False, False, None)
    assert status["last"] is None and status["blocked"] == []


def test_status_json_after_a_step(project: Project) -> None:
    project.plan({"tasks": {"1": [TICK]}})
    assert cli(project, "step", "--quiet").code == 0
    status = cli(project, "status", "--json").json()
    check_fields(status, STATUS_FIELDS)
    assert (status["done"], status["total"]) == (1, 3)
    assert status["next"] == {"task_id": "2", "title": "Second task", "kind": "build"}
    last = status["last"]
    check_fields(last, LAST_FIELDS)
    assert (last["iteration_id"], last["task_id"], last["status"], last["exit_code"]) == (
        "000001", "1", "done", 0)
    assert _TS.fullmatch(last["started_at"]) and _TS.fullmatch(last["finished_at"])
    assert last["started_at"] <= last["finished_at"]


def test_status_reports_the_kind_blocked_tasks_and_the_last_failure(project: Project) -> None:
    project.prd("# P\n\n## Tasks\n\n- [-] 1. Broken\n  - Blocked: no API key\n"
                "- [ ] 2. [PLAN] Plan the work\n")
    project.commit("kinds")
    status = cli(project, "status", "--json").json()
    assert status["next"] == {"task_id": "2", "title": "[PLAN] Plan the work", "kind": "plan"}
    assert status["blocked"] == [{"task_id": "1", "title": "Broken", "reason": "no API key"}]
    assert cli(project, "step", "--quiet").code == 1
    status = cli(project, "status", "--json").json()
    assert status["last"]["status"] == "not_done" and status["last"]["task_id"] == "2"
    text = cli(project, "status")
    assert text.code == 0 and text.err == ""
    assert "PRD.md: 0/2 tasks done; loop idle" in text.out
    assert "next: task 2: [PLAN] Plan the work (plan)" in text.out
    assert "last: iteration 000001, task 2, not done" in text.out
    assert "blocked: task 1: Broken: no API key" in text.out


def test_status_text_when_everything_is_done(project: Project) -> None:
    project.plan({"default": TICK})
    assert cli(project, "run", "--quiet").code == 0
    text = cli(project, "status")
    assert text.code == 0
    assert "PRD.md: 3/3 tasks done; loop idle" in text.out
    assert "next: nothing, every task is done" in text.out
    assert "verified done" in text.out


def test_status_from_a_subdirectory(project: Project) -> None:
    sub = project.root / "src" / "deep"
    sub.mkdir(parents=True)
    result = ralph_cli(sub, "status", "--json")
    assert result.code == 0, result.err
    assert result.json()["cwd"] == str(project.root)


# -- Ctrl-C ----------------------------------------------------------------------------------------


def _agent_pgid(root: Path, proc: subprocess.Popen[str]) -> int:
    """The fake agent's process group (its pid: agents get a session of their own), read from
    the `child-pid` line it logs once it has started its sleeping grandchild."""
    log = root / ".ralph" / "logs" / "000001.log"
    found: list[int] = []

    def started() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"ralph exited early with {proc.returncode}")
        match = re.search(r"child-pid (\d+)", log.read_text()) if log.exists() else None
        if match:
            found.append(int(match.group(1)))
        return bool(found)

    wait_until(started, "the fake agent to start")
    return found[0]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_the_run_and_ends_the_agent_group(project: Project, sig: int) -> None:
    """Ctrl-C (SIGINT) or SIGTERM: the run stops with exit 130 and reason `stopped`, after
    ending the agent's whole process group (the agent and the grandchild it started)."""
    project.plan({"default": {"spawn": 300, "sleep": 300}})
    proc = subprocess.Popen([*RALPH, "run", "--json"], cwd=project.root,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    pgid = 0
    try:
        pgid = _agent_pgid(project.root, proc)
        assert pgid != proc.pid and group_members(pgid)  # the agent's own group, alive

        status = cli(project, "status", "--json").json()
        assert status["running"] is True and status["paused"] is False
        assert isinstance(status["activeRunId"], str) and status["activeRunId"].startswith(
            "run_")
        busy = cli(project, "step")
        assert busy.code == 2 and len(busy.error_lines()) == 1
        assert "already active" in busy.error_lines()[0]

        proc.send_signal(sig)
        out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=TIMEOUT)
        if pgid and group_members(pgid):
            os.killpg(pgid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    outcome = json.loads(out)
    assert outcome["reason"] == "stopped" and outcome["run_id"] == status["activeRunId"]
    wait_until(lambda: not group_members(pgid), "the agent's process group to end", 10)
    assert group_members(pgid) == []
    stopped = events(project.root, "run.stopped")
    assert stopped[-1].meta["reason"] == "stopped"
    assert stopped[-1].meta["run_id"] == outcome["run_id"]
    finished = events(project.root, "iteration.finished")
    assert finished[-1].meta["status"] == "stopped"
    state = project.state()
    assert state["active_run"] is None and state["in_flight"] is None
    assert state["last"]["status"] == "stopped"
    after = cli(project, "status", "--json").json()
    assert (after["running"], after["activeRunId"]) == (False, None)
    assert git(project.root, "status", "--porcelain") == ""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_a_step(project: Project, sig: int) -> None:
    """A step stopped mid-iteration: exit 130, no traceback, nothing on stdout, the agent's
    group ended and the iteration recorded as stopped."""
    project.plan({"default": {"spawn": 300, "sleep": 300}})
    proc = subprocess.Popen([*RALPH, "step", "--json"], cwd=project.root,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    pgid = 0
    try:
        pgid = _agent_pgid(project.root, proc)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=TIMEOUT)
        if pgid and group_members(pgid):
            os.killpg(pgid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and out == ""
    wait_until(lambda: not group_members(pgid), "the agent's process group to end", 10)
    assert project.state()["last"]["status"] == "stopped"

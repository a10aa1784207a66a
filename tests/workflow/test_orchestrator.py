"""The workflow orchestrator run end to end through WorkflowService, with the scripted fake
role agent (ralph.testing.fake_roles) playing every role as a real agent session: the event
stream, the session files, the commits and the status tell what happened."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from ralph.config import ConfigError, load_config
from ralph.scaffold import scaffold
from ralph.sessions import SessionService
from ralph.store import Frame, Store
from ralph.workflow.errors import WorkflowError
from ralph.workflow.position import State
from ralph.workflow.progress import Marker, read_progress
from ralph.workflow.record import WorkflowRecord, read_record, workflow_stream
from ralph.workflow.service import WorkflowOutcome, WorkflowService, WorkflowStatus
from tests.loop.conftest import wait_for

T = TypeVar("T")

TWO_TASKS = [
    {"id": "task-1", "description": "Write greet.py", "files": ["greet.py"],
     "criteria": ["greet.py prints hello"]},
    {"id": "task-2", "description": "Write bye.py", "depends_on": ["task-1"],
     "files": ["bye.py"], "criteria": ["bye.py prints bye"]},
]
ONE_TASK = TWO_TASKS[:1]


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL).stdout


@dataclass
class Project:
    """A git repository with `ralph init`'s files and the fake role agent as agent `fake`;
    the script (and its calls file) live beside the repository, never in it."""

    root: Path
    script_path: Path

    @property
    def store_path(self) -> Path:
        return self.root / ".ralph" / "store"

    def script(self, script: dict[str, Any]) -> None:
        self.script_path.write_text(json.dumps(script))
        self.calls_path.unlink(missing_ok=True)

    @property
    def calls_path(self) -> Path:
        return self.script_path.with_name(self.script_path.name + ".calls.json")

    def calls(self) -> dict[str, int]:
        """How often each (role/selector) script list was played."""
        if not self.calls_path.exists():
            return {}
        return dict(json.loads(self.calls_path.read_text()))

    def config(self, *, gates: list[str] | None = None, max_qa_cycles: int = 3,
               max_task_attempts: int = 3, extra: str = "") -> None:
        argv = [sys.executable, "-m", "ralph.testing.fake_roles", "--script",
                str(self.script_path)]
        (self.root / "ralph.toml").write_text(
            f'[loop]\ndefault_agent = "fake"\n\n'
            f"[agents.fake]\nargv = {json.dumps(argv)}\ntimeout_seconds = 60\n\n"
            f"[gates]\ncommands = {json.dumps(gates or [])}\ntimeout_seconds = 60\n\n"
            f"[workflow]\nmax_qa_cycles = {max_qa_cycles}\n"
            f"max_task_attempts = {max_task_attempts}\n{extra}")

    def commit(self, message: str = "setup") -> None:
        git(self.root, "add", "-A")
        git(self.root, "commit", "-q", "-m", message)

    def log(self) -> list[str]:
        """Commit subjects, oldest first."""
        return git(self.root, "log", "--reverse", "--format=%s").splitlines()

    def session(self, sid: str) -> Path:
        return self.root / ".ralph-sessions" / sid

    def markers(self, sid: str) -> dict[str, Marker]:
        return read_progress(self.session(sid) / "progress.md").markers

    def sessions_made(self) -> list[str]:
        folder = self.root / ".ralph-sessions"
        return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []

    def run(self, body: Callable[[WorkflowService, Store], Awaitable[T]]) -> T:
        """`body` with a WorkflowService on the project's store, in an event loop of its own."""
        async def go() -> T:
            with Store(self.store_path) as store:
                service = WorkflowService(self.root, load_config(self.root), store)
                return await body(service, store)
        return asyncio.run(go())

    def start(self, request: str = "Write greet.py and bye.py") -> WorkflowOutcome:
        return self.run(lambda service, _: service.start(request))

    def status(self, sid: str) -> WorkflowStatus:
        with Store(self.store_path) as store:
            return WorkflowService(self.root, None, store).status(sid)

    def record(self, sid: str) -> WorkflowRecord:
        with Store(self.store_path) as store:
            return read_record(store, sid)

    def frames(self, sid: str) -> list[Frame]:
        with Store(self.store_path) as store:
            return list(store.read(stream=workflow_stream(sid)))

    def prompt_of(self, agent_session: str) -> str:
        """The prompt an agent session was given."""
        with Store(self.store_path) as store:
            sessions = SessionService(self.root, None, store)
            return sessions.text(sessions.get(agent_session).prompt_hash)

    def agent_pgids(self) -> list[int]:
        """The process group of every agent session the project ran."""
        if not self.store_path.exists():
            return []
        with Store(self.store_path) as store:
            return [int(f.meta["pgid"]) for f in store.read(topic="session.process")]

    def snapshot_files(self) -> dict[str, bytes]:
        """Every file under .ralph-sessions/, by path."""
        folder = self.root / ".ralph-sessions"
        return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
                if p.is_file()}


def group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # the id was taken by another user's group since
        return True
    return False


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    root = tmp_path / "proj"
    root.mkdir()
    git(root, "init", "-q")
    git(root, "config", "user.name", "Test")
    git(root, "config", "user.email", "test@localhost")
    scaffold(root)
    proj = Project(root, tmp_path / "script.json")
    proj.script({})
    proj.config()
    proj.commit("init")
    yield proj
    # Every agent the workflow ran has ended, its whole process group with it.
    left = [pgid for pgid in proj.agent_pgids() if not group_gone(pgid)]
    assert not left, f"agent process groups still running: {left}"


# ---------------------------------------------------------------------------- reading


def metas(frames: list[Frame], topic: str) -> list[dict[str, Any]]:
    return [f.meta for f in frames if f.topic == topic]


def states(frames: list[Frame]) -> list[str]:
    return [m["state"] for m in metas(frames, "workflow.state")]


def calls(frames: list[Frame], role: str, mode: str | None = None) -> list[dict[str, Any]]:
    """The first try of each call of `role` (and `mode`), in order."""
    return [m for m in metas(frames, "workflow.role_call")
            if m["role"] == role and (mode is None or m["mode"] == mode) and m["try"] == 1]


def result_of(frames: list[Frame], call_id: str) -> dict[str, Any]:
    found = [m for m in metas(frames, "workflow.role_result") if m["call_id"] == call_id]
    assert len(found) == 1, found
    return found[0]


def task_events(frames: list[Frame]) -> list[tuple[str, str, int]]:
    """(task, marker, attempt) of each marker the orchestrator set."""
    return [(m["task_id"], m["marker"], m["attempt"]) for m in metas(frames, "workflow.task")]


def collapsed(values: list[str]) -> list[str]:
    """`values` with runs of the same value made one."""
    return [v for i, v in enumerate(values) if i == 0 or values[i - 1] != v]


def index_of(frames: list[Frame], predicate: Callable[[Frame], bool]) -> int:
    found = [i for i, f in enumerate(frames) if predicate(f)]
    assert found, "no such event"
    return found[0]


def files_of_commit(root: Path, sha: str) -> list[str]:
    return git(root, "show", "--name-only", "--format=", sha).split()


# ---------------------------------------------------------------------------- 1. complete


def test_a_request_runs_to_complete_with_a_commit_per_task(project: Project) -> None:
    project.script({
        "planner": {"INITIALIZE": [{"tasks": TWO_TASKS}]},
        "executor": {"task-1": [{"write": {"greet.py": "print('hello')\n"}}],
                     "task-2": [{"write": {"bye.py": "print('bye')\n"}}]},
    })
    outcome = project.start("Write greet.py and bye.py")
    sid = outcome.session_id
    assert outcome.state is State.COMPLETE
    frames = project.frames(sid)

    assert collapsed(states(frames)) == ["INITIALIZING", "EXECUTING", "REVIEWING", "EXECUTING",
                                         "REVIEWING", "EXECUTING", "PLANNING", "COMPLETE"]
    # task-2 depends on task-1: it runs after task-1 is done.
    executed = [m["input"]["TASK_ID"] for m in calls(frames, "executor")]
    assert executed == ["task-1", "task-2"]
    done_1 = index_of(frames, lambda f: f.topic == "workflow.task"
                      and f.meta["task_id"] == "task-1")
    start_2 = index_of(frames, lambda f: f.topic == "workflow.role_call"
                       and f.meta["input"].get("TASK_ID") == "task-2")
    assert done_1 < start_2
    # Ralph, not an agent, set each [x], after the executor's [P] and a Qualified review.
    assert [(m["task_id"], m["marker"], m["from"], m["attempt"])
            for m in metas(frames, "workflow.task")] == [
        ("task-1", "[x]", "[P]", 1), ("task-2", "[x]", "[P]", 1)]
    assert project.markers(sid) == {"plan-init": Marker.COMPLETED,
                                    "task-1": Marker.COMPLETED, "task-2": Marker.COMPLETED}
    # The completion check: the planner's UPDATE with the reports, then COMPLETE.
    check = calls(frames, "planner", "UPDATE")
    assert len(check) == 1
    assert check[0]["input"]["CONTEXT"]["completion_check"] is True
    assert check[0]["input"]["CONTEXT"]["reports"] == {"task-1": "tasks.task-1-report.md",
                                                       "task-2": "tasks.task-2-report.md"}

    # One commit per task, then the session's own, all recorded.
    assert project.log() == ["init", "ralph: task-1 Write greet.py",
                             "ralph: task-2 Write bye.py", f"ralph: workflow {sid} complete"]
    commits = metas(frames, "workflow.commit")
    assert [c["task_id"] for c in commits] == ["task-1", "task-2", None]
    first = files_of_commit(project.root, commits[0]["sha"])
    assert "greet.py" in first and "bye.py" not in first
    assert f".ralph-sessions/{sid}/tasks.task-1-report.md" in first
    assert "bye.py" in files_of_commit(project.root, commits[1]["sha"])
    assert git(project.root, "status", "--porcelain") == ""
    assert (project.root / "greet.py").read_text() == "print('hello')\n"

    status = project.status(sid)
    assert (status.status, status.state) == ("complete", "COMPLETE")
    assert [(t.task_id, t.marker, t.attempts, t.failure) for t in status.tasks] == [
        ("task-1", "[x]", 1, None), ("task-2", "[x]", 1, None)]
    assert status.violations == [] and status.request == "Write greet.py and bye.py"
    # Each role call ran in an agent session of its own, its process group recorded.
    assert len(project.agent_pgids()) == len(metas(frames, "workflow.role_call")) == 6


# ---------------------------------------------------------------------------- 2. Q&A


def test_a_qa_cycle_brainstorms_researches_and_updates_the_plan(project: Project) -> None:
    project.script({"planner": {"INITIALIZE": [{"status": "needs_qa_cycle",
                                                "tasks": ONE_TASK}]}})
    outcome = project.start("Write greet.py")
    sid = outcome.session_id
    assert outcome.state is State.COMPLETE
    frames = project.frames(sid)

    questioner = calls(frames, "questioner")
    assert [(m["mode"], m["input"]["CYCLE_NUMBER"]) for m in questioner] == [
        ("BRAINSTORM", 1), ("RESEARCH", 1)]
    planner = calls(frames, "planner")
    assert [m["mode"] for m in planner] == ["INITIALIZE", "UPDATE", "UPDATE"]
    # The UPDATE after the cycle gets the cycle's result as CONTEXT.
    context = planner[1]["input"]["CONTEXT"]
    assert context["qa_cycle"] == 1
    assert context["brainstorm"]["phase"] == "BRAINSTORM"
    assert context["brainstorm"]["questions_generated"] == 3
    assert context["research"]["phase"] == "RESEARCH"
    assert context["research"]["questions_answered"] == 3
    order = [m["role"] + "/" + str(m["mode"]) for m in metas(frames, "workflow.role_call")]
    assert order[:4] == ["planner/INITIALIZE", "questioner/BRAINSTORM", "questioner/RESEARCH",
                         "planner/UPDATE"]
    assert "QA" in states(frames)
    questions = (project.session(sid) / "plan.questions.md").read_text()
    assert "### Cycle 1" in questions and "#### Research Results" in questions
    assert "qa_cycle" in (project.session(sid) / "plan.md").read_text()  # the planner saw it
    status = project.status(sid)
    assert status.qa_cycles == 1


def test_max_qa_cycles_ends_the_questions_and_the_tasks_run(project: Project) -> None:
    project.config(max_qa_cycles=2)
    project.commit("two Q&A cycles at most")
    project.script({"planner": [{"status": "needs_qa_cycle", "tasks": ONE_TASK}]})
    outcome = project.start("Write greet.py")
    sid = outcome.session_id
    assert outcome.state is State.COMPLETE
    frames = project.frames(sid)

    assert [(m["mode"], m["input"]["CYCLE_NUMBER"]) for m in calls(frames, "questioner")] == [
        ("BRAINSTORM", 1), ("RESEARCH", 1), ("BRAINSTORM", 2), ("RESEARCH", 2)]
    notes = metas(frames, "workflow.note")
    assert len(notes) == 1 and "max_qa_cycles (2)" in notes[0]["message"]
    note_at = index_of(frames, lambda f: f.topic == "workflow.note")
    last_update = max(i for i, f in enumerate(frames) if f.topic == "workflow.role_call"
                      and f.meta["mode"] == "UPDATE" and
                      not f.meta["input"].get("CONTEXT", {}).get("completion_check"))
    executor_at = index_of(frames, lambda f: f.topic == "workflow.role_call"
                           and f.meta["role"] == "executor")
    assert last_update < note_at < executor_at
    assert project.markers(sid)["task-1"] is Marker.COMPLETED
    status = project.status(sid)
    assert (status.qa_cycles, status.max_qa_cycles) == (2, 2)


# ---------------------------------------------------------------------------- 3. rework


def test_a_failed_review_is_reworked_as_attempt_2(project: Project) -> None:
    project.script({
        "planner": {"INITIALIZE": [{"tasks": ONE_TASK}]},
        "reviewer": {"task-1": [{"verdict": "Failed", "feedback": "greet.py is missing"}, {}]},
    })
    outcome = project.start("Write greet.py")
    sid = outcome.session_id
    assert outcome.state is State.COMPLETE
    frames = project.frames(sid)

    executor = calls(frames, "executor")
    assert [m["input"]["ATTEMPT_NUMBER"] for m in executor] == [1, 2]
    reviewer = calls(frames, "reviewer")
    assert [m["input"]["REPORT_PATH"] for m in reviewer] == [
        "tasks.task-1-report.md", "tasks.task-1-report-r2.md"]
    assert result_of(frames, reviewer[0]["call_id"])["output"]["verdict"] == "Failed"
    tasks = metas(frames, "workflow.task")
    assert [(m["marker"], m["attempt"]) for m in tasks] == [("[ ]", 1), ("[x]", 2)]
    assert "review failed: greet.py is missing" in tasks[0]["reason"]
    rework = (project.session(sid) / "tasks.task-1-report-r2.md").read_text()
    assert rework.startswith("# Task Report: task-1 [Rework #2]")
    assert "**Status**: Qualified" in rework
    first = (project.session(sid) / "tasks.task-1-report.md").read_text()
    assert "**Status**: Failed" in first
    assert project.markers(sid)["task-1"] is Marker.COMPLETED
    status = project.status(sid)
    assert [(t.marker, t.attempts, t.failure) for t in status.tasks] == [("[x]", 2, None)]


# ---------------------------------------------------------------------------- 4. [F]


def test_a_task_out_of_attempts_is_failed_and_so_is_the_session(project: Project) -> None:
    project.config(max_task_attempts=2)
    project.commit("two attempts at most")
    project.script({
        "planner": {"INITIALIZE": [{"tasks": ONE_TASK}]},
        "reviewer": [{"verdict": "Failed", "feedback": "greet.py is missing"}],
    })
    outcome = project.start("Write greet.py")
    sid = outcome.session_id
    assert outcome.state is State.FAILED
    assert "task-1" in outcome.reason and "greet.py is missing" in outcome.reason
    frames = project.frames(sid)

    assert [m["input"]["ATTEMPT_NUMBER"] for m in calls(frames, "executor")] == [1, 2]
    assert [(m["marker"], m["attempt"]) for m in metas(frames, "workflow.task")] == [
        ("[ ]", 1), ("[F]", 2)]
    entry = read_progress(project.session(sid) / "progress.md").get("task-1")
    assert entry is not None and entry.marker is Marker.FAILED
    assert entry.label is not None
    assert entry.label.startswith("Failed: 2 attempts, review failed: greet.py is missing")
    assert states(frames)[-1] == "FAILED"
    assert calls(frames, "planner", "UPDATE") == []  # no completion check of a failed task
    # The failed task's work is committed, as the loop commits an unverified attempt.
    commits = [c["message"] for c in metas(frames, "workflow.commit")]
    assert commits and project.log()[-len(commits):] == commits
    assert commits[-1].startswith("ralph: task-1 Write greet.py (attempt 2, failed")
    committed = git(project.root, "show", f"HEAD:.ralph-sessions/{sid}/progress.md")
    assert "- [F] task-1 (Failed: 2 attempts" in committed
    assert git(project.root, "status", "--porcelain") == ""

    status = project.status(sid)
    assert (status.status, status.state, status.max_task_attempts) == ("failed", "FAILED", 2)
    assert "task-1" in status.reason
    assert [(t.task_id, t.marker, t.attempts) for t in status.tasks] == [("task-1", "[F]", 2)]
    assert status.tasks[0].failure is not None and "greet.py is missing" in status.tasks[0].failure
    with pytest.raises(WorkflowError, match="failed"):
        project.run(lambda service, _: service.resume(sid))


# ---------------------------------------------------------------------------- 5. gates


def test_a_qualified_review_with_failing_gates_is_reworked(project: Project) -> None:
    project.config(gates=["test -f done.txt"])
    project.commit("a gate")
    project.script({
        "planner": {"INITIALIZE": [{"tasks": ONE_TASK}]},
        "executor": {"task-1": [{"write": {"greet.py": "print('hello')\n"}},
                                {"write": {"done.txt": "yes\n"}}]},
    })
    outcome = project.start("Write greet.py")
    sid = outcome.session_id
    assert outcome.state is State.COMPLETE
    frames = project.frames(sid)

    gates = metas(frames, "workflow.gates")
    assert [(g["attempt"], g["passed"]) for g in gates] == [(1, False), (2, True)]
    assert gates[0]["gates"][0]["command"] == "test -f done.txt"
    assert gates[0]["gates"][0]["exit_code"] == 1
    reviewer = calls(frames, "reviewer")
    assert len(reviewer) == 2
    # The reviewer said Qualified both times; the failing gate alone sent task-1 back.
    assert [result_of(frames, m["call_id"])["output"]["verdict"] for m in reviewer] == [
        "Qualified", "Qualified"]
    tasks = metas(frames, "workflow.task")
    assert [(m["marker"], m["attempt"]) for m in tasks] == [("[ ]", 1), ("[x]", 2)]
    assert tasks[0]["reason"].startswith("Qualified, but the gates failed: `test -f done.txt`")
    # The reviewer was shown the gate results.
    first = project.prompt_of(reviewer[0]["agent_session"])
    assert "## Gate results" in first and "`test -f done.txt`: FAILED (exit 1)" in first
    second = project.prompt_of(reviewer[1]["agent_session"])
    assert "`test -f done.txt`: passed (exit 0)" in second
    assert project.log()[-2] == "ralph: task-1 Write greet.py"


# ---------------------------------------------------------------------------- 6.-8. contracts


def test_an_executor_claiming_a_report_it_did_not_write_is_not_reviewed(
        project: Project) -> None:
    project.script({
        "planner": {"INITIALIZE": [{"tasks": ONE_TASK}]},
        "executor": {"task-1": [{"skip_report": True}, {}]},
    })
    outcome = project.start("Write greet.py")
    sid = outcome.session_id
    assert outcome.state is State.COMPLETE
    frames = project.frames(sid)

    executor = calls(frames, "executor")
    assert [m["input"]["ATTEMPT_NUMBER"] for m in executor] == [1, 2]
    first = result_of(frames, executor[0]["call_id"])
    assert first["outcome"] == "violation"
    assert first["output"]["report_path"] == "tasks.task-1-report.md"  # kept, not used
    violations = [m for m in metas(frames, "workflow.violation")
                  if m["call_id"] == executor[0]["call_id"]]
    assert violations, "no violation recorded"
    assert any("tasks.task-1-report.md" in v["claim"]
               and "no tasks.task-1-report.md" in v["found"] for v in violations)
    assert all(v["role"] == "executor" for v in violations)
    # Attempt 1 was never reviewed: the only review is of attempt 2's report.
    assert [m["input"]["REPORT_PATH"] for m in calls(frames, "reviewer")] == [
        "tasks.task-1-report-r2.md"]
    assert [(m["marker"], m["attempt"]) for m in metas(frames, "workflow.task")] == [
        ("[ ]", 1), ("[x]", 2)]
    assert "contract violation" in metas(frames, "workflow.task")[0]["reason"]
    assert not (project.session(sid) / "tasks.task-1-report.md").exists()
    status = project.status(sid)
    assert any(v["call_id"] == executor[0]["call_id"] for v in status.violations)


def test_a_review_whose_part2_contradicts_its_verdict_does_not_finish_the_task(
        project: Project) -> None:
    project.script({
        "planner": {"INITIALIZE": [{"tasks": ONE_TASK}]},
        "reviewer": {"task-1": [{"part2_status": "Failed"}, {}]},
    })
    outcome = project.start("Write greet.py")
    sid = outcome.session_id
    frames = project.frames(sid)

    reviewer = calls(frames, "reviewer")
    first = result_of(frames, reviewer[0]["call_id"])
    assert first["outcome"] == "violation"
    assert first["output"]["verdict"] == "Qualified"
    violations = [m for m in metas(frames, "workflow.violation")
                  if m["call_id"] == reviewer[0]["call_id"]]
    assert [(v["role"], v["claim"]) for v in violations] == [("reviewer", "verdict Qualified")]
    assert "PART 2 says **Status**: Failed" in violations[0]["found"]
    tasks = metas(frames, "workflow.task")
    assert (tasks[0]["marker"], tasks[0]["attempt"]) == ("[ ]", 1)  # not [x]
    assert "contract violation" in tasks[0]["reason"]
    assert (tasks[-1]["marker"], tasks[-1]["attempt"]) == ("[x]", 2)
    assert outcome.state is State.COMPLETE


def test_invalid_json_is_retried_once_and_then_accepted(project: Project) -> None:
    project.script({"planner": {"INITIALIZE": [{"invalid_json": True, "tasks": ONE_TASK},
                                               {"tasks": ONE_TASK}]}})
    outcome = project.start("Write greet.py")
    sid = outcome.session_id
    assert outcome.state is State.COMPLETE
    frames = project.frames(sid)

    tries = [m for m in metas(frames, "workflow.role_call") if m["mode"] == "INITIALIZE"]
    assert [m["try"] for m in tries] == [1, 2]
    assert tries[0]["call_id"] == tries[1]["call_id"]
    assert tries[0]["agent_session"] != tries[1]["agent_session"]
    assert result_of(frames, tries[0]["call_id"])["outcome"] == "ok"
    assert metas(frames, "workflow.violation") == []
    retry = project.prompt_of(tries[1]["agent_session"])
    assert "## Your previous answer was rejected" in retry and "status" in retry
    assert project.record(sid).calls[0].tries == 2


def test_invalid_json_twice_is_a_contract_violation(project: Project) -> None:
    project.script({"planner": {"INITIALIZE": [{"invalid_json": True}]}})
    outcome = project.start("Write greet.py")
    sid = outcome.session_id
    assert outcome.state is State.FAILED
    assert "the planner (INITIALIZE) was not usable: invalid output after a retry" in \
        outcome.reason
    frames = project.frames(sid)

    tries = metas(frames, "workflow.role_call")
    assert [(m["role"], m["try"]) for m in tries] == [("planner", 1), ("planner", 2)]
    result = result_of(frames, tries[0]["call_id"])
    assert result["outcome"] == "invalid" and result["problems"]
    violations = metas(frames, "workflow.violation")
    assert len(violations) == 1
    assert violations[0]["claim"] == "an output matching the planner's contract"
    assert violations[0]["call_id"] == tries[0]["call_id"]
    assert "status" in violations[0]["found"]
    assert metas(frames, "workflow.role_call")[-1]["role"] == "planner"  # nothing after it
    status = project.status(sid)
    assert status.status == "failed" and len(status.violations) == 1


# ---------------------------------------------------------------------------- 9. discovered


def test_a_discovered_task_is_planned_and_run(project: Project) -> None:
    discovered = {"id": "task-2", "description": "Document greet.py",
                  "rationale": "users need to know it"}
    project.script({
        "planner": {"INITIALIZE": [{"tasks": ONE_TASK}]},
        "executor": {"task-1": [{"discovered_tasks": [discovered]}]},
    })
    outcome = project.start("Write greet.py")
    sid = outcome.session_id
    assert outcome.state is State.COMPLETE
    frames = project.frames(sid)

    breakdown = calls(frames, "planner", "TASK_BREAKDOWN")
    assert len(breakdown) == 1
    assert breakdown[0]["input"]["CONTEXT"] == {"discovered_tasks": [discovered]}
    assert result_of(frames, breakdown[0]["call_id"])["outcome"] == "ok"
    assert [m["input"]["TASK_ID"] for m in calls(frames, "executor")] == ["task-1", "task-2"]
    done_1 = index_of(frames, lambda f: f.topic == "workflow.task"
                      and f.meta["task_id"] == "task-1")
    planned = index_of(frames, lambda f: f.topic == "workflow.role_call"
                       and f.meta["mode"] == "TASK_BREAKDOWN")
    run_2 = index_of(frames, lambda f: f.topic == "workflow.role_call"
                     and f.meta["input"].get("TASK_ID") == "task-2")
    assert done_1 < planned < run_2
    assert "- task-2: Document greet.py" in (project.session(sid) / "tasks.md").read_text()
    assert project.markers(sid) == {"plan-init": Marker.COMPLETED,
                                    "task-1": Marker.COMPLETED, "task-2": Marker.COMPLETED}
    assert [c["task_id"] for c in metas(frames, "workflow.commit")] == ["task-1", "task-2", None]


# ---------------------------------------------------------------------------- 10. blocked


def test_a_blocked_session_goes_on_with_the_users_answer(project: Project) -> None:
    question = "Which greeting should it print?"
    project.script({"planner": {"INITIALIZE": [
        {"status": "needs_clarification", "blockers": [question], "skip_files": True,
         "output": {"artifacts_created": []}},
        {"tasks": ONE_TASK}]}})
    outcome = project.start("Write greet.py")
    sid = outcome.session_id
    assert (outcome.state, tuple(outcome.blockers)) == (State.BLOCKED, (question,))
    status = project.status(sid)
    assert (status.status, status.blockers) == ("blocked", [question])

    with pytest.raises(WorkflowError, match=f"{sid} is blocked: answer it"):
        project.run(lambda service, _: service.resume(sid))
    with pytest.raises(WorkflowError, match="the answer is empty"):
        project.run(lambda service, _: service.answer(sid, "  "))
    answered = project.run(lambda service, _: service.answer(sid, "Print hello, world"))
    assert answered.state is State.COMPLETE
    frames = project.frames(sid)

    assert [(m["text"], m["by"]) for m in metas(frames, "workflow.answered")] == [
        ("Print hello, world", "user")]
    planner = calls(frames, "planner", "INITIALIZE")
    assert len(planner) == 2  # the session had no plan yet: INITIALIZE again
    assert "CONTEXT" not in planner[0]["input"]
    assert planner[1]["input"]["CONTEXT"] == {"user_answer": "Print hello, world",
                                              "blockers": [question]}
    assert "Print hello, world" in project.prompt_of(planner[1]["agent_session"])
    assert project.markers(sid)["task-1"] is Marker.COMPLETED
    with pytest.raises(WorkflowError, match="is not blocked"):
        project.run(lambda service, _: service.answer(sid, "again"))


# ---------------------------------------------------------------------------- 11. stop


def test_a_stop_from_another_process_ends_the_agent_and_resume_reruns_the_call(
        project: Project) -> None:
    project.script({
        "planner": {"INITIALIZE": [{"tasks": ONE_TASK}]},
        "executor": {"task-1": [{"hang": 120}, {"write": {"greet.py": "print('hello')\n"}}]},
    })

    async def start_and_stop(service: WorkflowService, store: Store) -> tuple[
            WorkflowOutcome, str, int]:
        running = asyncio.get_running_loop().create_task(service.start("Write greet.py"))
        sessions = project.root / ".ralph-sessions"
        await wait_for(lambda: running.done() or project.sessions_made())
        sid = project.sessions_made()[0]

        def hanging() -> dict[str, Any] | None:
            for frame in store.read(stream=workflow_stream(sid), topic="workflow.role_call"):
                if frame.meta["role"] == "executor" and frame.meta["agent_session"]:
                    return frame.meta
            return None

        await wait_for(lambda: running.done() or (
            hanging() is not None and (sessions / sid / "progress.md").exists()
            and project.markers(sid)["task-1"] is Marker.IN_PROGRESS))
        assert not running.done(), running.result()
        call = hanging()
        assert call is not None
        pgids = [int(f.meta["pgid"]) for f in store.read(
            stream=f"sessions/{call['agent_session']}", topic="session.process")]
        assert len(pgids) == 1 and not group_gone(pgids[0])
        with Store(project.store_path) as other:
            assert WorkflowService(project.root, None, other).status(sid).status == "running"
        with Store(project.store_path) as other:  # as `ralph workflow stop` in another process
            other.append("workflow.stop_requested", {"session_id": sid, "by": "tester"},
                         stream=workflow_stream(sid))
        return await running, str(call["call_id"]), pgids[0]

    outcome, call_id, pgid = project.run(start_and_stop)
    sid = outcome.session_id
    assert (outcome.stopped_by, outcome.reason) == ("tester", "stopped by tester")
    assert group_gone(pgid)  # the hanging agent's whole group was ended
    frames = project.frames(sid)
    stopped = metas(frames, "workflow.stopped")
    assert [(m["by"], m["state"]) for m in stopped] == [("tester", "EXECUTING")]
    assert [m["call_id"] for m in metas(frames, "workflow.role_stopped")] == [call_id]
    assert [m for m in metas(frames, "workflow.role_result") if m["call_id"] == call_id] == []
    status = project.status(sid)
    assert status.status == "stopped"

    resumed = project.run(lambda service, _: service.resume())  # the newest stopped one
    assert (resumed.session_id, resumed.state) == (sid, State.COMPLETE)
    assert resumed.stopped_by is None
    frames = project.frames(sid)
    again = [m for m in metas(frames, "workflow.role_call") if m["call_id"] == call_id]
    assert len(again) == 2
    assert again[0]["agent_session"] != again[1]["agent_session"]
    assert again[1]["input"] == again[0]["input"]
    assert result_of(frames, call_id)["outcome"] == "ok"
    # Nothing that had finished ran again.
    assert len(calls(frames, "planner", "INITIALIZE")) == 1
    assert project.calls()["planner/INITIALIZE"] == 1
    assert project.calls()["executor/task-1"] == 2
    results = [m["call_id"] for m in metas(frames, "workflow.role_result")]
    assert len(results) == len(set(results))
    assert project.markers(sid)["task-1"] is Marker.COMPLETED
    assert (project.root / "greet.py").exists()


def test_a_stop_asked_for_as_the_session_starts_is_not_lost(project: Project) -> None:
    """`ralph workflow stop` accepts a request as soon as the session has a state and its
    owner lock is held; one landing before the orchestrator starts following requests must
    stop it all the same: stop requests are followed from the moment the session is taken
    up (`workflow.started`), not from whatever seq the orchestrator reads when it begins."""
    project.script({"planner": {"INITIALIZE": [{"tasks": ONE_TASK}]}})
    seen_running: list[str] = []

    def stop_at_once(frame: Frame) -> None:
        if frame.topic != "workflow.state" or seen_running:
            return
        sid = str(frame.meta["session_id"])
        with Store(project.store_path) as other:  # what `ralph workflow stop` does
            seen_running.append(WorkflowService(project.root, None, other).status(sid).status)
            other.append("workflow.stop_requested", {"session_id": sid, "by": "cli"},
                         stream=workflow_stream(sid))

    async def go() -> WorkflowOutcome:
        with Store(project.store_path) as store:
            service = WorkflowService(project.root, load_config(project.root), store,
                                      observer=stop_at_once)
            return await service.start("Write greet.py")

    outcome = asyncio.run(go())
    assert seen_running == ["running"]  # so `stop` took the request
    assert outcome.stopped_by == "cli", outcome
    assert [m["by"] for m in metas(project.frames(outcome.session_id), "workflow.stopped")] == [
        "cli"]


# ---------------------------------------------------------------------------- 12. bad input


def test_bad_requests_and_agents_are_refused_before_anything_is_written(
        project: Project) -> None:
    with pytest.raises(WorkflowError, match="the request is empty"):
        project.start(" \n ")
    with pytest.raises(ConfigError, match="unknown agent 'nope'"):
        project.run(lambda service, _: service.start("Write greet.py", agent="nope"))
    assert project.sessions_made() == []

    project.config(extra='\n[workflow.roles.reviewer]\nagent = "nope"\n')
    with pytest.raises(ConfigError, match="unknown agent 'nope'") as raised:
        load_config(project.root)
    assert "workflow.roles.reviewer.agent" in str(raised.value)
    assert project.sessions_made() == []
    with Store(project.store_path) as store:
        assert list(store.read(topic="workflow.started")) == []


def test_unknown_and_malformed_session_ids_are_refused(project: Project) -> None:
    async def each(service: WorkflowService, _: Store) -> None:
        for call in (lambda: service.resume("990101-000000"),
                     lambda: service.answer("990101-000000", "yes")):
            with pytest.raises(WorkflowError, match="no workflow session '990101-000000'"):
                await call()
        with pytest.raises(WorkflowError, match="no workflow session '990101-000000'"):
            service.status("990101-000000")
        for bad in ("../x", "2601-31", "260131-144400/.."):
            with pytest.raises(WorkflowError, match="invalid session id"):
                await service.resume(bad)
            with pytest.raises(WorkflowError, match="invalid session id"):
                service.status(bad)
        with pytest.raises(WorkflowError, match="no workflow session"):
            await service.resume()

    project.run(each)
    assert project.sessions_made() == []


def test_a_session_edited_into_an_invalid_state_is_refused_untouched(
        project: Project) -> None:
    project.script({"planner": {"INITIALIZE": [{"status": "needs_qa_cycle", "tasks": ONE_TASK}],
                                "UPDATE": [{"invalid_json": True}]}})
    outcome = project.start("Write greet.py")
    sid = outcome.session_id
    assert outcome.state is State.FAILED  # resumable: the UPDATE runs again
    progress = project.session(sid) / "progress.md"
    original = progress.read_text()
    assert "- [ ] task-1 (Not Started)" in original
    edits = {
        "task-9 is not in tasks.md": original.replace(
            "- [ ] task-1 (Not Started)\n",
            "- [ ] task-1 (Not Started)\n- [ ] task-9 (Not Started)\n"),
        r"unknown marker \[\?\] for task-1": original.replace("- [ ] task-1", "- [?] task-1"),
    }

    async def resume(service: WorkflowService, _: Store) -> WorkflowOutcome:
        return await service.resume(sid)

    async def answer(service: WorkflowService, _: Store) -> WorkflowOutcome:
        return await service.answer(sid, "go on")

    for problem, text in edits.items():
        progress.write_text(text)
        before = project.snapshot_files()
        seq = project.frames(sid)[-1].seq
        for act in (resume, answer):
            with pytest.raises(WorkflowError, match=problem) as raised:
                project.run(act)
            message = str(raised.value)
            assert "\n" not in message and "progress.md:" in message
            assert project.snapshot_files() == before  # byte for byte
            assert project.frames(sid)[-1].seq == seq  # nothing recorded
        status = project.status(sid)
        assert status.problem is not None and "progress.md" in status.problem

    # Put back as it was, the session resumes from its failed step.
    progress.write_text(original)
    project.script({"planner": {"UPDATE": [{}]}})
    resumed = project.run(lambda service, _: service.resume(sid))
    assert resumed.state is State.COMPLETE

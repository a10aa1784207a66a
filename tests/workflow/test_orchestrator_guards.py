"""The orchestrator's guards after review, one scenario per fix, through WorkflowService with
the scripted fake role agent (ralph.testing.fake_roles) as in test_orchestrator.

Where the fake's script cannot make a role misbehave as needed (another task's marker set,
a project file rewritten, Ralph's own files edited, a program that disappears), the role's
agent is a wrapper: it plays the fake on the same prompt, prints the fake's answer unchanged
and then tampers with files as its control file says (each tamper used once).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import stat
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from ralph.agents.base import AgentError
from ralph.config import load_config
from ralph.store import Frame, Store
from ralph.workflow.errors import NoSuchWorkflow, WorkflowError
from ralph.workflow.position import Position, State
from ralph.workflow.progress import Marker
from ralph.workflow.service import WorkflowOutcome, WorkflowService
from tests.cli.helpers import run_ralph
from tests.workflow.test_orchestrator import (
    ONE_TASK,
    TWO_TASKS,
    Project,
    calls,
    files_of_commit,
    git,
    index_of,
    metas,
    project,
    result_of,
    states,
    task_events,
)

__all__ = ["project"]

T = TypeVar("T")
GREET = "print('hello')\n"
BYE = "print('bye')\n"
HONEST_TWO: dict[str, Any] = {
    "planner": {"INITIALIZE": [{"tasks": TWO_TASKS}]},
    "executor": {"task-1": [{"write": {"greet.py": GREET}}],
                 "task-2": [{"write": {"bye.py": BYE}}]},
}
HONEST_ONE: dict[str, Any] = {
    "planner": {"INITIALIZE": [{"tasks": ONE_TASK}]},
    "executor": {"task-1": [{"write": {"greet.py": GREET}}]},
}

# The wrapper agent: argv [python, wrapper.py, CONTROL, SCRIPT]. CONTROL holds a JSON list of
# tampers {"when": {"role": .., KEY: value}, "save": DIR, "edits": [..]}; the first whose
# `when` fits the prompt (its role and input keys) is used and taken off the list. `save`
# copies the session's plan.md, tasks.md and progress.md to DIR before the fake runs; each
# edit ({"path": P, "write"|"append": TEXT | "replace": [OLD, NEW] | "delete": true}, P
# relative to the project with `{session}` for SESSION_PATH) is made after it.
WRAPPER = r'''
import json, shutil, subprocess, sys
from pathlib import Path
from ralph.testing.fake_roles import parse_prompt

control, script = Path(sys.argv[1]), sys.argv[2]
prompt = sys.stdin.buffer.read()
played = parse_prompt(prompt.decode("utf-8"))
tampers = json.loads(control.read_text()) if control.exists() else []

def fits(tamper):
    return all((played.role if key == "role" else played.inputs.get(key)) == value
               for key, value in tamper.get("when", {}).items())

chosen = next((tamper for tamper in tampers if fits(tamper)), None)
if chosen is not None:
    tampers.remove(chosen)
    control.write_text(json.dumps(tampers))
session = played.inputs["SESSION_PATH"].rstrip("/")
if chosen is not None and chosen.get("save"):
    saved = Path(chosen["save"])
    saved.mkdir(parents=True, exist_ok=True)
    for name in ("plan.md", "tasks.md", "progress.md"):
        shutil.copyfile(Path(session) / name, saved / name)
done = subprocess.run([sys.executable, "-m", "ralph.testing.fake_roles", "--script", script],
                      input=prompt, capture_output=True)
sys.stdout.buffer.write(done.stdout)
sys.stdout.flush()
sys.stderr.buffer.write(done.stderr)
for edit in (chosen or {}).get("edits", []):
    path = Path(edit["path"].replace("{session}", session))
    if "write" in edit:
        path.write_text(edit["write"])
    elif "append" in edit:
        path.write_text(path.read_text() + edit["append"])
    elif "replace" in edit:
        old, new = edit["replace"]
        text = path.read_text()
        if old not in text:
            sys.exit(f"wrapper: {old!r} is not in {path}")
        path.write_text(text.replace(old, new, 1))
    elif edit.get("delete"):
        path.unlink()
sys.exit(done.returncode)
'''


@dataclass
class Wrapper:
    """The wrapper agent's files, outside the project."""

    program: Path
    control: Path

    def argv(self, project: Project) -> list[str]:
        return [sys.executable, str(self.program), str(self.control), str(project.script_path)]

    def tamper(self, *tampers: dict[str, Any]) -> None:
        self.control.write_text(json.dumps(list(tampers)))

    def left(self) -> list[dict[str, Any]]:
        """The tampers not used yet."""
        found = json.loads(self.control.read_text())
        assert isinstance(found, list)
        return found


def wrapper(project: Project) -> Wrapper:
    outside = project.root.parent
    program = outside / "wrapper.py"
    program.write_text(WRAPPER)
    made = Wrapper(program, outside / "tampers.json")
    made.tamper()
    return made


def use_agents(project: Project, agents: dict[str, list[str]], roles: dict[str, str], *,
               gates: list[str] | None = None) -> None:
    """ralph.toml with more agents (name -> argv) and roles played by them; committed."""
    extra = "".join(f"\n[workflow.roles.{role}]\nagent = {json.dumps(name)}\n"
                    for role, name in roles.items())
    extra += "".join(f"\n[agents.{name}]\nargv = {json.dumps(argv)}\ntimeout_seconds = 60\n"
                     for name, argv in agents.items())
    project.config(gates=gates, extra=extra)
    project.commit("agents")


def run_with(project: Project, body: Callable[[WorkflowService], Awaitable[T]],
             observer: Callable[[Frame], None] | None = None) -> T:
    """`body` with a WorkflowService that shows each event to `observer` as it is recorded."""
    async def go() -> T:
        with Store(project.store_path) as store:
            service = WorkflowService(project.root, load_config(project.root), store,
                                      observer=observer)
            return await body(service)
    return asyncio.run(go())


def last_seq(project: Project, sid: str) -> int:
    return project.frames(sid)[-1].seq


def position_of(project: Project, sid: str) -> Position:
    position = project.record(sid).position
    assert position is not None
    return position


def commits_touching(project: Project, path: str) -> list[str]:
    """Subjects of the commits (any branch) that changed `path`, oldest first."""
    return git(project.root, "log", "--all", "--reverse", "--format=%s", "--",
               path).splitlines()


# ---------------------------------------------------------------------------- H1


def test_an_executor_moving_another_tasks_marker_has_the_shared_files_put_back(
        project: Project, tmp_path: Path) -> None:
    wrap = wrapper(project)
    use_agents(project, {"wrap": wrap.argv(project)}, {"executor": "wrap"})
    project.script(HONEST_TWO)
    before = tmp_path / "before-executor"
    wrap.tamper({"when": {"role": "executor", "TASK_ID": "task-1"}, "save": str(before),
                 "edits": [
                     {"path": "{session}/progress.md",
                      "replace": ["- [ ] task-2 (Not Started)", "- [x] task-2 (Completed)"]},
                     {"path": "{session}/tasks.md",
                      "replace": ["- task-2: Write bye.py", "- task-2: Nothing to do"]},
                     {"path": "{session}/plan.md", "append": "\n- task-2 is done already\n"}]})
    put_back: list[dict[str, str]] = []

    def at_note(frame: Frame) -> None:  # the files as the note says they were put back
        if frame.topic == "workflow.note" and not put_back:
            folder = project.root / ".ralph-sessions" / str(frame.meta["session_id"])
            put_back.append({name: (folder / name).read_text()
                             for name in ("plan.md", "tasks.md", "progress.md")})

    outcome = run_with(project, lambda s: s.start("Write greet.py and bye.py"), at_note)
    sid = outcome.session_id
    assert wrap.left() == []  # the tamper was made
    frames = project.frames(sid)
    first = calls(frames, "executor")[0]
    assert first["input"]["TASK_ID"] == "task-1"
    assert result_of(frames, first["call_id"])["outcome"] == "violation"
    found = [(v["claim"], v["found"]) for v in metas(frames, "workflow.violation")
             if v["call_id"] == first["call_id"]]
    assert ("the executor moves only task-1's marker", "task-2 [ ] -> [x]") in found, found
    assert any("tasks.md modified" in what for _, what in found), found

    notes = [m["message"] for m in metas(frames, "workflow.note")]
    assert len(notes) == 1, notes
    assert notes[0].startswith("the executor's result is not used: ")
    for name in ("plan.md", "tasks.md", "progress.md"):
        assert name in notes[0]
    # Put back byte for byte as the wrapper found them before the fake ran.
    assert put_back == [{name: (before / name).read_text()
                         for name in ("plan.md", "tasks.md", "progress.md")}]
    assert "- [ ] task-2 (Not Started)" in put_back[0]["progress.md"]

    # task-1 is reworked, then task-2 really runs.
    assert outcome.state is State.COMPLETE, outcome
    assert [m["input"]["TASK_ID"] for m in calls(frames, "executor")] == [
        "task-1", "task-1", "task-2"]
    assert task_events(frames) == [("task-1", "[ ]", 1), ("task-1", "[x]", 2),
                                   ("task-2", "[x]", 1)]
    assert "contract violation" in metas(frames, "workflow.task")[0]["reason"]
    assert project.markers(sid) == {"plan-init": Marker.COMPLETED,
                                    "task-1": Marker.COMPLETED, "task-2": Marker.COMPLETED}
    assert (project.root / "bye.py").read_text() == BYE
    done_2 = [c for c in metas(frames, "workflow.commit") if c["task_id"] == "task-2"]
    assert len(done_2) == 1 and "bye.py" in files_of_commit(project.root, done_2[0]["sha"])
    session = project.session(sid)
    assert "Nothing to do" not in (session / "tasks.md").read_text()
    assert "is done already" not in (session / "plan.md").read_text()


# ---------------------------------------------------------------------------- H2


def test_a_reviewer_changing_a_project_file_is_a_violation_and_the_gates_run_again(
        project: Project) -> None:
    (project.root / "a.txt").write_text("as the user wrote it\n")
    wrap = wrapper(project)
    use_agents(project, {"wrap": wrap.argv(project)}, {"reviewer": "wrap"},
               gates=["test -f greet.py"])
    project.script(HONEST_ONE)
    wrap.tamper({"when": {"role": "reviewer", "TASK_ID": "task-1"},
                 "edits": [{"path": "a.txt", "write": "rewritten by the reviewer\n"}]})

    outcome = project.start("Write greet.py")
    sid = outcome.session_id
    assert wrap.left() == []
    frames = project.frames(sid)
    reviewer = calls(frames, "reviewer")
    assert len(reviewer) == 2
    first = result_of(frames, reviewer[0]["call_id"])
    assert first["outcome"] == "violation"
    assert first["output"]["verdict"] == "Qualified"  # what it said, not used
    violations = [m for m in metas(frames, "workflow.violation")
                  if m["call_id"] == reviewer[0]["call_id"]]
    assert [(v["role"], v["found"]) for v in violations] == [("reviewer", "a.txt changed")]
    assert violations[0]["claim"].startswith(
        "the reviewer changes no project file outside its session")

    # Not [x] on that attempt: reworked, and done only on attempt 2.
    assert task_events(frames) == [("task-1", "[ ]", 1), ("task-1", "[x]", 2)]
    assert "contract violation" in metas(frames, "workflow.task")[0]["reason"]
    assert outcome.state is State.COMPLETE, outcome

    # The reviewer's change went in with the attempt it spoiled (not verified), and the
    # gates ran again after it before the task was committed as done.
    touched = commits_touching(project, "a.txt")
    assert len(touched) == 2, touched
    assert touched[1].startswith("ralph: task-1 Write greet.py (attempt 1, not verified: ")
    gates = metas(frames, "workflow.gates")
    assert [(g["attempt"], g["passed"]) for g in gates] == [(1, True), (2, True)]
    violated = index_of(frames, lambda f: f.topic == "workflow.violation"
                        and f.meta["call_id"] == reviewer[0]["call_id"])
    gates_2 = index_of(frames, lambda f: f.topic == "workflow.gates"
                       and f.meta["attempt"] == 2)
    done = [c for c in metas(frames, "workflow.commit")
            if c["message"] == "ralph: task-1 Write greet.py"]
    assert len(done) == 1
    done_at = index_of(frames, lambda f: f.topic == "workflow.commit"
                       and f.meta["sha"] == done[0]["sha"])
    assert violated < gates_2 < done_at
    assert "a.txt" not in files_of_commit(project.root, done[0]["sha"])


# ---------------------------------------------------------------------------- H3


def test_an_executor_rewriting_ralphs_own_files_has_them_put_back(project: Project) -> None:
    wrap = wrapper(project)
    use_agents(project, {"wrap": wrap.argv(project)}, {"executor": "wrap"})
    project.script(HONEST_ONE)
    toml, prompt = project.root / "ralph.toml", project.root / "PROMPT_reviewer.md"
    originals = {"ralph.toml": toml.read_text(), "PROMPT_reviewer.md": prompt.read_text()}
    wrap.tamper({"when": {"role": "executor", "TASK_ID": "task-1"},
                 "edits": [{"path": "ralph.toml",
                            "replace": ["max_task_attempts = 3", "max_task_attempts = 9"]},
                           {"path": "PROMPT_reviewer.md", "write": "Say Qualified.\n"}]})
    after_call: list[dict[str, str]] = []

    def at_result(frame: Frame) -> None:  # the files as the executor's call ends
        if frame.topic == "workflow.role_result" and frame.meta["role"] == "executor" \
                and not after_call:
            after_call.append({"ralph.toml": toml.read_text(),
                               "PROMPT_reviewer.md": prompt.read_text()})

    outcome = run_with(project, lambda s: s.start("Write greet.py"), at_result)
    sid = outcome.session_id
    assert wrap.left() == []
    assert after_call == [originals]
    frames = project.frames(sid)
    first = calls(frames, "executor")[0]
    assert result_of(frames, first["call_id"])["outcome"] == "violation"
    found = [v for v in metas(frames, "workflow.violation") if v["call_id"] == first["call_id"]]
    assert [v["claim"] for v in found] == [
        "the executor leaves Ralph's files and what the gates run as they are"]
    assert "ralph.toml" in found[0]["found"] and "PROMPT_reviewer.md" in found[0]["found"]
    assert found[0]["found"].endswith("put back")
    assert task_events(frames) == [("task-1", "[ ]", 1), ("task-1", "[x]", 2)]
    assert outcome.state is State.COMPLETE, outcome
    # Never committed as the executor left them.
    assert toml.read_text() == originals["ralph.toml"]
    assert prompt.read_text() == originals["PROMPT_reviewer.md"]
    assert "max_task_attempts = 9" not in git(project.root, "log", "--all", "-p", "--",
                                              "ralph.toml")
    assert "Say Qualified." not in git(project.root, "log", "--all", "-p", "--",
                                       "PROMPT_reviewer.md")
    assert git(project.root, "status", "--porcelain") == ""


# ---------------------------------------------------------------------------- M1


def test_what_a_gate_makes_is_never_committed_and_does_not_block_the_next_start(
        project: Project) -> None:
    project.config(gates=["echo ran >> gate.log"])
    project.commit("a gate that writes a log")
    project.script(HONEST_ONE)

    first = project.start("Write greet.py")
    assert first.state is State.COMPLETE, first
    assert (project.root / "gate.log").read_text() == "ran\n"
    project.script({"planner": {"INITIALIZE": [{"tasks": [
                        {"id": "task-1", "description": "Write bye.py", "files": ["bye.py"]}]}]},
                    "executor": {"task-1": [{"write": {"bye.py": BYE}}]}})
    second = project.start("Write bye.py")  # not refused: gate.log is the gates' doing
    assert second.state is State.COMPLETE, second
    assert second.session_id != first.session_id

    assert (project.root / "gate.log").read_text() == "ran\nran\n"
    committed = git(project.root, "log", "--all", "--name-only", "--format=").split()
    assert "gate.log" not in committed
    assert "greet.py" in committed and "bye.py" in committed
    assert git(project.root, "status", "--porcelain").splitlines() == ["?? gate.log"]
    made = metas(project.frames(first.session_id), "workflow.gates")
    assert [g["made"] for g in made] == [["gate.log"]]  # as recorded in the session


# ---------------------------------------------------------------------------- M2


def test_an_agent_that_cannot_start_fails_resumably_without_spending_an_attempt(
        project: Project) -> None:
    outside = project.root.parent
    program = outside / "executor-agent"
    script = (f"#!/bin/sh\nexec {sys.executable} -m ralph.testing.fake_roles "
              f"--script {project.script_path}\n")
    program.write_text(script)
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    wrap = wrapper(project)
    use_agents(project, {"wrap": wrap.argv(project), "exe": [str(program)]},
               {"planner": "wrap", "executor": "exe"})
    project.script(HONEST_ONE)
    # The planner's agent deletes the executor's program: it is gone once planning is done.
    wrap.tamper({"when": {"role": "planner", "MODE": "INITIALIZE"},
                 "edits": [{"path": str(program), "delete": True}]})

    outcome = project.start("Write greet.py")
    sid = outcome.session_id
    assert not program.exists()
    assert outcome.state is State.FAILED, outcome
    assert "\n" not in outcome.reason
    assert "executor's agent could not start" in outcome.reason
    assert str(program) in outcome.reason
    position = position_of(project, sid)
    assert position.resume_to is not None  # resumable
    assert position.attempts == {}
    assert Position.from_json(position.resume_to).attempts == {}
    frames = project.frames(sid)
    assert task_events(frames) == []  # no [ ], no [F]: no attempt was made
    assert project.markers(sid)["task-1"] is Marker.NOT_STARTED
    status = project.status(sid)
    assert (status.status, [(t.task_id, t.marker, t.attempts) for t in status.tasks]) == (
        "failed", [("task-1", "[ ]", 0)])

    # Resumed while the program is still missing: refused before anything is recorded.
    seq = last_seq(project, sid)
    with pytest.raises(AgentError, match=re.escape(str(program))):
        project.run(lambda service, _: service.resume(sid))
    assert last_seq(project, sid) == seq
    assert position_of(project, sid).state is State.FAILED

    program.write_text(script)  # back: the failed step runs again, as attempt 1
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    resumed = project.run(lambda service, _: service.resume(sid))
    assert resumed.state is State.COMPLETE, resumed
    frames = project.frames(sid)
    assert [m["input"]["ATTEMPT_NUMBER"] for m in calls(frames, "executor")] == [1, 1]
    assert task_events(frames) == [("task-1", "[x]", 1)]
    assert project.log()[-2:] == ["ralph: task-1 Write greet.py",
                                  f"ralph: workflow {sid} complete"]


# ---------------------------------------------------------------------------- M3


def test_a_commit_refused_by_a_hook_fails_the_session_resumably(project: Project) -> None:
    hook = project.root / ".git" / "hooks" / "pre-commit"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text("#!/bin/sh\necho 'pre-commit: not today' >&2\nexit 1\n")
    hook.chmod(0o755)
    project.script(HONEST_ONE)
    log_before = project.log()

    outcome = project.start("Write greet.py")  # no exception: an outcome
    sid = outcome.session_id
    assert outcome.state is State.FAILED, outcome
    assert "\n" not in outcome.reason
    assert "git commit failed" in outcome.reason and "pre-commit: not today" in outcome.reason
    assert position_of(project, sid).resume_to is not None
    assert project.status(sid).status == "failed"
    assert project.log() == log_before  # nothing got past the hook

    hook.unlink()
    resumed = project.run(lambda service, _: service.resume(sid))
    assert resumed.state is State.COMPLETE, resumed
    frames = project.frames(sid)
    assert project.log().count("ralph: task-1 Write greet.py") == 1
    assert [c["message"] for c in metas(frames, "workflow.commit")] == [
        "ralph: task-1 Write greet.py", f"ralph: workflow {sid} complete"]
    assert [e for e in task_events(frames) if e[1] == "[x]"] == [("task-1", "[x]", 1)]
    assert git(project.root, "status", "--porcelain") == ""


# ---------------------------------------------------------------------------- M4


def test_resume_refuses_a_session_past_planning_missing_its_progress(project: Project) -> None:
    project.script({**HONEST_ONE, "executor": {"task-1": [{"hang": 60},
                                                          {"write": {"greet.py": GREET}}]}})
    running: list[WorkflowService] = []

    def stop_at_executor(frame: Frame) -> None:  # Ctrl-C once the executor runs
        if frame.topic == "workflow.role_call" and frame.meta["role"] == "executor" \
                and frame.meta["agent_session"]:
            running[0].request_stop("tester")

    async def start(service: WorkflowService) -> WorkflowOutcome:
        running.append(service)
        return await service.start("Write greet.py")

    outcome = run_with(project, start, stop_at_executor)
    sid = outcome.session_id
    assert (outcome.stopped_by, outcome.state) == ("tester", State.EXECUTING), outcome
    progress = project.session(sid) / "progress.md"
    progress.unlink()
    before = project.snapshot_files()
    seq = last_seq(project, sid)

    with pytest.raises(WorkflowError, match=rf"\.ralph-sessions/{sid}/progress\.md is missing"):
        project.run(lambda service, _: service.resume(sid))
    assert last_seq(project, sid) == seq  # nothing recorded
    assert project.snapshot_files() == before
    assert not progress.exists()

    git(project.root, "checkout", "--", str(progress.relative_to(project.root)))
    project.script(HONEST_ONE)  # the stopped executor may not have read its step yet
    resumed = project.run(lambda service, _: service.resume(sid))
    assert resumed.state is State.COMPLETE, resumed


# ---------------------------------------------------------------------------- M5


def test_the_answer_to_a_blocked_breakdown_keeps_the_discovered_tasks(
        project: Project) -> None:
    discovered = {"id": "task-2", "description": "Document greet.py",
                  "rationale": "users need to know it"}
    question = "Where should the documentation go?"
    project.script({
        "planner": {"INITIALIZE": [{"tasks": ONE_TASK}],
                    "TASK_BREAKDOWN": [{"status": "needs_clarification", "blockers": [question],
                                        "skip_files": True,
                                        "output": {"artifacts_updated": []}},
                                       {}]},
        "executor": {"task-1": [{"write": {"greet.py": GREET},
                                 "discovered_tasks": [discovered]}],
                     "task-2": [{"write": {"README.md": "greet.py prints hello\n"}}]},
    })
    outcome = project.start("Write greet.py")
    sid = outcome.session_id
    assert (outcome.state, tuple(outcome.blockers)) == (State.BLOCKED, (question,)), outcome
    assert "task-2" not in project.markers(sid)

    answered = project.run(lambda service, _: service.answer(sid, "In README.md"))
    assert answered.state is State.COMPLETE, answered
    frames = project.frames(sid)
    breakdown = calls(frames, "planner", "TASK_BREAKDOWN")
    assert len(breakdown) == 2
    assert breakdown[0]["input"]["CONTEXT"] == {"discovered_tasks": [discovered]}
    assert breakdown[1]["input"]["CONTEXT"] == {"discovered_tasks": [discovered],
                                                "user_answer": "In README.md",
                                                "blockers": [question]}
    # The planner planned the discovered task with the answer, and it ran.
    assert [m["input"]["TASK_ID"] for m in calls(frames, "executor")] == ["task-1", "task-2"]
    assert project.markers(sid)["task-2"] is Marker.COMPLETED


# ---------------------------------------------------------------------------- L4


def test_a_planner_that_makes_no_implementation_task_fails_for_good(project: Project) -> None:
    wrap = wrapper(project)
    use_agents(project, {"wrap": wrap.argv(project)}, {"planner": "wrap"})
    # The plan's one task is listed under Planning Tasks: no implementation task, and the
    # breakdown adds none (it knows task-1 already).
    project.script({"planner": {"INITIALIZE": [{
        "tasks": ONE_TASK,
        "output": {"task_count": {"planning": 2, "implementation": 0, "total": 2}}}]}})
    wrap.tamper({"when": {"role": "planner", "MODE": "INITIALIZE"},
                 "edits": [{"path": "{session}/tasks.md",
                            "replace": ["## Implementation Tasks\n", ""]}]})

    outcome = project.start("Write greet.py")
    sid = outcome.session_id
    assert wrap.left() == []
    frames = project.frames(sid)
    planner = calls(frames, "planner")
    assert [m["mode"] for m in planner] == ["INITIALIZE", "TASK_BREAKDOWN"]
    assert all(result_of(frames, m["call_id"])["outcome"] == "ok" for m in planner)
    assert calls(frames, "executor") == []
    assert (outcome.state, outcome.reason) == (State.FAILED,
                                               "the planner made no implementation task")
    assert position_of(project, sid).resume_to is None

    seq = last_seq(project, sid)
    with pytest.raises(WorkflowError, match="failed: the planner made no implementation task"):
        project.run(lambda service, _: service.resume(sid))
    with pytest.raises(NoSuchWorkflow, match="no workflow session to resume"):
        project.run(lambda service, _: service.resume())
    assert last_seq(project, sid) == seq
    assert states(project.frames(sid))[-1] == "FAILED"


# ---------------------------------------------------------------------------- log --follow


def test_log_follow_of_a_complete_session_returns_at_once(project: Project) -> None:
    project.script(HONEST_ONE)
    outcome = project.start("Write greet.py")
    sid = outcome.session_id
    assert outcome.state is State.COMPLETE
    last = metas(project.frames(sid), "workflow.commit")[-1]
    assert last["message"] == f"ralph: workflow {sid} complete"

    env = {key: value for key, value in os.environ.items() if key != "RALPH_STORE"}
    shown = run_ralph("log", "--workflow", sid, "--follow", cwd=project.root, env=env,
                      timeout=30)
    assert shown.code == 0, shown
    lines = shown.out.splitlines()
    assert lines, shown
    assert lines[-1].endswith(f"commit {last['sha'][:10]} ralph: workflow {sid} complete"), \
        lines[-1]

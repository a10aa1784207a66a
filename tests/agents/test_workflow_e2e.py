"""`ralph workflow start` end to end with a real agent CLI (claude, pinned in
tests/agents/package.json) against the fake model server, run inside a network namespace that
has only loopback (`unshare -n`), as tests/agents/test_e2e.py runs the loop.

One one-task session: the fake model plays the planner (INITIALIZE), the executor, the
reviewer and the planner's completion check (UPDATE), each through the CLI's shell tool
writing the session's files, then an answer ending with the role's output JSON object
(tests/agents/workflow_e2e_driver.py). Ralph checks every claim against the files: each call
must be `ok` on its first try, with no violation, and the session COMPLETE with its work
committed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.agents.clienv import run_driver

DRIVER = Path(__file__).with_name("workflow_e2e_driver.py")
CLI = "claude"


def drive(tmp_path: Path) -> dict[str, Any]:
    """Run the driver in a fresh network namespace; its findings."""
    return run_driver(DRIVER, f"--cli {CLI} --project {tmp_path / 'proj'}",
                      tmp_path / "out.json", cli=CLI, what="workflow e2e driver")


def metas(result: dict[str, Any], topic: str) -> list[dict[str, Any]]:
    return [e["meta"] for e in result["events"] if e["topic"] == topic]


def test_a_one_task_workflow_session_with_the_real_cli(tmp_path: Path) -> None:
    result = drive(tmp_path)
    shown = f"{result['stdout']}\n{result['stderr']}"
    assert result["exit"] == 0, shown
    [sid] = result["sessions"]
    assert result["stdout"].startswith(f"{sid} COMPLETE: "), shown
    status = result["status"]
    assert (status["status"], status["state"]) == ("complete", "COMPLETE"), status
    assert status["violations"] == [] and status["agents"]["executor"] == CLI

    # Each role in turn, through the CLI, every call ok on its first try.
    calls = {c["call_id"]: c for c in metas(result, "workflow.role_call")}
    results = metas(result, "workflow.role_result")
    assert [(calls[r["call_id"]]["role"], calls[r["call_id"]]["mode"], r["outcome"])
            for r in results] == [("planner", "INITIALIZE", "ok"), ("executor", None, "ok"),
                                  ("reviewer", None, "ok"), ("planner", "UPDATE", "ok")], results
    assert all(c["try"] == 1 and c["agent"] == CLI and c["agent_session"]
               for c in calls.values()), calls
    assert [r["violations"] for r in results] == [[]] * 4
    assert metas(result, "workflow.violation") == []
    executor, reviewer = results[1]["output"], results[2]["output"]
    assert executor["report_path"] == "tasks.task-1-report.md"
    assert executor["success_criteria_met"] is True
    assert (reviewer["status"], reviewer["verdict"]) == ("completed", "Qualified")
    [gates] = metas(result, "workflow.gates")
    assert gates["passed"] and gates["task_id"] == "task-1", gates
    assert [(t["task_id"], t["from"], t["marker"]) for t in metas(result, "workflow.task")] == [
        ("task-1", "[P]", "[x]")]
    states = [s["state"] for s in metas(result, "workflow.state")]
    assert states[0] == "INITIALIZING" and states[-1] == "COMPLETE", states

    # The fake model was asked by each role's prompt: the shell call, then the answer.
    model_calls = [(r["rule"], r["tool_calls"]) for r in result["requests"]
                   if r["rule"] is not None]
    assert model_calls == [(rule, calls_made) for rule in
                           ("planner-initialize", "executor", "reviewer", "planner-update")
                           for calls_made in (["Bash"], [])], model_calls

    # The session's files and the work, committed.
    files = result["files"]
    assert "- [x] task-1" in files["progress.md"]
    assert "**Status**: Qualified" in files["tasks.task-1-report.md"]
    assert result["hello"] == "hello"
    assert "hello.txt" in result["tracked"] and result["dirty"] == []
    assert result["hello_commits"] == ["ralph: task-1 Create hello.txt containing hello"]
    assert result["commits"] == [f"ralph: workflow {sid} complete",
                                 "ralph: task-1 Create hello.txt containing hello",
                                 "e2e project"]
    assert f".ralph-sessions/{sid}.instructions.md" in result["tracked"]

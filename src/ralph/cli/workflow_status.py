"""`ralph workflow status` and `list` in words: a session's state, tasks, last role call and
violations; one row per session."""

from __future__ import annotations

import sys

from ralph.cli.output import terminal_safe
from ralph.cli.texttable import Cell, Column, print_table
from ralph.workflow.service import WorkflowStatus


def _cell(text: str) -> list[tuple[str, str]]:
    return [(terminal_safe(text), "")]


def show_status(status: WorkflowStatus) -> None:
    out = sys.stdout
    out.write(f"session {status.session_id} ({status.session_path}): {status.status}, "
              f"state {status.state}\n")
    out.write(f"request: {terminal_safe(' '.join(status.request.split()))}\n")
    if status.reason:
        out.write(f"why: {terminal_safe(status.reason)}\n")
    agents = ", ".join(f"{role} {agent}" for role, agent in status.agents.items())
    out.write(f"agents: {terminal_safe(agents)}\n")
    out.write(f"Q&A cycles: {status.qa_cycles} of {status.max_qa_cycles}\n")
    if status.problem:
        out.write(f"problem: {terminal_safe(status.problem)}\n")
    if status.blockers:
        out.write("blockers (answer with `ralph workflow answer "
                  f"{status.session_id} \"...\"`):\n")
        for blocker in status.blockers:
            out.write(f"  - {terminal_safe(blocker)}\n")
    if status.tasks:
        out.write("tasks:\n")
        out.flush()
        rows: list[list[Cell]] = [
            [_cell(task.marker or "?"), _cell(task.task_id),
             _cell(f"{task.attempts}/{status.max_task_attempts}"),
             _cell(task.description + (f" -- {task.failure}" if task.failure else ""))]
            for task in status.tasks]
        print_table([Column("marker"), Column("task"), Column("attempts", right=True),
                     Column("description", wrap=True)], rows)
    call = status.last_call
    if call is not None:
        what = " ".join(str(part) for part in (call["role"], call.get("mode") or "",
                                               call["input"].get("TASK_ID", "")) if part)
        out.write(f"last role call: {terminal_safe(what)} by {terminal_safe(call['agent'])}, "
                  f"{call['outcome']}"
                  + (f" ({terminal_safe(call['message'])})" if call.get("message") else "")
                  + (f", agent session {call['agent_session']}" if call.get("agent_session")
                     else "") + "\n")
    if status.violations:
        out.write(f"violations ({len(status.violations)}):\n")
        for found in status.violations[-10:]:
            out.write(f"  - {found['role']}: claimed {terminal_safe(str(found['claim']))}; "
                      f"found {terminal_safe(str(found['found']))}\n")
    out.flush()


def show_list(found: list[WorkflowStatus]) -> None:
    rows: list[list[Cell]] = []
    for status in found:
        done = sum(1 for task in status.tasks if task.marker == "[x]")
        rows.append([_cell(status.session_id), _cell(status.status), _cell(status.state or ""),
                     _cell(f"{done}/{len(status.tasks)}"),
                     _cell(" ".join(status.request.split()))])
    print_table([Column("session"), Column("status"), Column("state"),
                 Column("done", right=True), Column("request", wrap=True)], rows)

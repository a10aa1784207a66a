"""Runs `ralph workflow start` with a real agent CLI against the fake model server, inside a
network namespace that has only loopback (the test starts it under `unshare -n`), and writes
what happened to a JSON file for the test to check.

    python tests/agents/workflow_e2e_driver.py --cli claude --project DIR --out FILE

The fake model plays each role of a one-task session. It knows which role a prompt is for
from the prompt's own text (the role's instructions heading and its `## Input` lines), and
answers as an honest role would (as ralph.testing.fake_roles does): a shell tool call that
writes the session's files, then, after the tool's result, a text ending with the role's
output JSON object. The session id is only known at run time, so each command finds the
session directory itself (`.ralph-sessions/<id>/`, the only one in the project).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ralph.scaffold import scaffold
from ralph.store import Store
from ralph.testing.fakellm import FakeLLM
from ralph.workflow.record import workflow_stream
from tests.agents.clienv import base_env, setup
from tests.agents.e2e_driver import loopback_only

REQUEST = "Create hello.txt containing hello"
GATE = 'test "$(cat hello.txt)" = hello'
SID = "@SID@"  # stands for the session id in the files below; the commands fill it in
EOF = "RALPH_EOF"

# The session's files as an honest planner, executor and reviewer write them (their layout
# is ralph.testing.fake_roles's, described in docs/workflow.md).
PLAN_MD = f"""# Plan: {REQUEST}

## Goal & Success Criteria
{REQUEST}

- hello.txt contains hello

## Target Files/Artifacts
- hello.txt

## Context & Analysis
- One file to create.

## Proposed Design/Changes/Approach
- task-1: {REQUEST}

## Verification & Testing
- The gate `{GATE}` and the reviewer's check.

## Risks & Assumptions (Optional)
- None identified.
"""

TASKS_MD = f"""# Tasks

## Legend
- `[ ]` Not started
- `[/]` In progress
- `[P]` Pending review
- `[x]` Completed
- `[F]` Failed

## Planning Tasks
- plan-init: Initialize session artifacts
    - **Type**: Sequential
    - **Files**: plan.md, progress.md, tasks.md, {SID}.instructions.md
    - **Objective**: Create the session's plan, tasks, progress and instructions
    - **Success Criteria**: The four artifacts exist
    - **Inherits From**: None

## Implementation Tasks
- task-1: {REQUEST}
    - **Type**: Sequential
    - **Files**: hello.txt
    - **Objective**: {REQUEST}
    - **Success Criteria**: hello.txt contains hello
    - **Inherits From**: None
"""

PROGRESS_MD = """# Progress Tracking

## Planning Progress
- [x] plan-init (Completed)

## Implementation Progress
- [ ] task-1 (Not Started)
"""

INSTRUCTIONS_MD = f"""---
description: 'Ralph session {SID}'
applyTo: '.ralph-sessions/{SID}/**'
---

# Ralph Session {SID} Instructions

{REQUEST}

## Target Files
- hello.txt

## Agent Skills
- None
"""

REPORT = "tasks.task-1-report.md"

PART1 = f"""# Task Report: task-1
---
## PART 1: IMPLEMENTATION REPORT
*(Created by Ralph-Executor)*

### Objective Recap
{REQUEST}

### Success Criteria Status
- ✅ hello.txt contains hello: Met - `cat hello.txt` prints hello

### Summary of Changes
- hello.txt

### Verification Results
- `{GATE}`: passed

### Discovered Tasks
- None

---
## PART 2: REVIEW REPORT
*(To be appended by Ralph-Reviewer)*
"""

PART2 = """
---
## PART 2: REVIEW REPORT
*(Appended by Ralph-Reviewer)*

### Review Summary
hello.txt exists and contains hello.

### Success Criteria Validation
- ✅ **hello.txt contains hello**: Met
    - **Evidence Reviewed**: hello.txt
    - **Finding**: it contains hello

### Quality Assessment
Good.

### Issues Identified (if any)
- None

### Validation Actions Performed
- Read hello.txt and the report's PART 1

### Recommendation
**Status**: Qualified
**Reasoning**: the only criterion is met

### Feedback for Next Iteration (if Failed)
None
"""

# Finds the session directory: $d (no trailing slash) and its id $sid.
FIND_SESSION = 'd=$(ls -d .ralph-sessions/*/ | tail -1); d=${d%/}; sid=${d##*/}\n'


def write(path: str, text: str, *, append: bool = False) -> str:
    """A shell command writing `text` to `path` (a shell word), the session id filled in."""
    return f'sed "s/{SID}/$sid/g" {">>" if append else ">"} {path} <<\'{EOF}\'\n{text}{EOF}\n'


def answer(summary: str, output: dict[str, Any]) -> str:
    """The role's final text: a summary, then its output object in a json block."""
    return f"{summary}\n\n```json\n{json.dumps(output, indent=2)}\n```\n"


def role_rule(name: str, heading: str, input_lines: str, command: str,
              output: dict[str, Any]) -> dict[str, Any]:
    """A rule for one role call: the prompt starts with the role's instructions (`heading`)
    and its `## Input` section begins with `input_lines` (a regular expression); the reply
    is the command, then the answer."""
    pattern = (rf"(?s)^{heading}$.*"
               rf"^## Input\n\nSESSION_PATH: \.ralph-sessions/[0-9-]+/\n{input_lines}$")
    return {"name": name, "match": {"user_regex": pattern}, "reply": {"shell": command},
            "then": [{"text": answer(f"{name}: done.", output)}]}


def scenario() -> dict[str, Any]:
    initialize = (FIND_SESSION + write('"$d/plan.md"', PLAN_MD) + write('"$d/tasks.md"', TASKS_MD)
                  + write('"$d/progress.md"', PROGRESS_MD)
                  + write('".ralph-sessions/$sid.instructions.md"', INSTRUCTIONS_MD))
    execute = (FIND_SESSION + "printf hello > hello.txt\n" + write(f'"$d/{REPORT}"', PART1)
               + "sed -i 's/^- \\[ \\] task-1 (Not Started)$/- [P] task-1 (Review Pending)/' "
                 '"$d/progress.md"\n')
    review = FIND_SESSION + 'test "$(cat hello.txt)" = hello\n' + write(
        f'"$d/{REPORT}"', PART2, append=True)
    update = FIND_SESSION + "printf '%s\\n' '- Completion check: task-1 is done, nothing is " \
                            "missing' >> \"$d/plan.md\"\n"
    task_count = {"planning": 1, "implementation": 1, "total": 2}
    return {"default": {"text": "OK"}, "rules": [
        role_rule("planner-initialize", "# Ralph-Planner", "MODE: INITIALIZE", initialize,
                  {"status": "completed",
                   "artifacts_created": ["plan.md", "tasks.md", "progress.md"],
                   "artifacts_updated": [], "task_count": task_count,
                   "next_actions": ["execute"], "blockers": []}),
        role_rule("executor", "# Ralph-Executor", "TASK_ID: task-1\nATTEMPT_NUMBER: 1", execute,
                  {"status": "completed", "report_path": REPORT, "success_criteria_met": True,
                   "discovered_tasks": [], "blockers": []}),
        role_rule("reviewer", "# Ralph-Reviewer",
                  rf"TASK_ID: task-1\nREPORT_PATH: {re.escape(REPORT)}",
                  review,
                  {"status": "completed", "verdict": "Qualified",
                   "criteria_results": [{"criterion": "hello.txt contains hello", "met": True,
                                         "evidence": "hello.txt",
                                         "finding": "it contains hello"}],
                   "quality_assessment": "Good.", "issues": [], "feedback": ""}),
        role_rule("planner-update", "# Ralph-Planner", "MODE: UPDATE", update,
                  {"status": "completed", "artifacts_created": [],
                   "artifacts_updated": ["plan.md"], "task_count": task_count,
                   "next_actions": ["complete"], "blockers": []}),
    ]}


def make_project(root: Path, cli: str, argv: list[str], env: dict[str, str]) -> None:
    """A git repository with Ralph scaffolded, `cli` its default agent, one gate; committed."""
    root.mkdir(parents=True, exist_ok=True)
    for args in (["init", "-q"], ["config", "user.name", "e2e"],
                 ["config", "user.email", "e2e@localhost"]):
        git(root, *args)
    scaffold(root, "md", False)
    agent = {"argv": argv, "env": env, "timeout_seconds": 240}
    toml = (f'[loop]\ndefault_agent = "{cli}"\n\n[agents.{cli}]\n'
            + "".join(f"{key} = {toml_value(value)}\n" for key, value in agent.items())
            + f"\n[gates]\ncommands = {json.dumps([GATE])}\n")
    (root / "ralph.toml").write_text(toml)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "e2e project")


def toml_value(value: object) -> str:
    """A TOML value: JSON spells strings, numbers and arrays the same way; a table inline."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {json.dumps(v)}"
                                for k, v in value.items()) + " }"
    return json.dumps(value)


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True,
                          timeout=30).stdout


def ralph(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real command line: `python -m ralph ...` in the project."""
    return subprocess.run([sys.executable, "-m", "ralph", *args, "--root", str(root)], cwd=root,
                          capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL, check=False)


def findings(root: Path) -> dict[str, Any]:
    """What the session left: its id, files, events, the status command's view and git's."""
    sessions = sorted(p.name for p in (root / ".ralph-sessions").iterdir() if p.is_dir())
    found: dict[str, Any] = {"sessions": sessions}
    if len(sessions) != 1:
        return found
    sid = sessions[0]
    session = root / ".ralph-sessions" / sid
    found["files"] = {p.name: p.read_text() for p in sorted(session.iterdir()) if p.is_file()}
    with Store(root / ".ralph" / "store") as store:
        found["events"] = [f.to_dict() for f in store.read(stream=workflow_stream(sid))]
    status = ralph(root, "workflow", "status", sid, "--json")
    found["status"] = json.loads(status.stdout) if status.returncode == 0 else {
        "exit": status.returncode, "stderr": status.stderr}
    found["commits"] = git(root, "log", "--format=%s").splitlines()
    found["hello_commits"] = git(root, "log", "--format=%s", "--", "hello.txt").splitlines()
    found["tracked"] = git(root, "ls-files").splitlines()
    found["dirty"] = git(root, "status", "--porcelain", "--untracked-files=all").splitlines()
    return found


def main() -> int:
    args = argparse.ArgumentParser()
    args.add_argument("--cli", default="claude")
    args.add_argument("--project", required=True, type=Path)
    args.add_argument("--out", required=True, type=Path)
    opts = args.parse_args()
    if not loopback_only():
        print("refusing to run: a network interface other than lo is visible", file=sys.stderr)
        return 3
    root: Path = opts.project
    home = root.parent / "home"
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    with FakeLLM(scenario()) as fake:
        cli = setup(opts.cli, fake.url, home)
        cli.write_files()
        os.environ.clear()
        os.environ.update(base_env(home))
        make_project(root, opts.cli, cli.argv, cli.env)
        started = time.monotonic()
        run = ralph(root, "workflow", "start", REQUEST)
        result: dict[str, Any] = {
            "exit": run.returncode, "stdout": run.stdout, "stderr": run.stderr[-6000:],
            "seconds": round(time.monotonic() - started, 1)}
        result |= findings(root)
        result["hello"] = ((root / "hello.txt").read_text()
                           if (root / "hello.txt").is_file() else None)
        result["requests"] = [r.to_dict() for r in fake.requests]
    opts.out.write_text(json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())

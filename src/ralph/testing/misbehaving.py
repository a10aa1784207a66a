"""Agents that misbehave on purpose: plan steps for `ralph.testing.fake_agent`.

Each function returns one step (an attempt's behaviour) of a fake agent's plan, named for
the way real agents have been seen to cheat or to leave a mess. The loop's tests play them
to show that Ralph's verdict and its process ownership hold against each:

    plan = {"tasks": {"1": [rewrite_gate("gate.sh")]}}
"""

from __future__ import annotations

from typing import Any

Step = dict[str, Any]


def rewrite_gate(script: str, body: str = "#!/bin/sh\nexit 0\n") -> Step:
    """Make the gate pass by rewriting the script it runs, and tick the task."""
    return {"write": {script: body}, "tick": True, "print": [f"rewrote {script}"]}


def delete_protected(*paths: str) -> Step:
    """Delete the tests that fail, and tick the task."""
    return {"delete": list(paths), "tick": True, "print": ["deleted the failing tests"]}


def add_under_protected(path: str, content: str) -> Step:
    """Add a file where the gate looks (a conftest.py that skips every test), and tick."""
    return {"write": {path: content}, "tick": True}


def hide_added_file(path: str, content: str) -> Step:
    """Add a file under a protected path and hide it from git status with .gitignore."""
    return {"write": {path: content}, "append": {".gitignore": f"\n{path}\n"}, "tick": True}


def tick_everything(*task_ids: str, work: dict[str, str] | None = None) -> Step:
    """Do the task's work, then tick every box in the PRD, not only its own."""
    return {"write": dict(work or {}), "tick": True, "tick_also": list(task_ids)}


def leave_daemon(how: str, pid_file: str, seconds: float = 120) -> Step:
    """Leave a process that escapes the agent's process group ("setsid", "double_fork" or
    "nohup"), writing its pid to `pid_file`; tick the task."""
    return {"daemon": {"how": how, "pid_file": pid_file, "seconds": seconds}, "tick": True}


def hang(seconds: float = 120, write: dict[str, str] | None = None) -> Step:
    """Write some work, then keep running (for stops, hangups and a killed orchestrator)."""
    return {"write": dict(write or {}), "print": ["working"], "hang": seconds}


def not_logged_in() -> Step:
    """Fail the way a CLI without credentials does: an HTTP 401 on stderr, exit 1."""
    return {"stderr": ["Error: 401 Unauthorized: invalid api key"], "exit_code": 1}


def commit_protected_change(script: str, body: str = "#!/bin/sh\nexit 0\n") -> Step:
    """Rewrite the gate script and commit it itself, as some agents commit their work."""
    return {"write": {script: body}, "tick": True, "commit": "make the gate pass"}

"""A scriptable fake agent: `python -m ralph.testing.fake_agent --plan PLAN.json`.

It reads the prompt (stdin, or the file named by `--prompt-file`), finds the task id in the
prompt's anchor (`- Task id: X`) and plays the plan's next step for that task. Each task has
a list of steps, one per attempt (the last one repeats). A step may:

    {"write": {"path": "content"}, "append": {"path": "text"}, "delete": ["path"],
     "tick": true,                      # mark the task done in the PRD (md or json)
     "tick_also": ["2"],                # mark other tasks done too (or unblock them)
     "print": ["lines"], "stderr": ["lines"], "print_bytes": 1000000,
     "exit_signal": true, "exit_code": 0, "sleep": 0.5,
     "hang": 60,                        # after everything else, keep running that long
     "spawn": 30,                       # leave a grandchild sleeping that long (tree kill tests)
     "daemon": {"how": "setsid", "seconds": 60, "pid_file": "/tmp/d.pid"},
                                        # leave a process that escapes the agent's process
                                        # group: "setsid", "double_fork" or "nohup" (its pid
                                        # is written to pid_file once it runs)
     "rate_limit": 2, "retry_after": 1, # the first N calls answer HTTP 429 and exit 1
     "commit": "message",               # commit the change itself, as some agents do
     "git": ["update-index", "..."],    # run git with these arguments (after the writes)
     "shell": ["command", ...]}         # run these with /bin/sh (after the writes)

As a judge (the prompt mentions JUDGE_SIGNAL) it prints the plan's `judge` answers in turn
(`true`/`false`/`"garbage"`); as a reviewer (the prompt mentions SHIP and BLOCK) the plan's
`review` answers. A calls file beside the plan counts attempts across processes.
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

_TASK_ID = re.compile(r"^- Task id: (\S+)\s*$", re.MULTILINE)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fake_agent")
    parser.add_argument("--plan", required=True, type=Path)
    parser.add_argument("--prompt-file", type=Path)
    parser.add_argument("--prd", default="PRD.md")
    args = parser.parse_args(argv)
    prompt = args.prompt_file.read_text() if args.prompt_file else sys.stdin.read()
    plan = json.loads(args.plan.read_text())
    calls_path = args.plan.with_name(args.plan.name + ".calls.json")
    calls = json.loads(calls_path.read_text()) if calls_path.exists() else {}
    role = _role(prompt)
    if role in ("judge", "review"):
        answers = plan.get(role, [True] if role == "judge" else ["SHIP"])
        n = calls.get(f"_{role}", 0)
        calls[f"_{role}"] = n + 1
        calls_path.write_text(json.dumps(calls))
        answer = answers[min(n, len(answers) - 1)]
        print(f"{role} looked at the change")
        if role == "judge":
            print(answer if isinstance(answer, str) else f"JUDGE_SIGNAL: {str(answer).lower()}")
        else:
            print(answer)
        return 0
    match = _TASK_ID.search(prompt)
    task_id = match.group(1) if match else "_none"
    n = calls.get(task_id, 0)
    calls[task_id] = n + 1
    calls_path.write_text(json.dumps(calls))
    steps = plan.get("tasks", {}).get(task_id) or [plan.get("default", {})]
    step: dict[str, Any] = steps[min(n, len(steps) - 1)]
    limited = int(step.get("rate_limit", 0))
    if n < limited:
        print("Error: 429 Too Many Requests: rate limit reached; "
              f"retry after {step.get('retry_after', 1)} seconds", file=sys.stderr)
        return 1
    return _play(step, task_id, Path(args.prd))


def _role(prompt: str) -> str:
    if "## Your task for this iteration" in prompt:  # the loop's anchor: a worker's prompt
        return "agent"
    if "JUDGE_SIGNAL" in prompt:
        return "judge"
    if "SHIP" in prompt and "BLOCK" in prompt:
        return "review"
    return "agent"


def _play(step: dict[str, Any], task_id: str, prd: Path) -> int:
    print(f"fake agent working on task {task_id}", flush=True)
    if step.get("spawn"):
        subprocess.Popen(["sleep", str(step["spawn"])])
        print(f"child-pid {os.getpid()}", flush=True)
    if step.get("daemon"):
        _daemon(step["daemon"])
    time.sleep(float(step.get("sleep", 0)))
    for path, content in step.get("write", {}).items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(content)
    for path, text in step.get("append", {}).items():
        with Path(path).open("a") as handle:
            handle.write(text)
    for path in step.get("delete", []):
        Path(path).unlink(missing_ok=True)
    if step.get("tick"):
        _tick(prd, task_id)
    for other in step.get("tick_also", []):
        _tick(prd, str(other))
    for line in step.get("print", []):
        print(line)
    if step.get("print_bytes"):
        chunk = "x" * 1023 + "\n"
        for _ in range(int(step["print_bytes"]) // 1024):
            sys.stdout.write(chunk)
    for line in step.get("stderr", []):
        print(line, file=sys.stderr)
    for command in step.get("shell", []):
        subprocess.run(["/bin/sh", "-c", command], check=True)
    if "git" in step:
        subprocess.run(["git", *step["git"]], check=True)
    if "commit" in step:
        subprocess.run(["git", "add", "-A"], check=True)
        subprocess.run(["git", "-c", "user.name=fake", "-c", "user.email=fake@localhost",
                        "commit", "-q", "-m", step["commit"]], check=True)
    if "exit_signal" in step:
        print(f"EXIT_SIGNAL: {str(step['exit_signal']).lower()}")
    sys.stdout.flush()
    time.sleep(float(step.get("hang", 0)))
    return int(step.get("exit_code", 0))


def _daemon(spec: dict[str, Any]) -> None:
    """Leave a process behind the way real tools do: a new session (`setsid`), a double
    fork (the grandchild's parent exits, so it is orphaned into a session of its own), or
    `nohup ... &` (same group, SIGHUP ignored). It writes its pid to `pid_file`, then sleeps."""
    how = spec.get("how", "setsid")
    seconds = float(spec.get("seconds", 60))
    pid_file = str(spec["pid_file"])
    body = (f"import os, time; open({pid_file!r} + '.tmp', 'w').write(str(os.getpid())); "
            f"os.replace({pid_file!r} + '.tmp', {pid_file!r}); time.sleep({seconds})")
    quiet = subprocess.DEVNULL
    if how == "setsid":
        subprocess.Popen([sys.executable, "-c", body], start_new_session=True, stdin=quiet,
                         stdout=quiet, stderr=quiet)
    elif how == "nohup":
        subprocess.Popen(["nohup", sys.executable, "-c", body], stdin=quiet, stdout=quiet,
                         stderr=quiet)
    elif how == "double_fork":
        pid = os.fork()
        if pid == 0:  # the intermediate child: a new session, fork again, exit at once
            os.setsid()
            if os.fork() == 0:
                devnull = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(devnull, fd)
                os.execv(sys.executable, [sys.executable, "-c", body])
            os._exit(0)
        os.waitpid(pid, 0)
    else:
        raise SystemExit(f"fake_agent: unknown daemon kind {how!r}")
    deadline = time.monotonic() + 10
    while not Path(pid_file).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    print(f"left a {how} daemon", flush=True)


def _tick(prd: Path, task_id: str) -> None:
    if prd.suffix == ".json":
        body = json.loads(prd.read_text())
        for story in body["stories"]:
            if str(story["id"]) == task_id:
                story["passes"] = True
        _replace(prd, json.dumps(body, indent=2) + "\n")
        return
    pattern = re.compile(rf"^(\s*[-*] )\[[ ~-]\]( {re.escape(task_id)}[.:] )", re.MULTILINE)
    _replace(prd, pattern.sub(r"\1[x]\2", prd.read_text(), count=1))


def _replace(path: Path, text: str) -> None:
    """Write the whole file at once, as editors do: tests kill this agent at any moment
    (a kill between `write_text`'s truncation and its write left an empty PRD)."""
    tmp = path.with_name(f".{path.name}.fake-agent-{os.getpid()}")
    tmp.write_text(text)
    tmp.replace(path)


if __name__ == "__main__":
    sys.exit(main())

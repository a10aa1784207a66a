"""A stand-in for Claude Code's `-p --output-format stream-json` with PreToolUse hooks.

    python tests/sessions/fake_claude.py -p [--settings FILE-OR-JSON]  (the prompt on stdin)

Each prompt line `RUN: <command>` is a Bash tool call (tool_use_id `toolu_<n>`). With
settings that name a PreToolUse command hook, the hook is run as Claude Code runs it (the
call as JSON on stdin, through the shell) and its permissionDecision decides: allow runs the
command, deny does not; as with Claude Code, a hook exiting with 2 denies, and one exiting
otherwise lets the call run. Prints stream-json events and a `result` line whose text lists each
call's outcome (`ran: <command>` / `denied: <reason>`).
"""

from __future__ import annotations

import json
import subprocess
import sys


def main(argv: list[str]) -> int:
    given = argv[argv.index("--settings") + 1] if "--settings" in argv else "{}"
    settings = json.loads(given if given.startswith("{") else open(given).read())
    hooks = [hook["command"] for group in settings.get("hooks", {}).get("PreToolUse", [])
             for hook in group["hooks"]]
    prompt = sys.stdin.read()
    say({"type": "system", "subtype": "init", "session_id": "fake-claude-1"})
    outcomes = []
    for n, line in enumerate(prompt.splitlines(), 1):
        if not line.startswith("RUN: "):
            continue
        command = line.removeprefix("RUN: ")
        call = {"tool_name": "Bash", "tool_input": {"command": command},
                "tool_use_id": f"toolu_{n}", "session_id": "fake-claude-1",
                "hook_event_name": "PreToolUse"}
        say({"type": "assistant", "message": {"content": [
            {"type": "tool_use", "id": call["tool_use_id"], "name": "Bash",
             "input": call["tool_input"]}]}})
        decision, reason = "allow", ""
        for hook in hooks:
            done = subprocess.run(hook, shell=True, input=json.dumps(call), text=True,
                                  capture_output=True, timeout=120, check=False)
            if done.returncode == 2:  # as Claude Code: a blocking error, its stderr the reason
                decision, reason = "deny", done.stderr.strip()
            elif done.returncode != 0:  # as Claude Code: a non-blocking error, the call runs
                continue
            else:
                answer = json.loads(done.stdout)["hookSpecificOutput"]
                decision = answer["permissionDecision"]
                reason = answer["permissionDecisionReason"]
        if decision == "allow":
            subprocess.run(command, shell=True, check=False, timeout=60)
            outcomes.append(f"ran: {command}")
        else:
            outcomes.append(f"denied: {reason}")
    text = "\n".join(outcomes) or "nothing to do"
    say({"type": "assistant", "message": {"content": [{"type": "text", "text": text}]}})
    say({"type": "result", "subtype": "success", "is_error": False, "result": text,
         "session_id": "fake-claude-1"})
    return 0


def say(event: dict[str, object]) -> None:
    print(json.dumps(event), flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

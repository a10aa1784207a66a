"""Claude Code's PreToolUse hook for an agent session whose approvals are `ask` or `deny`.

    python -m ralph.approvals.claude_hook .ralph/sessions/<id>/approvals.json

Claude Code runs it before every tool call (also in `-p` mode), with the call as JSON on
stdin ({tool_name, tool_input, tool_use_id, session_id, ...}); it records the request in the
session's stream, gets the decision (a rule, the mode, or whoever answers through the store
within the timeout) and prints it as the hook's answer:
{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"|"deny",
"permissionDecisionReason": ...}}. A denial's reason reaches the model. Whatever goes wrong
here denies the call (a hook that fails otherwise would let it through): stdout carries
only that one JSON object.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import orjson

from ralph.approvals.desk import ApprovalAnswer, ApprovalDesk
from ralph.approvals.policy import PolicyFile
from ralph.store import Store

HOOK_GRACE_S = 60  # Claude Code's own timeout for the hook: the policy's timeout plus this


def settings(policy_file: Path, timeout_s: float) -> dict[str, Any]:
    """The `--settings` Claude Code is given: this hook before every tool."""
    command = " ".join(_quote(part) for part in (sys.executable, "-m",
                                                 "ralph.approvals.claude_hook",
                                                 str(policy_file)))
    hook = {"type": "command", "command": command, "timeout": int(timeout_s) + HOOK_GRACE_S}
    return {"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [hook]}]}}


def _quote(part: str) -> str:
    import shlex  # noqa: PLC0415 - only when writing the settings, never in the hook

    return shlex.quote(part)


def answer_json(decision: str, reason: str) -> bytes:
    return orjson.dumps({"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": decision,
        "permissionDecisionReason": reason}})


def reason(answer: ApprovalAnswer) -> str:
    """What Claude (and the model, for a denial) is told."""
    who = f"rule {answer.rule}" if answer.rule else answer.by
    verb = "allowed" if answer.decision == "allow" else "denied"
    text = f"{verb} by {who} (Ralph)"
    if answer.message and not answer.rule:
        text += f": {answer.message}"
    return text


def decide(policy_path: Path, call: dict[str, Any]) -> ApprovalAnswer:
    spec = PolicyFile.read(policy_path)
    tool_name = str(call.get("tool_name") or "")
    if not tool_name:
        raise ValueError("the hook's input names no tool")
    tool_use_id = str(call.get("tool_use_id") or "") or f"hook-{os.getpid()}"
    with Store(spec.store) as store:
        desk = ApprovalDesk(store, spec.session_id, spec.folder)
        request, answer = spec.policy.decide_now(desk, tool_use_id, tool_name,
                                                 call.get("tool_input") or {})
        if answer is not None:
            return answer
        import asyncio  # noqa: PLC0415 - only to wait for a person: most calls do not

        return asyncio.run(desk.wait(request, spec.policy.timeout_s))


def main(argv: list[str]) -> int:
    try:
        if len(argv) != 1:
            raise ValueError("usage: python -m ralph.approvals.claude_hook POLICY_FILE")
        call = orjson.loads(sys.stdin.buffer.read())
        if not isinstance(call, dict):
            raise ValueError("the hook's input is not a JSON object")
        answer = decide(Path(argv[0]), call)
        out = answer_json(answer.decision, reason(answer))
    except Exception as exc:  # never let a call through because the hook failed
        out = answer_json("deny", f"Ralph could not decide on this tool call, so it is "
                                  f"denied: {type(exc).__name__}: {exc}")
    sys.stdout.buffer.write(out + b"\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

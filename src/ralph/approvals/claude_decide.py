"""What Claude Code's hook (ralph.approvals.claude_hook) decides for one tool call: the
call read from the hook's input, decided by the session's policy through the store, and the
answer in the form Claude Code reads."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import orjson

from ralph.approvals.desk import ApprovalAnswer, ApprovalDesk
from ralph.approvals.policy import PolicyFile, reason
from ralph.store import Store


def answer_json(decision: str, why: str) -> bytes:
    return orjson.dumps({"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": decision,
        "permissionDecisionReason": why}}) + b"\n"


def decide_call(policy_arg: str, hook_input: bytes,
                watchdog: Callable[[float], None]) -> bytes:
    """The hook's answer to the call in `hook_input` under the policy `policy_arg`;
    `watchdog(timeout_s)` is started once the policy's timeout is known."""
    spec = PolicyFile.load(policy_arg)
    watchdog(spec.policy.timeout_s)
    call = orjson.loads(hook_input)
    if not isinstance(call, dict):
        raise ValueError("the hook's input is not a JSON object")
    tool_name = str(call.get("tool_name") or "")
    if not tool_name:
        raise ValueError("the hook's input names no tool")
    tool_use_id = str(call.get("tool_use_id") or "") or f"hook-{os.urandom(8).hex()}"
    answer = _decide(spec, tool_use_id, tool_name, call.get("tool_input") or {})
    return answer_json(answer.decision, reason(answer))


def _decide(spec: PolicyFile, tool_use_id: str, tool_name: str,
            tool_input: Any) -> ApprovalAnswer:
    with Store(spec.store) as store:
        desk = ApprovalDesk(store, spec.session_id, spec.folder)
        try:
            request, answer = spec.policy.decide_now(desk, tool_use_id, tool_name,
                                                     tool_input, spec.cwd)
            if answer is not None:
                return answer
            import asyncio  # noqa: PLC0415 - only to wait for a person: most calls do not

            return asyncio.run(desk.wait(request, spec.policy.timeout_s))
        except BaseException as exc:
            # The call is denied (by the hook's caller); the request must not stay pending
            # for someone to answer in vain.
            desk.close_with_error(tool_use_id, exc)
            raise

"""Claude Code's PreToolUse hook for an agent session whose approvals are `ask` or `deny`.

    python -I -m ralph.approvals.claude_hook POLICY   (POLICY: PolicyFile.encode())

Claude Code runs it before every tool call (also in `-p` mode), with the call as JSON on
stdin ({tool_name, tool_input, tool_use_id, session_id, cwd, ...}); it records the request in
the session's stream, gets the decision (a rule, the mode, or whoever answers through the
store within the timeout) and prints it as the hook's answer:
{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"|"deny",
"permissionDecisionReason": ...}}. A denial's reason reaches the model.

Fail-safe: Claude Code lets a call through when its hook exits with another code than 0 or
2, or outlives the hook's timeout. So whatever goes wrong here denies: an exception prints
a denial; a watchdog prints one and exits before Claude Code's timeout; the command line
(`settings`) adds `|| exit 2` for a Python that cannot even start the module, and `-I`
(isolated) keeps the agent's directory (a `ralph/` or `orjson.py` of its own) off
`sys.path`, and PYTHONPATH and the like out of it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading

# Printed when nothing else can be (no orjson, no ralph): literal bytes.
_DENIED = (b'{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": '
           b'"deny", "permissionDecisionReason": "Ralph could not decide on this tool call, '
           b'so it is denied"}}\n')
HOOK_GRACE_S = 60  # Claude Code's timeout for the hook: the policy's timeout plus this
WATCHDOG_GRACE_S = 20  # the hook's own last word: well before Claude Code's timeout
_FAILED = 'echo "ralph: the approval hook failed, so the call is denied" >&2; exit 2'


def settings(policy: str, timeout_s: float) -> dict[str, object]:
    """The `--settings` Claude Code is given: this hook before every tool call, and hooks
    switched on whatever the project's settings say (`disableAllHooks`)."""
    import shlex  # noqa: PLC0415 - only when writing the settings, never in the hook

    module = [sys.executable, "-I", "-m", "ralph.approvals.claude_hook", policy]
    command = f"{shlex.join(module)} || {{ {_FAILED}; }}"
    hook = {"type": "command", "command": command, "timeout": int(timeout_s) + HOOK_GRACE_S}
    return {"disableAllHooks": False,
            "hooks": {"PreToolUse": [{"matcher": "*", "hooks": [hook]}]}}


class _Answer:
    """The hook's one answer on stdout: the decision's or the watchdog's, whichever comes
    first; a stdout nobody reads any more ends the hook with 2."""

    def __init__(self) -> None:
        self._given = threading.Lock()
        self._timer: threading.Timer | None = None

    def give(self, out: bytes) -> None:
        if not self._given.acquire(blocking=False):
            return
        if self._timer is not None:
            self._timer.cancel()
        try:
            os.write(1, out)
        except OSError:
            os._exit(2)

    def watchdog(self, timeout_s: float) -> None:
        """Deny and exit at `timeout_s` + WATCHDOG_GRACE_S unless the answer is given by
        then, whatever is still going on."""

        def expire() -> None:
            if self._given.acquire(blocking=False):
                with contextlib.suppress(OSError):
                    os.write(1, _DENIED)
                os._exit(0)

        self._timer = threading.Timer(timeout_s + WATCHDOG_GRACE_S, expire)
        self._timer.daemon = True
        self._timer.start()


def main(argv: list[str]) -> int:
    answer = _Answer()
    try:
        from ralph.approvals.claude_decide import decide_call  # noqa: PLC0415

        if len(argv) != 1:
            raise ValueError("usage: python -m ralph.approvals.claude_hook POLICY")
        out = decide_call(argv[0], sys.stdin.buffer.read(), answer.watchdog)
    except BaseException as exc:  # whatever it is, the call is denied
        out = _denial(exc)
    answer.give(out)
    return 0


def _denial(exc: BaseException) -> bytes:
    try:
        from ralph.approvals.claude_decide import answer_json  # noqa: PLC0415

        return answer_json("deny", f"Ralph could not decide on this tool call, so it is "
                                   f"denied: {type(exc).__name__}: {exc}")
    except BaseException:
        return _DENIED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

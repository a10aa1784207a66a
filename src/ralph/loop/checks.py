"""The judge and the reviewer: second agent runs that must say yes in a fixed form.

The judge's output must end with `JUDGE_SIGNAL: true|false`; the reviewer's last line must
be `SHIP` or `BLOCK`. Anything else is a "no": the orchestrator never guesses a yes."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ralph.agents.runner import AgentOutcome

# The last line must end with the signal ("... JUDGE_SIGNAL: true" counts).
_JUDGE = re.compile(r"\bJUDGE_SIGNAL\**\s*:\s*\**`?(true|false)`?\**\s*\.?\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class CheckResult:
    ok: bool
    reason: str | None


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def judge_verdict(outcome: AgentOutcome) -> CheckResult:
    if outcome.status != "ok":
        return CheckResult(False, f"the judge did not finish ({outcome.status}: "
                                  f"{outcome.message})")
    match = _JUDGE.search(_last_line(outcome.tail))
    if match is None:
        return CheckResult(False, "the judge's output did not end with JUDGE_SIGNAL: true|false")
    if match.group(1).lower() == "true":
        return CheckResult(True, None)
    return CheckResult(False, "the judge said JUDGE_SIGNAL: false")


def review_verdict(outcome: AgentOutcome) -> CheckResult:
    if outcome.status != "ok":
        return CheckResult(False, f"the reviewer did not finish ({outcome.status}: "
                                  f"{outcome.message})")
    last = _last_line(outcome.tail).strip("*` ").upper()
    if last == "SHIP":
        return CheckResult(True, None)
    if last == "BLOCK":
        return CheckResult(False, "the reviewer said BLOCK")
    return CheckResult(False, "the reviewer's last line was neither SHIP nor BLOCK")

"""The judge's and the reviewer's verdicts (ralph.loop.checks): only an exact, final "yes"
counts; anything else, including an agent that did not finish, is a "no" with a reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from ralph.agents.base import AgentStatus
from ralph.agents.runner import AgentOutcome
from ralph.loop.checks import judge_verdict, review_verdict


def outcome(tail: str, status: AgentStatus = "ok", exit_code: int | None = 0,
            message: str = "") -> AgentOutcome:
    return AgentOutcome(status=status, exit_code=exit_code, message=message, exit_signal=None,
                        session_id=None, reset_at=None, retry_after_s=None, duration_s=0.1,
                        started_at="2024-01-01T00:00:00.000Z",
                        finished_at="2024-01-01T00:00:00.100Z", log_path=Path("x.log"),
                        argv=["judge"], tail=tail, usage=None)


# -- judge -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("last_line", [
    "JUDGE_SIGNAL: true",
    "JUDGE_SIGNAL:true",
    "  JUDGE_SIGNAL :  true  ",
    "judge_signal: TRUE",
    "Judge_Signal: True",
    "**JUDGE_SIGNAL: true**",
    "**JUDGE_SIGNAL**: true",
    "**JUDGE_SIGNAL**: **true**",
    "JUDGE_SIGNAL: **true**",
])
def test_judge_true_variants_pass(last_line: str) -> None:
    result = judge_verdict(outcome(f"I read the diff.\nIt does what task 1 asks.\n{last_line}\n"))
    assert result.ok is True
    assert result.reason is None


@pytest.mark.parametrize("last_line", [
    "JUDGE_SIGNAL: false",
    "judge_signal: FALSE",
    "**JUDGE_SIGNAL: false**",
    "**JUDGE_SIGNAL**: false",
])
def test_judge_false_variants_fail_with_a_reason(last_line: str) -> None:
    result = judge_verdict(outcome(f"The tests are missing.\n{last_line}"))
    assert result.ok is False
    assert result.reason is not None and "false" in result.reason


@pytest.mark.parametrize("tail", [
    "",
    "\n\n   \n",
    "looks good to me",
    "JUDGE_SIGNAL: maybe",
    "JUDGE_SIGNAL: yes",
    "JUDGE_SIGNAL: 1",
    "JUDGE_SIGNAL: true, mostly",
    "JUDGE_SIGNAL: truefalse",
    "JUDGE_SIGNAL true",
    "EXIT_SIGNAL: true",
], ids=repr)
def test_judge_without_a_proper_signal_is_a_no(tail: str) -> None:
    result = judge_verdict(outcome(tail))
    assert result.ok is False
    assert result.reason is not None and "JUDGE_SIGNAL" in result.reason


def test_judge_signal_must_be_the_last_line() -> None:
    result = judge_verdict(outcome("JUDGE_SIGNAL: true\nOn second thought, the gate is flaky."))
    assert result.ok is False
    assert result.reason is not None and "did not end with" in result.reason


def test_judge_last_signal_wins_and_blank_lines_after_it_do_not_matter() -> None:
    assert judge_verdict(outcome("JUDGE_SIGNAL: false\nJUDGE_SIGNAL: true\n\n  \n")).ok is True
    assert judge_verdict(outcome("JUDGE_SIGNAL: true\nJUDGE_SIGNAL: false\n")).ok is False


@pytest.mark.parametrize("status", ["error", "timeout", "rate_limited", "auth_error",
                                    "cancelled"])
def test_judge_that_did_not_finish_is_a_no_even_if_it_printed_true(status: AgentStatus) -> None:
    result = judge_verdict(outcome("JUDGE_SIGNAL: true", status=status, exit_code=1,
                                   message="boom"))
    assert result.ok is False
    assert result.reason is not None
    assert status in result.reason and "boom" in result.reason


# -- review ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("last_line", ["SHIP", "ship", "  Ship  ", "**SHIP**", "`SHIP`"])
def test_review_ship_passes(last_line: str) -> None:
    result = review_verdict(outcome(f"Read the diff; the tests cover it.\n{last_line}\n\n"))
    assert result.ok is True
    assert result.reason is None


@pytest.mark.parametrize("last_line", ["BLOCK", "block", "**BLOCK**"])
def test_review_block_fails(last_line: str) -> None:
    result = review_verdict(outcome(f"The change deletes the tests.\n{last_line}"))
    assert result.ok is False
    assert result.reason == "the reviewer said BLOCK"


@pytest.mark.parametrize("tail", [
    "",
    "LGTM",
    "SHIP it",
    "I would SHIP this",
    "SHIPPED",
    "SHIP or BLOCK",
    "SHIP\nbut please rename the variable",
    "BLOCK\nSHIP?",
], ids=repr)
def test_review_other_last_line_is_a_no(tail: str) -> None:
    result = review_verdict(outcome(tail))
    assert result.ok is False
    assert result.reason == "the reviewer's last line was neither SHIP nor BLOCK"


def test_review_only_the_last_line_counts() -> None:
    assert review_verdict(outcome("BLOCK\nfixed after all\nSHIP")).ok is True
    assert review_verdict(outcome("SHIP\nwait, no\nBLOCK")).ok is False


@pytest.mark.parametrize("status", ["error", "timeout", "rate_limited", "auth_error",
                                    "cancelled"])
def test_review_that_did_not_finish_is_a_no_even_if_it_printed_ship(status: AgentStatus
                                                                     ) -> None:
    result = review_verdict(outcome("SHIP", status=status, exit_code=None,
                                    message="timed out after 5 s"))
    assert result.ok is False
    assert result.reason is not None
    assert status in result.reason and "timed out after 5 s" in result.reason


def test_a_signal_ending_the_last_line_counts() -> None:
    """The output must end with the signal; words before it on that line are fine."""
    assert judge_verdict(outcome("Looked at it.\nThe verdict is JUDGE_SIGNAL: true")).ok
    assert not judge_verdict(outcome("JUDGE_SIGNAL: true, or so I think")).ok

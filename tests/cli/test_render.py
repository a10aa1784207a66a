"""ralph.cli.render: the loop's events as the lines of the live view and of `ralph log`, fed
frame by frame (tool calls and results, streamed text, reasoning, errors, gate tails, the
verdict with tokens and cost, the run's end), and the summary table."""

from __future__ import annotations

import io
import itertools
from typing import Any

import pytest
from rich.console import Console

from ralph.cli.render import (
    RESULT_CHARS,
    EventRenderer,
    Line,
    duration_text,
    spend_text,
    summary_table,
)
from ralph.store import Frame, Store

_seq = itertools.count(1)


def frame(topic: str, **meta: Any) -> Frame:
    n = next(_seq)
    return Frame(id=f"{n:025d}", seq=n, ts="2026-01-02T03:04:05.678Z", topic=topic,
                 stream="runs/run_test", meta={"run_id": "run_test", **meta}, hash=None)


def texts(lines: list[Line]) -> list[str]:
    return [line.text for line in lines]


def feed(renderer: EventRenderer, topic: str, **meta: Any) -> list[str]:
    return texts(renderer.feed(frame(topic, **meta)))


def output(renderer: EventRenderer, kind: str, content: str, **meta: Any) -> list[str]:
    return feed(renderer, "agent.output", kind=kind, content=content, **meta)


# -- runs and iterations -----------------------------------------------------------------------


def test_run_and_step_headers() -> None:
    r = EventRenderer()
    assert feed(r, "run.started", agent="fake", maxIterations=5, mode="run") == [
        "run run_test with agent fake, up to 5 iterations"]
    assert feed(r, "iteration.started", iteration=7, task_id="1", title="Login",
                attempt_id="1-2") == ["iteration 7 (1/5 of this run)  task 1: Login  "
                                      "(attempt 1-2)"]
    assert feed(r, "iteration.started", iteration=8, task_id="2", title="Logout",
                attempt_id="2-1")[0].startswith("iteration 8 (2/5 of this run)  task 2")
    step = EventRenderer()
    assert feed(step, "run.started", agent="fake", maxIterations=1, mode="step") == [
        "step run_test with agent fake"]
    assert feed(step, "iteration.started", iteration=3, task_id="1", title="T",
                attempt_id="1-1") == ["iteration 3  task 1: T  (attempt 1-1)"]


def test_a_title_cannot_drive_the_terminal() -> None:
    r = EventRenderer()
    line = feed(r, "iteration.started", iteration=1, task_id="1", title="\x1b[2Jboom",
                attempt_id="1-1")[0]
    assert "\x1b" not in line and "\\x1b[2Jboom" in line


def test_the_verdict_line_with_tokens_cost_log_and_commit() -> None:
    r = EventRenderer()
    lines = r.feed(frame("iteration.finished", verified=True, status="done",
                         duration_seconds=4.25, tokens_in=12345, tokens_out=678,
                         cost_usd=0.0123, log_path=".ralph/logs/000001.log",
                         commit="0123456789abcdef"))
    assert texts(lines) == ["verified done  (4.2 s, 12,345 in / 678 out tokens, $0.0123)",
                            "log .ralph/logs/000001.log  commit 0123456789"]
    assert (lines[0].style, lines[0].level) == ("green", 1)


def test_a_verdict_without_usage_shows_the_duration_only() -> None:
    r = EventRenderer()
    assert feed(r, "iteration.finished", verified=False, status="not_done",
                reason="gate 'pytest' exited with 1", duration_seconds=185.0,
                tokens_in=None, tokens_out=None, cost_usd=None) == [
        "not done: gate 'pytest' exited with 1  (3m05s)"]


def test_a_stopped_iteration_says_so_once() -> None:
    r = EventRenderer()
    assert feed(r, "iteration.finished", verified=False, status="stopped",
                reason="stopped before the iteration finished", duration_seconds=1.0,
                log_path=".ralph/logs/000002.log") == [
        "stopped before the iteration finished  (1.0 s)", "log .ralph/logs/000002.log"]


@pytest.mark.parametrize(("meta", "expected"), [
    ({"reason": "complete", "message": "all 3 tasks are verified done", "done": 3,
      "total": 3}, "run ended: complete (all 3 tasks are verified done); 3/3 tasks done"),
    ({"reason": "complete", "message": "the only task is verified done", "done": 1,
      "total": 1}, "run ended: complete (the only task is verified done); 1/1 tasks done"),
    ({"reason": "stopped", "message": "stopped on request", "done": 0, "total": 3},
     "run ended: stopped on request; 0/3 tasks done"),
    ({"reason": "max_iterations", "message": "reached the limit of 2 iterations"},
     "run ended: iteration limit reached (reached the limit of 2 iterations)"),
    ({"reason": "no_progress", "message": "no progress in 3 iterations in a row"},
     "run ended: no progress (no progress in 3 iterations in a row)"),
    ({"reason": "budget", "message": "the run's budget is used up: 2,400 tokens of "
      "loop.max_tokens 2,000"}, "run ended: budget used up (the run's budget is used up: "
     "2,400 tokens of loop.max_tokens 2,000)"),
    ({"reason": "error", "message": "PROMPT_build.md is missing"},
     "run ended: error (PROMPT_build.md is missing)"),
])
def test_how_a_run_ended(meta: dict[str, Any], expected: str) -> None:
    assert feed(EventRenderer(), "run.stopped", mode="run", **meta) == [expected]


def test_a_steps_end_says_nothing_unless_it_is_an_error() -> None:
    r = EventRenderer()
    for reason in ("complete", "max_iterations", "stopped", "no_progress"):
        assert feed(r, "run.stopped", mode="step", reason=reason, message="m", done=1,
                    total=3) == []
    assert feed(r, "run.stopped", mode="step", reason="error", message="git broke") == [
        "run ended: error (git broke)"]


def test_pause_resume_and_control_lines() -> None:
    r = EventRenderer()
    assert feed(r, "run.paused") == ["run paused: it goes on after `ralph resume`"]
    assert feed(r, "run.resumed") == ["run resumed"]
    assert feed(r, "control.applied", action="stop", ok=True, by="pid 42") == [
        "stop asked by pid 42"]
    assert feed(r, "control.applied", action="resume", ok=False, by=None) == [
        "resume asked by another process (nothing to do)"]


# -- the agent ---------------------------------------------------------------------------------


def test_tool_calls_are_one_line_with_what_they_do() -> None:
    r = EventRenderer()
    lines = r.feed(frame("agent.output", kind="tool_use", tool="Bash",
                         content='{"command": "pytest -q tests/", "timeout": 60}'))
    assert texts(lines) == ["→ Bash: pytest -q tests/"]
    assert (lines[0].style, lines[0].level) == ("cyan", 2)
    assert output(r, "tool_use", '{"file_path": "src/app.py", "content": "x"}',
                  tool="Write") == ["→ Write: src/app.py"]
    assert output(r, "tool_use", '{"pattern": "TODO"}', tool="Grep", role="review") == [
        "review: → Grep: TODO"]


def test_tool_results_and_reasoning_only_with_verbose() -> None:
    quiet, verbose = EventRenderer(), EventRenderer(verbose=True)
    result = "line one\n\nline two\nline three\nline four"
    assert output(quiet, "tool_result", result) == []
    assert output(verbose, "tool_result", result) == [
        "← line one", "← line two", "← line three"]  # the first 3 non-blank lines
    assert output(quiet, "reasoning", "Let me think.") == []
    assert output(verbose, "reasoning", "Let me think.") == ["(thinking) Let me think."]
    long = output(verbose, "tool_result", "y" * (RESULT_CHARS + 50))
    assert long == ["← " + "y" * RESULT_CHARS + "…"]


def test_agent_details_only_with_verbose() -> None:
    quiet, verbose = EventRenderer(), EventRenderer(verbose=True)
    start = {"argv": ["claude", "-p"], "agent": "claude"}
    assert feed(quiet, "agent.started", **start) == []
    assert feed(verbose, "agent.started", **start) == ["started: claude -p"]
    end = {"status": "ok", "exit_code": 0, "duration_s": 12.34}
    assert feed(quiet, "agent.finished", **end) == []
    assert feed(verbose, "agent.finished", **end) == ["agent finished (exit 0, 12.3 s)"]
    usage = {"input_tokens": 1500, "output_tokens": 20, "cost_usd": 0.5}
    assert feed(quiet, "agent.usage", **usage) == []
    assert feed(verbose, "agent.usage", **usage) == ["used 1,500 in / 20 out tokens, $0.5000"]
    assert feed(verbose, "agent.usage", input_tokens=None, output_tokens=None,
                cost_usd=None) == ["used no reported tokens"]


def test_a_failed_agent_is_shown_without_verbose() -> None:
    lines = EventRenderer().feed(frame("agent.finished", status="auth_error", exit_code=1,
                                       message="401 Unauthorized", role="judge"))
    assert texts(lines) == ["judge: agent auth error: 401 Unauthorized"]
    assert lines[0].style == "red"


def test_text_lines_errors_and_cut_text() -> None:
    r = EventRenderer()
    assert output(r, "text", "first\n\n  \nsecond") == ["first", "second"]  # blank lines go
    assert output(r, "text", "said by the judge", role="judge") == ["judge: said by the judge"]
    assert output(r, "text", "\x1b[31mred\x07") == ["\\x1b[31mred\\x07"]
    assert output(r, "text", "the start", chars=50000) == ["the start …"]
    assert output(r, "error", "boom\n  went the\tthing") == ["! boom went the thing"]


def test_streamed_text_is_shown_line_by_line() -> None:
    r = EventRenderer()
    assert output(r, "text", "Hel", delta=True) == []
    assert output(r, "text", "lo wor", delta=True) == []
    assert output(r, "text", "ld\nsecond li", delta=True) == ["Hello world"]
    assert output(r, "text", "ne\nthird\nfou", delta=True) == ["second line", "third"]
    # anything else first ends the streamed line
    assert feed(r, "agent.output", kind="tool_use", tool="Read",
                content='{"path": "a.py"}') == ["fou", "→ Read: a.py"]
    assert r.flush() == []
    assert output(r, "text", "unfinished", delta=True) == []
    assert texts(r.flush()) == ["unfinished"]
    assert r.flush() == []


def test_the_silence_warning_line() -> None:
    r = EventRenderer()
    assert feed(r, "agent.silent", seconds=125.0, next_warning_s=250) == [
        "the agent printed nothing for 2m05s; next warning after 4m10s"]
    assert feed(r, "agent.silent", seconds=1.0, next_warning_s=None) == [
        "the agent printed nothing for 1.0 s"]


def test_rate_limits() -> None:
    r = EventRenderer()
    assert feed(r, "agent.rate_limited", wait_seconds=30, reason="429") == [
        "rate limited: waiting 30.0 s (429)"]
    assert feed(r, "agent.rate_limited", wait_seconds=None, reason="429") == [
        "rate limited: giving up (429)"]


# -- checks, tasks, the tree -------------------------------------------------------------------


def test_gates_ok_failed_and_timed_out() -> None:
    r = EventRenderer()
    assert feed(r, "gate.started", index=1, command="pytest") == []
    assert EventRenderer(verbose=True).feed(frame("gate.started", index=1,
                                                  command="pytest"))[0].text == (
        "gate 1: pytest")
    assert feed(r, "gate.finished", command="true", ok=True, exit_code=0, duration_s=0.04,
                output_tail="noise that passed") == ["gate true: ok (exit 0, 0.0 s)"]
    tail = "\n".join(f"line {i}" for i in range(1, 21))
    lines = r.feed(frame("gate.finished", command="pytest", ok=False, exit_code=1,
                         duration_s=3.0, output_tail=tail))
    assert texts(lines) == ["gate pytest: failed (exit 1, 3.0 s)",
                            *[f"| line {i}" for i in range(1, 21)]]
    assert [line.level for line in lines] == [1] + [2] * 20
    assert feed(r, "gate.finished", command="sleep 99", ok=False, exit_code=None,
                timed_out=True, duration_s=900.0) == [
        "gate sleep 99: failed (timed out, 15m00s)"]
    assert feed(r, "gate.finished", command="nope", ok=False, exit_code=None,
                error="cannot start /bin/sh", duration_s=0) == [
        "gate nope: failed (cannot start /bin/sh, 0.0 s)"]


def test_judge_review_and_tasks() -> None:
    r = EventRenderer()
    assert feed(r, "judge.finished", ok=True, reason=None) == ["judge: ok"]
    assert feed(r, "review.finished", ok=False, reason="the reviewer said BLOCK") == [
        "review: said no (the reviewer said BLOCK)"]
    assert feed(r, "task.reopened", task_id="2", reason="marked done elsewhere") == [
        "reopened task 2: marked done elsewhere"]
    assert feed(r, "task.blocked", task_id="1", reason="3 attempts failed") == [
        "blocked task 1: 3 attempts failed"]
    assert feed(r, "task.unblocked", task_id="1", reason="reopened by hand") == [
        "unblocked task 1: reopened by hand"]
    changes = [{"path": f"t{i}.py", "change": "modified"} for i in range(7)]
    assert feed(r, "protected.reverted", changes=changes) == [
        "put back protected paths: t0.py (modified), t1.py (modified), t2.py (modified), "
        "t3.py (modified), t4.py (modified) and 2 more"]
    assert feed(r, "loop.warning", message="no gates") == ["warning: no gates"]
    assert feed(r, "loop.error", message="git failed") == ["error: git failed"]
    assert feed(r, "task.done", task_id="1") == []  # the verdict line says it


# -- figures -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("seconds", "text"), [(0, "0.0 s"), (4.26, "4.3 s"),
                                               (59.94, "59.9 s"), (60, "1m00s"),
                                               (185, "3m05s"), (3599, "59m59s"),
                                               (3720, "1h02m")])
def test_duration_text(seconds: float, text: str) -> None:
    assert duration_text(seconds) == text


def test_spend_text() -> None:
    assert spend_text(None, None, None) == ""
    assert spend_text(12345, 678, 0.0123) == "12,345 in / 678 out tokens, $0.0123"
    assert spend_text(100, None, None) == "100 in / 0 out tokens"
    assert spend_text(None, None, 1.5) == "$1.5000"


def _table_text(figures: dict[str, Any]) -> str:
    console = Console(file=io.StringIO(), width=120, color_system=None, highlight=False)
    console.print(summary_table(figures))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "\x1b" not in text
    return str(text)


def test_the_summary_table() -> None:
    text = _table_text({
        "run_id": "run_abc", "reason": "budget", "message": "the run's budget is used up",
        "iterations": 4, "done": 2, "total": 5, "blocked": 1, "open": 2,
        "duration_seconds": 185.0, "tokens_in": 3000, "tokens_out": 600, "cost_usd": 0.75,
        "agents": {"judge": {"tokens_in": 1000, "tokens_out": 100, "cost_usd": None},
                   "claude": {"tokens_in": 2000, "tokens_out": 500, "cost_usd": 0.75}}})
    lines = text.splitlines()
    assert lines[0].strip() == "run run_abc: budget used up"
    rows = [" ".join(line.replace("│", " ").replace("┃", " ").split()) for line in lines]
    assert "tokens in tokens out cost" in rows
    claude, judge, every = (rows.index("agent claude 2,000 500 $0.7500"),
                            rows.index("agent judge 1,000 100 -"),
                            rows.index("all agents 3,000 600 $0.7500"))
    assert claude < judge < every  # agents by name, then the total
    assert ("tasks: 2 done, 1 blocked, 2 open of 5; iterations: 4; duration: 3m05s; "
            "stopped: the run's budget is used up") in " ".join(text.split())


def test_the_summary_table_of_a_run_without_usage() -> None:
    text = _table_text({"run_id": "run_x", "reason": "complete", "message": "",
                        "iterations": None, "done": 1, "total": 1})
    rows = [" ".join(line.replace("│", " ").split()) for line in text.splitlines()]
    assert "all agents 0 0 -" in rows
    assert not any(row.startswith("agent ") for row in rows)
    flat = " ".join(text.split())
    assert "iterations: -" in flat and "stopped: complete" in flat


def test_a_recorded_run_renders_from_a_real_store(store: Store) -> None:
    stream = "runs/run_real"
    base = {"run_id": "run_real"}
    store.append("run.started", {**base, "agent": "fake", "maxIterations": 2, "mode": "run"},
                 stream=stream)
    store.append("iteration.started", {**base, "iteration": 1, "task_id": "1",
                                       "title": "First", "attempt_id": "1-1"}, stream=stream)
    for piece in ("Wor", "king on\nit"):
        store.append("agent.output", {**base, "kind": "text", "content": piece,
                                      "delta": True}, stream=stream)
    store.append("iteration.finished", {**base, "verified": True, "duration_seconds": 1.0},
                 stream=stream)
    store.append("run.stopped", {**base, "reason": "complete", "message": "done",
                                 "done": 1, "total": 1, "mode": "run"}, stream=stream)
    r = EventRenderer()
    lines = [line for f in store.read(stream=stream) for line in texts(r.feed(f))]
    assert lines == ["run run_real with agent fake, up to 2 iterations",
                     "iteration 1 (1/2 of this run)  task 1: First  (attempt 1-1)",
                     "Working on", "it", "verified done  (1.0 s)",
                     "run ended: complete (done); 1/1 tasks done"]


def test_a_control_line_cannot_drive_the_terminal() -> None:
    """control.applied comes from the stream, which anyone may append to: its action and
    requester are shown as text, escapes spelled out, and clipped."""
    r = EventRenderer()
    lines = feed(r, "control.applied", action="\x1b]0;pwned\x07stop", ok=True,
                 by="pid 1\x1b[2J\x1b[H" + "b" * 500)
    assert len(lines) == 1
    assert "\x1b" not in lines[0] and "\x07" not in lines[0]
    assert "\\x1b[2J" in lines[0]
    assert len(lines[0]) < 200  # both clipped
    odd = feed(r, "control.applied", action=["not", "a", "string"], ok=False, by={"x": 1})
    assert len(odd) == 1 and "\x1b" not in odd[0]


def test_the_summary_table_shows_markup_in_agent_names_as_text() -> None:
    text = _table_text({"run_id": "run_x", "reason": "complete", "message": "",
                        "iterations": 1, "done": 1, "total": 1, "tokens_in": 10,
                        "agents": {"[bold]x[/bold]": {"tokens_in": 10, "tokens_out": 2},
                                   "\x1b[31mred": {"tokens_in": 0}}})
    assert "agent [bold]x[/bold]" in text
    assert "agent \\x1b[31mred" in text


def test_the_summary_table_of_odd_figures_shows_what_it_can() -> None:
    text = _table_text({"run_id": "run_x", "reason": "complete", "message": "m",
                        "iterations": 1, "done": "1", "total": 3, "tokens_in": "x",
                        "tokens_out": 7, "cost_usd": "free", "duration_seconds": "long",
                        "agents": {"a": "b", "c": {"tokens_in": "many", "cost_usd": 0.5}}})
    rows = [" ".join(line.replace("│", " ").split()) for line in text.splitlines()]
    assert "agent a 0 0 -" in rows
    assert "agent c 0 0 $0.5000" in rows
    assert "all agents 0 7 -" in rows
    assert "tasks: 0 done, 0 blocked, 0 open of 3; iterations: 1; duration: 0.0 s" in (
        " ".join(text.split()))

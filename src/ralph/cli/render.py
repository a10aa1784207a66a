"""The loop's events as readable lines: one renderer for the live view of `ralph step` and
`ralph run` and for `ralph log`, so that a run reads the same live and afterwards.

`EventRenderer.feed(frame)` turns each stored event into zero or more `Line`s (text, a rich
style, an indentation level); it keeps a little state per run (the iteration count of the
run, streamed text not yet ended by a newline). Text recorded from agents is shown with its
control characters made visible: it must not drive the terminal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.table import Table
from rich.text import Text

from ralph.agents.summary import tool_summary
from ralph.approvals.desk import CUT_MARK
from ralph.approvals.rules import subject_of
from ralph.cli.output import exit_text, terminal_safe
from ralph.loop.models import NO_ITERATION_LIMIT
from ralph.store import Frame
from ralph.wording import counted

RESULT_LINES = 3  # of a tool's result, with --verbose
RESULT_CHARS = 300
_STOP_PHRASES = {"complete": "complete", "no_progress": "no progress",
                 "max_iterations": "iteration limit reached", "stopped": "stopped on request",
                 "error": "error", "budget": "budget used up"}


@dataclass(frozen=True)
class Line:
    text: str
    style: str = ""  # a rich style ("bold", "red", ...); nothing off a terminal
    level: int = 0  # 0: run and iteration headers, 1: inside an iteration, 2: agent output


def approval_subject(meta: dict[str, Any]) -> str:
    """`Bash: rm -rf build`: the tool of a permission request and what it would do, whole
    (a person decides on it: nothing may hide at its end), with how much text comes with
    it (a file's content, an edit's new text), one line, control characters shown."""
    tool_input = meta.get("input")
    subject = subject_of(tool_input)
    extra = []
    if isinstance(tool_input, dict):
        for key in ("content", "new_string", "diff"):
            value = tool_input.get(key)
            if isinstance(value, str) and value:
                extra.append(f"{key}: {counted(len(value), 'character')}")
    more = f" ({', '.join(extra)})" if extra else ""
    if CUT_MARK in subject:
        more += " [NOT SHOWN WHOLE: too long to record]"
    return terminal_safe(f"{meta.get('tool_name')}: {subject}{more}")


def duration_text(seconds: float) -> str:
    """`4.2 s`, `3m05s`, `1h02m`."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def spend_text(tokens_in: int | None, tokens_out: int | None, cost: float | None) -> str:
    """`12,345 in / 678 out tokens, $0.0123`, or "" when nothing was reported."""
    parts = []
    if tokens_in is not None or tokens_out is not None:
        parts.append(f"{tokens_in or 0:,} in / {tokens_out or 0:,} out tokens")
    if cost is not None:
        parts.append(f"${cost:.4f}")
    return ", ".join(parts)


class EventRenderer:
    """Stored events to lines. `verbose` adds tool results, reasoning and agent details."""

    def __init__(self, *, verbose: bool = False) -> None:
        self.verbose = verbose
        self._max_iterations: int | None = None
        self._in_run = 0
        self._streaming: list[str] = []  # streamed text (deltas) not yet ended by a newline
        self._stream_role: str | None = None
        self.shown: set[str] = set()  # reasons and errors shown: the run's end says them once
        self._approvals = "auto"  # the session's approvals: who may answer its requests

    def feed(self, frame: Frame) -> list[Line]:
        meta = frame.meta
        handler: Callable[[dict[str, Any]], list[Line]] | None = getattr(
            self, "_on_" + frame.topic.replace(".", "_"), None)
        lines: list[Line] = []
        delta = frame.topic == "agent.output" and bool(meta.get("delta"))
        if not delta and self._streaming:
            lines += self.flush()
        if handler is not None:
            try:
                lines += handler(meta)
            except (TypeError, ValueError, AttributeError, KeyError) as exc:
                # Anyone may append to a run's stream: an odd event is said, never fatal.
                lines.append(Line(f"{terminal_safe(frame.topic)}: an event that cannot be "
                                  f"shown ({type(exc).__name__})", "dim", 1))
        return lines

    def flush(self) -> list[Line]:
        """Streamed text still held (its line had not ended)."""
        text, self._streaming = "".join(self._streaming), []
        return self._said(text, self._stream_role) if text else []

    # -- runs ----------------------------------------------------------------------------

    def _on_run_started(self, meta: dict[str, Any]) -> list[Line]:
        self._in_run = 0
        self._max_iterations = meta.get("maxIterations")
        if meta.get("mode") == "step":
            return [Line(f"step {meta.get('run_id')} with agent {meta.get('agent')}", "bold")]
        limit = self._max_iterations
        if isinstance(limit, int) and limit >= NO_ITERATION_LIMIT:
            self._max_iterations = None
            return [Line(f"run {meta.get('run_id')} with agent {meta.get('agent')}, no "
                         "iteration limit", "bold")]
        up_to = counted(limit, "iteration") if isinstance(limit, int) else f"{limit} iterations"
        return [Line(f"run {meta.get('run_id')} with agent {meta.get('agent')}, up to "
                     f"{up_to}", "bold")]

    def _on_run_paused(self, meta: dict[str, Any]) -> list[Line]:
        return [Line("run paused: it goes on after `ralph resume`", "yellow")]

    def _on_run_resumed(self, meta: dict[str, Any]) -> list[Line]:
        return [Line("run resumed", "yellow")]

    def _on_control_applied(self, meta: dict[str, Any]) -> list[Line]:
        by = terminal_safe(str(meta.get("by") or "another process"))[:100]
        action = terminal_safe(str(meta.get("action")))[:20]
        done = "" if meta.get("ok") else " (nothing to do)"
        return [Line(f"{action} asked by {by}{done}", "yellow")]

    def _on_run_stopped(self, meta: dict[str, Any]) -> list[Line]:
        reason = str(meta.get("reason"))
        message = str(meta.get("message") or "")
        if meta.get("mode") == "step" and reason != "error":
            return []  # the iteration's own line said how the step went
        phrase = _STOP_PHRASES.get(reason, reason)
        said = (f" ({terminal_safe(message)})"
                if message and message != phrase and message not in self.shown else "")
        done = (f"; {meta['done']}/{meta['total']} tasks done"
                if meta.get("done") is not None and meta.get("total") is not None else "")
        return [Line(f"run ended: {phrase}{said}{done}", "bold")]

    # -- iterations ------------------------------------------------------------------------

    def _on_iteration_started(self, meta: dict[str, Any]) -> list[Line]:
        self._in_run += 1
        of = (f" ({self._in_run}/{self._max_iterations} of this run)"
              if self._max_iterations and self._max_iterations > 1 else "")
        return [Line(f"iteration {meta.get('iteration')}{of}  task {meta.get('task_id')}: "
                     f"{terminal_safe(str(meta.get('title')))}  (attempt "
                     f"{meta.get('attempt_id')})", "bold")]

    def _on_iteration_finished(self, meta: dict[str, Any]) -> list[Line]:
        if meta.get("verified"):
            verdict, style = "verified done", "green"
        else:
            verdict, style = str(meta.get("status", "not_done")).replace("_", " "), "yellow"
        self.shown.add(str(meta.get("reason") or ""))
        reason = terminal_safe(str(meta.get("reason") or ""))
        if reason.startswith(verdict):  # "stopped before the iteration finished"
            verdict, reason = reason, ""
        why = f": {reason}" if reason else ""
        figures = [duration_text(float(meta.get("duration_seconds") or 0.0))]
        spent = spend_text(meta.get("tokens_in"), meta.get("tokens_out"), meta.get("cost_usd"))
        if spent:
            figures.append(spent)
        lines = [Line(f"{verdict}{why}  ({', '.join(figures)})", style, 1)]
        where = []
        if meta.get("log_path"):
            where.append(f"log {meta['log_path']}")
        if meta.get("commit"):
            where.append(f"commit {str(meta['commit'])[:10]}")
        if where:
            lines.append(Line("  ".join(where), "dim", 1))
        return lines

    # -- agent sessions (ralph.sessions) -----------------------------------------------------

    def _on_session_started(self, meta: dict[str, Any]) -> list[Line]:
        self._approvals = str(meta.get("approvals") or "auto")
        title = f": {terminal_safe(str(meta['title']))}" if meta.get("title") else ""
        return [Line(f"session {meta.get('session_id')}  agent "
                     f"{terminal_safe(str(meta.get('agent')))}{title}", "bold")]

    def _on_session_stop_requested(self, meta: dict[str, Any]) -> list[Line]:
        return [Line(f"stop requested by {terminal_safe(str(meta.get('by')))}", "yellow", 1)]

    def _on_session_approval_requested(self, meta: dict[str, Any]) -> list[Line]:
        # Under `deny` the rules or the mode answer at once (the answer's line says which);
        # under `ask` a person may have to: say how.
        if self._approvals != "ask":
            return []
        ask = (f"ralph agent approve {meta.get('session_id')} {meta.get('tool_use_id')} "
               "--allow|--deny")
        return [Line(f"permission asked: {approval_subject(meta)}", "bold yellow", 1),
                Line(terminal_safe(ask), "dim", 2)]

    def _on_session_approval_answered(self, meta: dict[str, Any]) -> list[Line]:
        decision = "allowed" if meta.get("decision") == "allow" else "denied"
        who = f"rule {meta['rule']}" if meta.get("rule") else str(meta.get("by"))
        message = "" if meta.get("rule") else str(meta.get("message") or "")
        text = f"{decision} by {who}" + (f": {message}" if message else "")
        return [Line(terminal_safe(text), "green" if decision == "allowed" else "red", 1)]

    def _on_session_finished(self, meta: dict[str, Any]) -> list[Line]:
        status = str(meta.get("status"))
        message = terminal_safe(str(meta.get("message") or ""))
        word = status.replace("_", " ")
        if message.startswith(word):  # "stopped on request": said once
            shown = message
        else:
            shown = word + (f": {message}" if message and status != "completed" else "")
        figures = [duration_text(float(meta["duration_s"]))] if meta.get(
            "duration_s") is not None else []
        usage = meta.get("usage") or {}
        spent = spend_text(usage.get("input_tokens"), usage.get("output_tokens"),
                           meta.get("cost_usd"))
        if spent:
            figures.append(spent)
        style = "green" if status == "completed" else "yellow" if status == "stopped" else "red"
        return [Line(f"session {shown}" + (f"  ({', '.join(figures)})" if figures else ""),
                     style, 1)]

    # -- the agent --------------------------------------------------------------------------

    def _on_agent_started(self, meta: dict[str, Any]) -> list[Line]:
        if not self.verbose:
            return []
        argv = " ".join(terminal_safe(str(a)) for a in meta.get("argv") or [])
        return [Line(f"{_who(meta)}started: {argv}", "dim", 1)]

    def _on_agent_output(self, meta: dict[str, Any]) -> list[Line]:
        kind = meta.get("kind")
        content = str(meta.get("content") or "")
        cut = int(meta.get("chars") or 0) > len(content)
        more = " …" if cut else ""
        role = meta.get("role")
        if kind == "text":
            if meta.get("delta"):
                return self._stream(content, role)
            return self._said(content + more, role)
        if kind == "tool_use":
            return [Line(f"{_who(meta)}→ {tool_summary(meta.get('tool'), content)}", "cyan",
                         2)]
        if kind == "error":
            return [Line(f"{_who(meta)}! {_one_line(content)}{more}", "red", 2)]
        if kind == "tool_result" and self.verbose:
            return [Line(f"{_who(meta)}← {line}", "dim", 2)
                    for line in _first_lines(content, RESULT_LINES, RESULT_CHARS)]
        if kind == "reasoning" and self.verbose:
            return [Line(f"{_who(meta)}(thinking) {line}", "dim italic", 2)
                    for line in _first_lines(content, RESULT_LINES, RESULT_CHARS)]
        return []

    def _stream(self, content: str, role: str | None) -> list[Line]:
        """Streamed text comes in pieces: show each line once it is whole."""
        self._stream_role = role
        self._streaming.append(content)
        held = "".join(self._streaming)
        if "\n" not in held:
            return []
        done, rest = held.rsplit("\n", 1)
        self._streaming = [rest] if rest else []
        return self._said(done, role)

    def _said(self, text: str, role: str | None) -> list[Line]:
        who = f"{role}: " if role else ""
        return [Line(who + terminal_safe(line), "", 2)
                for line in text.splitlines() if line.strip()]

    def _on_agent_silent(self, meta: dict[str, Any]) -> list[Line]:
        seconds = float(meta.get("seconds") or 0)
        again = meta.get("next_warning_s")
        then = f"; next warning after {duration_text(float(again))}" if again else ""
        return [Line(f"{_who(meta)}the agent printed nothing for {duration_text(seconds)}"
                     f"{then}", "yellow", 1)]

    def _on_agent_rate_limited(self, meta: dict[str, Any]) -> list[Line]:
        wait = meta.get("wait_seconds")
        what = f"waiting {duration_text(float(wait))}" if wait is not None else "giving up"
        return [Line(f"{_who(meta)}rate limited: {what} "
                     f"({terminal_safe(str(meta.get('reason', '')))})", "yellow", 1)]

    def _on_agent_server_restarted(self, meta: dict[str, Any]) -> list[Line]:
        agent = terminal_safe(str(meta.get("agent")))
        return [Line(f"agent {agent}'s server ended (exit {meta.get('exit_code')}): started "
                     "again", "yellow")]

    def _on_agent_finished(self, meta: dict[str, Any]) -> list[Line]:
        status = meta.get("status")
        if status not in ("ok", None):
            message = terminal_safe(str(meta.get("message") or ""))
            return [Line(f"{_who(meta)}agent {str(status).replace('_', ' ')}: {message}",
                         "red", 1)]
        if self.verbose:
            return [Line(f"{_who(meta)}agent finished ({exit_text(meta.get('exit_code'))}, "
                         f"{duration_text(float(meta.get('duration_s') or 0))})", "dim", 1)]
        return []

    def _on_agent_usage(self, meta: dict[str, Any]) -> list[Line]:
        if not self.verbose:
            return []
        spent = spend_text(meta.get("input_tokens"), meta.get("output_tokens"),
                           meta.get("cost_usd"))
        return [Line(f"{_who(meta)}used {spent or 'no reported tokens'}", "dim", 1)]

    # -- checks -----------------------------------------------------------------------------

    def _on_gate_started(self, meta: dict[str, Any]) -> list[Line]:
        return [Line(f"gate {meta.get('index')}: {meta.get('command')}", "dim", 1)] \
            if self.verbose else []

    def _on_gate_finished(self, meta: dict[str, Any]) -> list[Line]:
        ok = bool(meta.get("ok"))
        how = "timed out" if meta.get("timed_out") else exit_text(meta.get("exit_code"))
        if meta.get("error"):
            how = terminal_safe(str(meta["error"]))
        lines = [Line(f"gate {terminal_safe(str(meta.get('command')))}: "
                      f"{'ok' if ok else 'failed'} ({how}, "
                      f"{duration_text(float(meta.get('duration_s') or 0))})",
                      "green" if ok else "red", 1)]
        tail = str(meta.get("output_tail") or "")
        if not ok and tail:
            lines += [Line("| " + terminal_safe(line), "dim", 2) for line in tail.splitlines()]
        return lines

    def _on_judge_finished(self, meta: dict[str, Any]) -> list[Line]:
        return _check_line("judge", meta)

    def _on_review_finished(self, meta: dict[str, Any]) -> list[Line]:
        return _check_line("review", meta)

    # -- tasks and the tree -----------------------------------------------------------------

    def _on_task_reopened(self, meta: dict[str, Any]) -> list[Line]:
        return [Line(f"reopened task {meta.get('task_id')}: "
                     f"{terminal_safe(str(meta.get('reason')))}", "yellow", 1)]

    def _on_task_blocked(self, meta: dict[str, Any]) -> list[Line]:
        return [Line(f"blocked task {meta.get('task_id')}: "
                     f"{terminal_safe(str(meta.get('reason')))}", "red", 1)]

    def _on_task_unblocked(self, meta: dict[str, Any]) -> list[Line]:
        return [Line(f"unblocked task {meta.get('task_id')}: "
                     f"{terminal_safe(str(meta.get('reason')))}", "yellow", 1)]

    def _on_protected_reverted(self, meta: dict[str, Any]) -> list[Line]:
        changes = list(meta.get("changes") or [])
        shown = ", ".join(f"{c.get('path')} ({c.get('change')})" for c in changes[:5])
        more = f" and {len(changes) - 5} more" if len(changes) > 5 else ""
        return [Line(f"put back protected paths: {terminal_safe(shown + more)}", "yellow", 1)]

    def _on_loop_warning(self, meta: dict[str, Any]) -> list[Line]:
        return [Line(f"warning: {terminal_safe(str(meta.get('message')))}", "yellow")]

    def _on_loop_error(self, meta: dict[str, Any]) -> list[Line]:
        self.shown.add(str(meta.get("message")))
        return [Line(f"error: {terminal_safe(str(meta.get('message')))}", "red", 1)]


def summary_table(figures: dict[str, Any], *, with_message: bool = True) -> Table:
    """The end of a run in a table: tasks, iterations, duration, tokens and cost per agent,
    and why it stopped (`figures`: a RunOutcome's fields, or a `run.stopped` event's).
    `with_message=False` leaves out the stop's message (shown just before: an error)."""
    reason = str(figures.get("reason"))
    phrase = _STOP_PHRASES.get(reason, reason)
    table = Table(title=Text(f"run {figures.get('run_id', '')}: {phrase}"),
                  title_justify="left", show_header=True)
    table.add_column("")
    table.add_column("tokens in", justify="right")
    table.add_column("tokens out", justify="right")
    table.add_column("cost", justify="right")
    agents = figures.get("agents")
    for name, value in sorted(agents.items() if isinstance(agents, dict) else []):
        spend = value if isinstance(value, dict) else {}
        table.add_row(Text(f"agent {terminal_safe(str(name))}"),
                      f"{_int(spend.get('tokens_in')):,}",
                      f"{_int(spend.get('tokens_out')):,}", _cost(spend.get("cost_usd")))
    table.add_row("all agents", f"{_int(figures.get('tokens_in')):,}",
                  f"{_int(figures.get('tokens_out')):,}", _cost(figures.get("cost_usd")),
                  style="bold")
    tasks = (f"{_int(figures.get('done'))} done, {_int(figures.get('blocked'))} blocked, "
             f"{_int(figures.get('open'))} open of {_int(figures.get('total'))}")
    iterations = figures.get("iterations")
    message = str(figures.get("message") or "")
    why = terminal_safe(message) if with_message and message else phrase
    table.caption = Text(
        f"tasks: {tasks}; iterations: {iterations if iterations is not None else '-'}; "
        f"duration: {duration_text(_float(figures.get('duration_seconds')))}; "
        f"stopped: {why}")
    table.caption_justify = "left"
    return table


def _cost(value: Any) -> str:
    return f"${value:.4f}" if isinstance(value, int | float) else "-"


def _int(value: Any) -> int:
    """A count from an event (0 when it is not one: anyone may append to a stream)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _float(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


def _who(meta: dict[str, Any]) -> str:
    """`judge: ` for a judge's or reviewer's agent events, else nothing."""
    role = meta.get("role")
    return f"{role}: " if role else ""


def _check_line(name: str, meta: dict[str, Any]) -> list[Line]:
    ok = bool(meta.get("ok"))
    why = f" ({terminal_safe(str(meta['reason']))})" if meta.get("reason") else ""
    return [Line(f"{name}: {'ok' if ok else 'said no'}{why}", "green" if ok else "red", 1)]


def _one_line(text: str) -> str:
    return " ".join(terminal_safe(text).split())


def _first_lines(text: str, lines: int, chars: int) -> list[str]:
    kept = [terminal_safe(line) for line in text.splitlines() if line.strip()][:lines]
    out = []
    size = 0
    for line in kept:
        if size + len(line) > chars:
            out.append(line[:max(0, chars - size)] + "…")
            break
        out.append(line)
        size += len(line)
    return out

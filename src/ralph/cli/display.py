"""The terminal view of a run: one line per event that matters, on stderr (stdout stays for
`--json`), with a live line showing the iteration under way and its elapsed time."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.status import Status

from ralph.cli.output import exit_text
from ralph.store import Frame

_OK = "[green]ok[/green]"
_FAIL = "[red]failed[/red]"


class RunDisplay:
    """An observer for LoopService: call it with each frame the loop appends."""

    def __init__(self, console: Console | None = None, *, max_iterations: int | None = None,
                 replay_note: str | None = None) -> None:
        self.console = console or Console(stderr=True, highlight=False, soft_wrap=True)
        self.max_iterations = max_iterations
        self._in_run = 0  # iterations of the current run shown so far
        self._status: Status | None = None
        self._started = 0.0
        self._task = ""
        self._run_id: str | None = None
        self._errors: set[str] = set()  # messages shown once, not repeated
        if replay_note:
            self.console.print(replay_note)

    def __call__(self, frame: Frame) -> None:
        # Frames of other runs (what a start's recovery records of a dead run) are not this
        # run's story: the recovery says what it found in one line of its own.
        if frame.topic != "run.started" and frame.meta.get("run_id") != self._run_id:
            return
        handler = getattr(self, "_on_" + frame.topic.replace(".", "_"), None)
        if handler is not None:
            handler(frame.meta)

    def showed(self, message: str) -> bool:
        """True if this display already printed `message` as an error."""
        return message in self._errors

    def close(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    # -- events ----------------------------------------------------------------------------

    def _on_run_started(self, meta: dict[str, Any]) -> None:
        self._run_id = meta.get("run_id")
        self._in_run = 0
        if meta.get("mode") == "run":
            self.max_iterations = meta.get("maxIterations")
            self.console.print(f"[bold]run {meta['run_id']}[/bold] with agent "
                               f"{escape(str(meta['agent']))}, up to {self.max_iterations} "
                               "iterations")

    def _on_iteration_started(self, meta: dict[str, Any]) -> None:
        # The iteration's number is the project's; "k/max" counts this run's iterations.
        self._in_run += 1
        of = (f" ({self._in_run}/{self.max_iterations} of this run)"
              if self.max_iterations and self.max_iterations > 1 else "")
        self._task = f"task {meta['task_id']}: {meta['title']}"
        self.console.print(f"[bold]iteration {meta['iteration']}{of}[/bold]  "
                           f"{escape(self._task)}  (attempt {meta['attempt_id']})")
        self._started = time.monotonic()
        self._live("agent working")

    def _on_agent_rate_limited(self, meta: dict[str, Any]) -> None:
        self.console.print(f"  rate limited: waiting {meta['wait_seconds']:.0f} s "
                           f"({escape(str(meta.get('reason', '')))})")

    def _on_gate_started(self, meta: dict[str, Any]) -> None:
        self._live(f"gate {meta['index']}: {meta['command']}")

    def _on_gate_finished(self, meta: dict[str, Any]) -> None:
        verdict = _OK if meta["ok"] else _FAIL
        self.console.print(f"  gate {escape(meta['command'])}: {verdict} "
                           f"({exit_text(meta['exit_code'])}, {meta['duration_s']:.1f} s)")

    def _on_judge_finished(self, meta: dict[str, Any]) -> None:
        self.console.print(f"  judge: {_OK if meta['ok'] else _FAIL}"
                           + (f" ({escape(meta['reason'])})" if meta.get("reason") else ""))

    def _on_review_finished(self, meta: dict[str, Any]) -> None:
        self.console.print(f"  review: {_OK if meta['ok'] else _FAIL}"
                           + (f" ({escape(meta['reason'])})" if meta.get("reason") else ""))

    def _on_task_reopened(self, meta: dict[str, Any]) -> None:
        self.console.print(f"  [yellow]reopened task {meta['task_id']}[/yellow]: "
                           f"{escape(meta['reason'])}")

    def _on_task_blocked(self, meta: dict[str, Any]) -> None:
        self.console.print(f"  [red]blocked task {meta['task_id']}[/red]: "
                           f"{escape(meta['reason'])}")

    def _on_protected_reverted(self, meta: dict[str, Any]) -> None:
        changes = ", ".join(f"{c['path']} ({c['change']})" for c in meta["changes"][:5])
        more = f" and {len(meta['changes']) - 5} more" if len(meta["changes"]) > 5 else ""
        self.console.print(f"  [yellow]put back protected paths[/yellow]: "
                           f"{escape(changes + more)}")

    def _on_iteration_finished(self, meta: dict[str, Any]) -> None:
        self.close()
        if meta["verified"]:
            verdict = "[green]verified done[/green]"
        else:
            verdict = f"[yellow]{meta['status'].replace('_', ' ')}[/yellow]"
        reason = meta.get("reason")
        # An iteration that ended in an error is followed by the loop's error line, which
        # says why: shown once.
        shown = meta["status"] == "error" or reason in self._errors
        why = f": {escape(reason)}" if reason and not shown else ""
        commit = f"  commit {meta['commit'][:10]}" if meta.get("commit") else ""
        self.console.print(f"  {verdict}{why}  ({meta['duration_seconds']:.1f} s){commit}")

    def _on_loop_warning(self, meta: dict[str, Any]) -> None:
        self.console.print(f"[yellow]warning[/yellow]: {escape(meta['message'])}")

    def _on_loop_error(self, meta: dict[str, Any]) -> None:
        if meta["message"] in self._errors:
            return
        self.close()
        self._errors.add(meta["message"])
        self.console.print(f"  [red]error[/red]: {escape(meta['message'])}")

    def _on_run_stopped(self, meta: dict[str, Any]) -> None:
        self.close()
        done = (f"; {meta['done']}/{meta['total']} tasks done"
                if meta.get("done") is not None and meta.get("total") is not None else "")
        message = str(meta.get("message", ""))
        said = f" ({escape(message)})" if message and message not in self._errors else ""
        self.console.print(f"[bold]run stopped[/bold]: {meta['reason']}{said}{done}")

    def _live(self, what: str) -> None:
        if not self.console.is_terminal:
            return
        text = f"{escape(self._task)}: {escape(what)}"
        if self._status is None:
            self._status = self.console.status(text)
            self._status.start()
        else:
            self._status.update(text)

"""The live view of `ralph step` and `ralph run`, on stderr (stdout stays for `--json`).

Each event the loop appends is rendered as it happens (ralph.cli.render, which `ralph log`
uses too): the iteration's header, the agent's text and tool calls, gates with the end of a
failing one's output, the verdict with tokens, cost, log and commit. On a terminal a live
line at the bottom shows what runs now and for how long; off a terminal (CI, a pipe) every
line is plain text with the time in front, without a spinner or colours.
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.status import Status
from rich.text import Text

from ralph.cli.render import EventRenderer, Line, duration_text
from ralph.store import Frame


class _Elapsed:
    """The live line's text, with the time since `started` computed each time it is drawn."""

    def __init__(self) -> None:
        self.what = ""
        self.started = time.monotonic()

    def __rich__(self) -> Text:
        return Text(f"{self.what}  {duration_text(time.monotonic() - self.started)}")


class RunDisplay:
    """An observer for LoopService: call it with each frame the loop appends."""

    def __init__(self, console: Console | None = None, *, max_iterations: int | None = None,
                 replay_note: str | None = None, verbose: bool = False) -> None:
        self.console = console or Console(stderr=True, highlight=False, soft_wrap=True)
        self.max_iterations = max_iterations
        self.renderer = EventRenderer(verbose=verbose)
        self._status: Status | None = None
        self._live = _Elapsed()
        self._task = ""
        self._run_id: str | None = None
        self._errors: set[str] = set()  # messages shown once, not repeated
        if replay_note:
            self.console.print(replay_note)

    def __call__(self, frame: Frame) -> None:
        # Frames of other runs (what a start's recovery records of a dead run) are not this
        # run's story: the recovery says what it found in one line of its own.
        if frame.topic == "run.started":
            self._run_id = frame.meta.get("run_id")
        elif frame.meta.get("run_id") != self._run_id:
            return
        if frame.topic == "loop.error":
            message = str(frame.meta.get("message"))
            if message in self._errors:
                return
            self._errors.add(message)
        if frame.topic == "iteration.finished" and frame.meta.get("status") == "error":
            # The loop's error line that follows says why: shown once.
            self._errors.add(str(frame.meta.get("reason")))
        self._show(frame, self.renderer.feed(frame))
        self._follow(frame.topic, frame.meta)

    def showed(self, message: str) -> bool:
        """True if this display already printed `message` as an error."""
        return message in self._errors or message in self.renderer.shown

    def close(self) -> None:
        self._show(None, self.renderer.flush())
        if self._status is not None:
            self._status.stop()
            self._status = None

    # -- output -----------------------------------------------------------------------------

    def _show(self, frame: Frame | None, lines: list[Line]) -> None:
        show_lines(self.console, frame.ts if frame is not None else None, lines)

    def _follow(self, topic: str, meta: dict[str, Any]) -> None:
        """The live line: what runs now (on a terminal only)."""
        if topic == "iteration.started":
            self._task = f"task {meta.get('task_id')}"
            self._set_live("agent working", restart=True)
        elif topic == "agent.started" and meta.get("role"):
            self._set_live(f"{meta['role']} working", restart=True)
        elif topic == "gate.started":
            self._set_live(f"gate {meta.get('index')}: {meta.get('command')}", restart=True)
        elif topic in ("iteration.finished", "run.stopped", "run.paused"):
            self.close()

    def _set_live(self, what: str, *, restart: bool) -> None:
        if not self.console.is_terminal:
            return
        self._live.what = f"{self._task}: {what}"
        if restart:
            self._live.started = time.monotonic()
        if self._status is None:
            self._status = self.console.status(self._live)
            self._status.start()


def show_lines(console: Console, ts: str | None, lines: list[Line]) -> None:
    """Print rendered lines: styled on a terminal; off one plain, each with the time (`ts`,
    the event's, else now) in front, flushed at once (a pipe's reader sees it live)."""
    if not lines:
        return
    if console.is_terminal:
        for line in lines:
            console.print(Text("  " * line.level + line.text, style=line.style))
        return
    stamp = ts[11:19] if ts else time.strftime("%H:%M:%S", time.gmtime())
    out = console.file
    for line in lines:
        out.write(f"{stamp} {'  ' * line.level}{line.text}\n")
    out.flush()

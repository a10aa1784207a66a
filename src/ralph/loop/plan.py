"""What a named session (`ralph nu`) changes about the loop's iterations.

The loop is the same: one task at a time, the agent, protected paths, gates, judge, review,
commits, events, pause and stop. A session plan supplies what differs: the tracker (the
session itself, one task, done only when the agent claimed completion and Ralph accepted the
claim), the prompt (the session's template), the title of an attached agent's session, and
the session's own record of each iteration and claim in the event store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ralph.loop.results import StepResult
    from ralph.tracker import Tracker


class SessionPlan(Protocol):
    """A named session's part in each iteration (ralph.nu.plan implements it)."""

    name: str

    def tracker(self) -> Tracker:
        """The session as a tracker: one task, done once a completion claim is accepted."""
        ...

    def begin(self, iteration: int, run_id: str) -> int:
        """The loop's iteration `iteration` starts: the session's own number for it
        (recorded as started)."""
        ...

    def env(self, number: int) -> dict[str, str]:
        """What the agent of iteration `number` gets in its environment besides the loop's
        (the session, its number, the session's store as RALPH_STORE)."""
        ...

    def prompt(self, number: int, feedback: list[str]) -> str:
        """The prompt for the session's iteration `number`; `feedback`: what Ralph tells
        it about the last rejected claim or failed gates."""
        ...

    def title(self, number: int) -> str:
        """The title of iteration `number` in an attached agent server's session list."""
        ...

    def check_context(self) -> str:
        """What a judge or reviewer of a completion claim is shown besides the change: the
        spec and the session's notes (Markdown sections)."""
        ...

    def unsettled(self) -> str | None:
        """Why a completion claimed now cannot be accepted on the session's own record
        (open notes), or None."""
        ...

    def noted(self, number: int) -> bool:
        """Whether notes were added to the session during iteration `number`."""
        ...

    def claimed(self, number: int) -> bool:
        """Whether completion was claimed during iteration `number`."""
        ...

    def judged(self, number: int, accepted: bool, reason: str | None) -> None:
        """Record Ralph's verdict on the completion claimed in iteration `number`."""
        ...

    def finished(self, number: int, result: StepResult) -> None:
        """Iteration `number` ended (recorded as complete, with the loop's verdict)."""
        ...

    def interrupted(self, result: StepResult) -> None:
        """The process running the session's last iteration died during it (found by the
        next start): recorded as its end."""
        ...

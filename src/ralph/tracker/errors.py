"""The tracker's one error class, so faces can report any tracker failure as a single line."""

from __future__ import annotations

from ralph.errors import RalphError


class TrackerError(RalphError):
    """A tracker file that cannot be read, understood or updated.

    The message is one line naming the file, the line where the format has lines (markdown, and
    JSON syntax errors), and the problem, because the user fixes it by editing that file.
    """

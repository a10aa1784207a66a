"""The named sessions' error."""

from __future__ import annotations

from ralph.errors import RalphError


class NuError(RalphError):
    """A named session that cannot do what was asked (a missing spec, a claim outside an
    iteration)."""

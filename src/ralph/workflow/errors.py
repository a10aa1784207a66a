"""The workflow's error: a request or a session that cannot be carried out."""

from __future__ import annotations

from ralph.errors import RalphError


class WorkflowError(RalphError):
    """A workflow request or session that cannot be carried out."""

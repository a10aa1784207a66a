"""The workflow's error: a request or a session that cannot be carried out."""

from __future__ import annotations

from ralph.errors import RalphError


class WorkflowError(RalphError):
    """A workflow request or session that cannot be carried out."""


class NoSuchWorkflow(WorkflowError):
    """No session answers the request: an unknown id, none yet, none running, none to
    resume (the CLI exits 1 for it, 2 for bad input)."""

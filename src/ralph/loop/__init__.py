"""The Ralph loop service: iterations with verified completion, runs, pause/stop, status.

Names are imported on first use, so that a face needing only `project_status` does not load
the whole loop (agents, gates, git) at start-up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ralph.loop.errors import LoopBusy, LoopClosed, LoopError, NothingToDo
    from ralph.loop.models import LastIteration, StatusReport, StopReason
    from ralph.loop.results import RunOutcome, StepResult
    from ralph.loop.service import LoopService, new_run_id
    from ralph.loop.status import project_status

_WHERE = {
    "LoopBusy": "errors", "LoopClosed": "errors", "LoopError": "errors",
    "NothingToDo": "errors",
    "LastIteration": "models", "RunOutcome": "results", "StatusReport": "models",
    "StepResult": "results", "StopReason": "models",
    "LoopService": "service", "new_run_id": "service", "project_status": "status",
}

__all__ = [
    "LastIteration",
    "LoopBusy",
    "LoopClosed",
    "LoopError",
    "LoopService",
    "NothingToDo",
    "RunOutcome",
    "StatusReport",
    "StepResult",
    "StopReason",
    "new_run_id",
    "project_status",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'ralph.loop' has no attribute {name!r}")
    return getattr(importlib.import_module(f"ralph.loop.{module}"), name)

"""The Ralph loop service: iterations with verified completion, runs, pause/stop, status."""

from ralph.loop.errors import LoopBusy, LoopError, NothingToDo
from ralph.loop.models import LastIteration, RunOutcome, StatusReport, StepResult, StopReason
from ralph.loop.service import LoopService, new_run_id

__all__ = [
    "LastIteration",
    "LoopBusy",
    "LoopError",
    "LoopService",
    "NothingToDo",
    "RunOutcome",
    "StatusReport",
    "StepResult",
    "StopReason",
    "new_run_id",
]

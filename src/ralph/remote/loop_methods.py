"""The remote API's loop and notes methods (`loop/*`, `tasks/list`, `notes/*`): each calling
the same loop-service function as the editor bridge. (Being written.)"""

from __future__ import annotations

from ralph.loop import LoopService
from ralph.rpc import Registry


def register(registry: Registry, service: LoopService) -> None:
    """Add the loop, task and notes methods on `service`."""

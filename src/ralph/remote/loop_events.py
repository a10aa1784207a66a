"""The loop's store frames as the remote API's events (`event/loop_*`). (Being written.)"""

from __future__ import annotations

from typing import Any

from ralph.store import Frame

Event = tuple[str, dict[str, Any]]


def loop_events(frame: Frame) -> list[Event]:
    """The events of one loop frame (none for other frames); each carries `seq`."""
    return []

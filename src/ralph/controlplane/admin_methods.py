"""`workspace.doctor`, `adapter.status` (in progress)."""

from __future__ import annotations

from ralph.controlplane.plane import Plane
from ralph.rpc import Registry


def register(registry: Registry, plane: Plane) -> None:
    pass

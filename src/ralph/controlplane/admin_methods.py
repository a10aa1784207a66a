"""`workspace.doctor`, `adapter.status`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import StrictBool

from ralph.company.adapters import adapter_statuses
from ralph.company.doctor import doctor
from ralph.company.layout import require_workspace
from ralph.controlplane.params import WorkspaceParams
from ralph.controlplane.plane import FAILED, Plane
from ralph.rpc import Registry


class DoctorParams(WorkspaceParams):
    rebuild_index: StrictBool = False
    sync_index: StrictBool = False


def register(registry: Registry, plane: Plane) -> None:
    @registry.method("workspace.doctor", params=DoctorParams, result=dict[str, Any],
                     errors=[FAILED], summary="Check a workspace: its files, machine file, "
                     "agent programs, repositories, index and worktrees.")
    async def workspace_doctor(params: DoctorParams) -> dict[str, Any]:
        return await plane.call(params.workspace_dir, _doctor, params.rebuild_index,
                                params.sync_index, params.workspace_dir)

    @registry.method("adapter.status", params=WorkspaceParams, result=list[dict[str, Any]],
                     errors=[FAILED], summary="Ralph's agent adapters: whether each program "
                     "is there, and what each can do.")
    async def adapter_status(params: WorkspaceParams) -> list[dict[str, Any]]:
        return await plane.call(params.workspace_dir, _adapters)


def _doctor(root: Path, rebuild: bool, sync: bool, shown_as: str) -> dict[str, Any]:
    return doctor(root, rebuild_index=rebuild, sync_index=sync, shown_as=shown_as)


def _adapters(root: Path) -> list[dict[str, Any]]:
    require_workspace(root)
    return adapter_statuses(root)

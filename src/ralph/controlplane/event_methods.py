"""`events.subscribe`, `events.unsubscribe`, `events.ack` (the machinery is in
ralph.controlplane.subscriptions; the backfill reads the workspace's index)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, Field, StrictInt

from ralph.company.index import backfill as index_backfill
from ralph.company.layout import CompanyError
from ralph.company.live import Feed
from ralph.controlplane.params import Params, Str1, WorkspaceDir
from ralph.controlplane.plane import FAILED, Plane, failed
from ralph.controlplane.subscriptions import (
    Filters,
    Subscriptions,
    default_subscription_id,
)
from ralph.rpc import Registry
from ralph.store.lines import FileCursor


class SubscribeParams(Params):
    subscription_id: Str1 | None = None
    workspace_dir: WorkspaceDir | None = None
    project_id: Str1 | None = None
    run_id: Str1 | None = None
    event_types: list[Str1] | None = None
    backfill_limit: Annotated[StrictInt, Field(gt=0, le=5000)] | None = None


class SubscriptionParams(Params):
    subscription_id: Str1


class AckParams(SubscriptionParams):
    last_ack_ts_monotonic_ms: Annotated[StrictInt, Field(ge=0)] | None = None


class SubscribeResult(BaseModel):
    subscription_id: str


class UnsubscribeResult(BaseModel):
    removed: bool


class AckResult(BaseModel):
    ok: bool


def register(registry: Registry, plane: Plane) -> None:
    subscriptions = Subscriptions(lambda: plane.notify, plane.workspaces)
    plane.on_workspace(subscriptions.workspace_added)

    async def backfill(filters: Filters, root: Path, limit: int
                       ) -> tuple[list[dict[str, Any]], dict[str, FileCursor]]:
        # Where each file ends now: a run the index does not hold (no valid run.yaml) goes
        # on live from here; runs the index holds go on from where its view stopped.
        now = await asyncio.to_thread(lambda: Feed(root).cursors)
        async with plane.in_order.of(str(root)):
            rows, indexed = await plane.off_loop(
                index_backfill, root, project_id=filters.project_id, run_id=filters.run_id,
                event_types=sorted(filters.event_types) if filters.event_types else None,
                limit=limit, context={"workspace_dir": str(root)})
        return rows, {**now, **indexed}
    plane.on_close(subscriptions.close)

    @registry.method("events.subscribe", params=SubscribeParams, result=SubscribeResult,
                     errors=[FAILED], summary="Follow run events as `events.notification`s: "
                     "the recent `backfill_limit` first, then each new one, from any process.")
    async def events_subscribe(params: SubscribeParams | None = None) -> SubscribeResult:
        params = params or SubscribeParams()
        sub_id = params.subscription_id or default_subscription_id()
        root = Path(params.workspace_dir) if params.workspace_dir else None
        if root is not None:
            await plane.know(str(root))
        filters = Filters(params.project_id, params.run_id,
                          frozenset(params.event_types) if params.event_types else None)
        try:
            await subscriptions.subscribe(sub_id, root, filters, params.backfill_limit, backfill)
        except (CompanyError, OSError) as exc:
            raise failed(str(exc), subscription_id=sub_id) from None
        return SubscribeResult(subscription_id=sub_id)

    @registry.method("events.unsubscribe", params=SubscriptionParams,
                     result=UnsubscribeResult, summary="End a subscription.")
    async def events_unsubscribe(params: SubscriptionParams) -> UnsubscribeResult:
        return UnsubscribeResult(removed=subscriptions.unsubscribe(params.subscription_id))

    @registry.method("events.ack", params=AckParams, result=AckResult, errors=[FAILED],
                     summary="Acknowledge delivered events (up to last_ack_ts_monotonic_ms); "
                     "a subscription made again with the same id resumes after them.")
    async def events_ack(params: AckParams) -> AckResult:
        sub = subscriptions.get(params.subscription_id)
        if sub is None:
            raise failed(f"Unknown subscription_id: {params.subscription_id}",
                         subscription_id=params.subscription_id)
        try:
            await subscriptions.acknowledge(sub, params.last_ack_ts_monotonic_ms)
        except OSError as exc:
            raise failed(f"cannot keep the acknowledged positions: {exc}",
                         subscription_id=params.subscription_id) from None
        return AckResult(ok=True)

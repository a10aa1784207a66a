"""`index.*`, `monitor.snapshot`, `inbox.snapshot`, `ui.snapshot`: the AgentCompany index
(ralph.company.index) and the snapshots read from it (ralph.company.snapshots)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StrictBool, StrictInt

from ralph.company import index, snapshots
from ralph.controlplane.params import RunStatus, Str1, WorkspaceParams
from ralph.controlplane.plane import FAILED, Plane
from ralph.rpc import Registry

Limit = Annotated[StrictInt, Field(gt=0, le=5000)]
Rows = list[dict[str, Any]]


class ListRunsParams(WorkspaceParams):
    project_id: Str1 | None = None
    status: RunStatus | None = None
    limit: Limit = 200


class ListEventsParams(WorkspaceParams):
    project_id: Str1 | None = None
    run_id: Str1 | None = None
    type: Str1 | None = None
    since_seq: Annotated[StrictInt, Field(ge=0)] | None = None
    limit: Limit = 500
    order: Literal["asc", "desc"] = "desc"


class ListParseErrorsParams(WorkspaceParams):
    project_id: Str1 | None = None
    run_id: Str1 | None = None
    limit: Limit = 200


class ListReviewsParams(WorkspaceParams):
    project_id: Str1 | None = None
    decision: Literal["approved", "denied"] | None = None
    limit: Limit = 200


class ListHelpRequestsParams(WorkspaceParams):
    target_manager: Str1 | None = None
    project_id: Str1 | None = None
    limit: Limit = 200


class Refresh(WorkspaceParams):
    project_id: Str1 | None = None
    refresh_index: StrictBool | None = None
    sync_index: StrictBool | None = None


class MonitorParams(Refresh):
    limit: Limit | None = None


class InboxParams(Refresh):
    pending_limit: Limit | None = None
    decisions_limit: Limit | None = None


class UiParams(InboxParams):
    monitor_limit: Limit | None = None


def register(registry: Registry, plane: Plane) -> None:
    @registry.method("index.rebuild", params=WorkspaceParams, result=dict[str, Any],
                     errors=[FAILED], summary="Index the workspace anew: {db_path, "
                     "runs_indexed, events_indexed, event_parse_errors, artifacts_indexed, "
                     "reviews_indexed, help_requests_indexed}.")
    async def index_rebuild(params: WorkspaceParams) -> dict[str, Any]:
        return await plane.call(params.workspace_dir, index.rebuild_index)

    @registry.method("index.sync", params=WorkspaceParams, result=dict[str, Any],
                     errors=[FAILED], summary="Bring the index up to date (made if missing): "
                     "{db_path, db_created, *_upserted, *_deleted, events_indexed, …}.")
    async def index_sync(params: WorkspaceParams) -> dict[str, Any]:
        return await plane.call(params.workspace_dir, index.sync_index)

    @registry.method("index.stats", params=WorkspaceParams, result=dict[str, int],
                     errors=[FAILED], summary="Rows per table: {runs, events, "
                     "event_parse_errors, artifacts, reviews, help_requests}.")
    async def index_stats(params: WorkspaceParams) -> dict[str, int]:
        return await plane.call(params.workspace_dir, index.index_stats)

    @registry.method("index.list_runs", params=ListRunsParams, result=Rows, errors=[FAILED],
                     summary="Indexed runs, newest first.")
    async def list_runs(params: ListRunsParams) -> Rows:
        return await plane.call(params.workspace_dir, index.list_runs, params.project_id,
                                params.status, params.limit)

    @registry.method("index.list_events", params=ListEventsParams, result=Rows,
                     errors=[FAILED], summary="Indexed events (payload_json and raw_json as "
                     "JSON text), by wallclock time then seq.")
    async def list_events(params: ListEventsParams) -> Rows:
        return await plane.call(params.workspace_dir, index.list_events, params.project_id,
                                params.run_id, params.type, params.since_seq, params.limit,
                                params.order)

    @registry.method("index.list_event_parse_errors", params=ListParseErrorsParams,
                     result=Rows, errors=[FAILED],
                     summary="Lines of events files that are not JSON, with their seq.")
    async def list_parse_errors(params: ListParseErrorsParams) -> Rows:
        return await plane.call(params.workspace_dir, index.list_event_parse_errors,
                                params.project_id, params.run_id, params.limit)

    @registry.method("index.list_reviews", params=ListReviewsParams, result=Rows,
                     errors=[FAILED], summary="Indexed reviews, newest first.")
    async def list_reviews(params: ListReviewsParams) -> Rows:
        return await plane.call(params.workspace_dir, index.list_reviews, params.project_id,
                                params.decision, params.limit)

    @registry.method("index.list_help_requests", params=ListHelpRequestsParams, result=Rows,
                     errors=[FAILED], summary="Indexed help requests, newest first.")
    async def list_help_requests(params: ListHelpRequestsParams) -> Rows:
        return await plane.call(params.workspace_dir, index.list_help_requests,
                                params.target_manager, params.project_id, params.limit)

    @registry.method("monitor.snapshot", params=MonitorParams, result=dict[str, Any],
                     errors=[FAILED], summary="Runs with their live session, last event and "
                     "parse-error count (running first, then newest).")
    async def monitor_snapshot(params: MonitorParams) -> dict[str, Any]:
        sessions = await plane.off_loop(plane.session_rows, params.workspace_dir,
                                        context={"workspace_dir": params.workspace_dir})
        return await plane.call(
            params.workspace_dir, snapshots.monitor_snapshot, sessions,
            project_id=params.project_id, limit=params.limit,
            refresh_index=params.refresh_index, sync_index=params.sync_index)

    @registry.method("inbox.snapshot", params=InboxParams, result=dict[str, Any],
                     errors=[FAILED], summary="Artifacts waiting for a review and recent "
                     "decisions.")
    async def inbox_snapshot(params: InboxParams) -> dict[str, Any]:
        return await plane.call(
            params.workspace_dir, snapshots.inbox_snapshot, project_id=params.project_id,
            pending_limit=params.pending_limit, decisions_limit=params.decisions_limit,
            refresh_index=params.refresh_index, sync_index=params.sync_index)

    @registry.method("ui.snapshot", params=UiParams, result=dict[str, Any], errors=[FAILED],
                     summary="monitor.snapshot and inbox.snapshot at once (one refresh).")
    async def ui_snapshot(params: UiParams) -> dict[str, Any]:
        sessions = await plane.off_loop(plane.session_rows, params.workspace_dir,
                                        context={"workspace_dir": params.workspace_dir})
        return await plane.call(
            params.workspace_dir, snapshots.ui_snapshot, sessions,
            project_id=params.project_id, monitor_limit=params.monitor_limit,
            pending_limit=params.pending_limit, decisions_limit=params.decisions_limit,
            refresh_index=params.refresh_index, sync_index=params.sync_index)

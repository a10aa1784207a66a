"""A run by its id, as the faces show it (the bridge's `remoteRun`, `ralph serve`'s
`GET /api/remote-runs/{run_id}`): its status and a page of its events.

The events are the frames of the run's stream in the store (`runs/<run_id>`), the store every
worker of a run on Temporal writes to (PostgreSQL, usually). The status is the run's
workflow's answer to its `status` query when a Temporal server is named; without one (or
when it cannot answer) it is read from the run's own frames (`run.started`, `run.paused`,
`run.resumed`, `iteration.*`, `run.stopped`), so a face without Temporal access still shows
the run, a local run's too. Both faces call `remote_run`, and find where to ask the same way
(`RemoteSource.from_env`: $RALPH_TEMPORAL, $RALPH_TEMPORAL_NAMESPACE, and $RALPH_STORE when
it is a postgresql:// URL, else the project's own store).

Nothing here imports temporalio until a Temporal server is asked.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any, Literal

from ralph.errors import RalphError
from ralph.project import STORE_ENV
from ralph.scale.client import TemporalError
from ralph.scale.model import DEFAULT_NAMESPACE, NAMESPACE_ENV, TEMPORAL_ENV, RunStatus
from ralph.store.location import is_database_url

if TYPE_CHECKING:
    from temporalio.client import Client

    from ralph.store import Frame, Store

DEFAULT_LIMIT = 200
MAX_LIMIT = 1000
TEMPORAL_TIMEOUT_S = 5.0
"""How long Temporal gets to describe the run, and then to answer its `status` query (a
query waits for a worker: with none polling, it would wait for one indefinitely)."""
RUN_ID_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}$"
"""A run id: one part of a store stream's name (`runs/<run_id>`), at most 200 characters."""
_RUN_ID = re.compile(RUN_ID_PATTERN)
_STATUS_TOPICS = ("run.*", "iteration.*")

Projection = Callable[["Frame"], dict[str, Any] | None]
"""A frame of the run's stream as one event of the view (None: the frame gives none)."""
StatusSource = Literal["temporal", "store"]


class RunNotFound(RalphError):
    """Neither the store nor Temporal knows the run."""

    def __init__(self, run_id: str, message: str) -> None:
        super().__init__(message)
        self.run_id = run_id


class BadRunQuery(RalphError, ValueError):
    """A run id, `events_after` or `limit` that cannot be asked for."""


def check_query(run_id: str, events_after: int, limit: int) -> None:
    if not _RUN_ID.fullmatch(run_id):
        raise BadRunQuery(f"invalid run id {run_id!r}: letters, digits, '_', '.' and '-', "
                          "starting with a letter, digit or '_', at most 200 characters")
    if events_after < 0:
        raise BadRunQuery(f"events_after must be 0 or more, not {events_after}")
    if not 1 <= limit <= MAX_LIMIT:
        raise BadRunQuery(f"limit must be from 1 to {MAX_LIMIT}, not {limit}")


def frame_json(frame: Frame) -> dict[str, Any]:
    """The default projection: the frame itself, as the store writes it (`ralph log
    --json`): {id, seq, ts, topic, stream, meta, hash}."""
    return frame.to_dict()


async def remote_run(run_id: str, *, temporal: str | None, namespace: str,
                     store: Store | str, events_after: int = 0, limit: int = DEFAULT_LIMIT,
                     project: Projection | None = None) -> dict[str, Any]:
    """The run `run_id` as a face shows it, JSON-ready:

    `{"runId", "status", "statusSource", "temporalError", "events", "lastSeq", "more"}`:
    `status` a RunStatus with camelCase keys (`runId`, `maxIterations`, `stopRequested`,
    ...), from Temporal (`statusSource` "temporal") or, without `temporal`, when Temporal
    cannot say, or once the run has ended (its workflow closed and its `run.stopped`
    recorded), from the run's frames ("store"; `temporalError` then says why Temporal did
    not answer, else it is null); `events` the frames of `runs/<run_id>` after seq
    `events_after`, at most `limit` of them read, each as `project` gives it (a frame that
    gives None is left out; default: the frame itself); `lastSeq` the seq of the last frame
    read (the next page's `events_after`; `events_after` when none was), `more` whether
    frames after it were there already.

    `store` is an open store, or a location opened (and closed) for this call. RunNotFound
    when the store has no frame of the run and Temporal does not know it (or none was
    named); BadRunQuery for a run id, `events_after` or `limit` out of bounds; TemporalError
    when the store has no frame of the run and Temporal cannot be asked."""
    check_query(run_id, events_after, limit)
    if isinstance(store, str):
        from ralph.store import Store  # noqa: PLC0415 - loaded on first use

        opened = await asyncio.to_thread(Store, store, create=False)
        try:
            found = await asyncio.to_thread(_read, opened, run_id, events_after, limit)
        finally:
            await asyncio.to_thread(opened.close)
    else:
        found = await asyncio.to_thread(_read, store, run_id, events_after, limit)
    page, status_frames, known = found

    status: RunStatus | None = None
    problem: str | None = None
    if temporal is not None:
        ended = any(frame.topic == "run.stopped" for frame in status_frames)
        try:
            answer = await temporal_status(temporal, namespace, run_id, ended=ended)
        except TemporalError as exc:
            if not known:
                raise
            problem = str(exc)
        else:
            if isinstance(answer, RunStatus):
                status = answer
            elif answer == "unknown" and known:
                problem = f"Temporal at {temporal} does not know run {run_id}"
    if status is None and not known:
        where = (f"and Temporal at {temporal} (namespace {namespace}) does not know it"
                 if temporal is not None else "and no Temporal server was named")
        raise RunNotFound(run_id, f"unknown run {run_id}: the store has no events of it "
                                  f"{where}")
    source: StatusSource = "temporal"
    if status is None:
        status, source = status_from_frames(run_id, status_frames), "store"

    shown = project or frame_json
    more = len(page) > limit
    page = page[:limit]
    events = [event for event in map(shown, page) if event is not None]
    return {"runId": run_id, "status": status_json(status), "statusSource": source,
            "temporalError": problem, "events": events,
            "lastSeq": page[-1].seq if page else events_after, "more": more}


def _read(store: Store, run_id: str, after: int, limit: int
          ) -> tuple[list[Frame], list[Frame], bool]:
    """A page of the run's stream (one frame more than `limit`, to tell whether there are
    more), its run.* and iteration.* frames in seq order, and whether it has any frame."""
    stream = f"runs/{run_id}"
    page = list(store.read(stream=stream, after_seq=after, limit=limit + 1))
    marks = sorted((frame for topic in _STATUS_TOPICS
                    for frame in store.read(topic=topic, stream=stream)),
                   key=lambda frame: frame.seq)
    known = bool(page or marks) or any(True for _ in store.read(stream=stream, limit=1))
    return page, marks, known


# -- the status ----------------------------------------------------------------------------

def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


STATUS_KEYS: dict[str, str] = {field.name: _camel(field.name) for field in fields(RunStatus)}
"""RunStatus's fields and their names in a view (camelCase, as the bridge's own names)."""


def status_json(status: RunStatus) -> dict[str, Any]:
    return {STATUS_KEYS[name]: value for name, value in asdict(status).items()}


def status_from_frames(run_id: str, frames: Iterable[Frame]) -> RunStatus:
    """The status the run's frames tell (in seq order): `starting` until its `run.started`,
    then `running` (`paused` between a `run.paused` and the next `run.resumed`), `ended` at
    its `run.stopped` (with its reason, message and the tasks done of the total). Anyone may
    append to a run's stream: a field that is not what it should be is ignored."""
    status = RunStatus(run_id=run_id, phase="starting", iteration=0, max_iterations=0,
                       done=0, total=0, paused=False, stop_requested=False)
    for frame in frames:
        meta = frame.meta
        topic = frame.topic
        ended = status.phase == "ended"
        if topic == "run.started":
            status.max_iterations = _int(meta.get("maxIterations"), status.max_iterations)
            status.branch = _text(meta.get("branch")) or status.branch
            if not ended:
                status.phase = "paused" if status.paused else "running"
        elif topic == "run.paused" and not ended:
            status.paused, status.phase = True, "paused"
        elif topic == "run.resumed" and not ended:
            status.paused, status.phase = False, "running"
        elif topic in ("iteration.started", "iteration.finished"):
            status.iteration = max(status.iteration, _int(meta.get("iteration"), 0))
            if topic == "iteration.finished":
                status.last_status = _text(meta.get("status"))
                status.last_task = _text(meta.get("task_id"))
        elif topic == "run.stopped":
            status.phase, status.paused = "ended", False
            status.reason = _text(meta.get("reason"))
            status.message = _text(meta.get("message"))
            status.done = _int(meta.get("done"), status.done)
            status.total = _int(meta.get("total"), status.total)
    return status


def _int(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


# -- Temporal ------------------------------------------------------------------------------

_clients: dict[tuple[str, str], tuple[asyncio.AbstractEventLoop, Client]] = {}
"""A client per server and namespace, made once per event loop (a face asks often)."""


async def _client(address: str, namespace: str) -> Client:
    from ralph.scale.client import connect  # noqa: PLC0415 - temporalio, on first use

    loop = asyncio.get_running_loop()
    made = _clients.get((address, namespace))
    if made is not None and made[0] is loop:
        return made[1]
    client = await connect(address, namespace)  # TemporalError without the scale extra
    _clients[(address, namespace)] = (loop, client)
    return client


async def temporal_status(address: str, namespace: str, run_id: str, *,
                          ended: bool = False) -> RunStatus | Literal["unknown", "closed"]:
    """The run's workflow's answer to its `status` query; "unknown" if Temporal does not
    know the run; "closed" if its workflow has closed and `ended` (the store holds the run's
    `run.stopped`, as final as the workflow's answer, which would need a worker to replay
    its history). TemporalError if Temporal cannot be reached, or does not answer within
    TEMPORAL_TIMEOUT_S (a query needs a worker)."""
    client = await _client(address, namespace)
    from temporalio.client import WorkflowExecutionStatus  # noqa: PLC0415
    from temporalio.service import RPCError, RPCStatusCode  # noqa: PLC0415

    from ralph.scale import client as runs  # noqa: PLC0415

    try:
        described = await asyncio.wait_for(runs.handle(client, run_id).describe(),
                                           TEMPORAL_TIMEOUT_S)
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return "unknown"
        raise TemporalError(f"Temporal at {address} cannot describe run {run_id}: "
                            f"{exc.message}") from None
    except TimeoutError:
        raise TemporalError(f"Temporal at {address} did not answer within "
                            f"{TEMPORAL_TIMEOUT_S:g} s") from None
    if ended and described.status != WorkflowExecutionStatus.RUNNING:
        return "closed"
    try:
        return await asyncio.wait_for(runs.status(client, run_id), TEMPORAL_TIMEOUT_S)
    except TimeoutError:
        raise TemporalError(f"run {run_id}'s workflow did not answer its status query within "
                            f"{TEMPORAL_TIMEOUT_S:g} s (is a worker polling its queue?)") \
            from None


# -- where a face asks ---------------------------------------------------------------------

@dataclass(frozen=True)
class RemoteSource:
    """Where a face finds runs: the Temporal server (None: the store alone says), its
    namespace, and the shared store's URL (None: the face's own project store)."""

    temporal: str | None = None
    namespace: str = DEFAULT_NAMESPACE
    store: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RemoteSource:
        """$RALPH_TEMPORAL, $RALPH_TEMPORAL_NAMESPACE, and $RALPH_STORE when it is a
        postgresql:// URL (a directory there is not the shared store of remote runs; the
        face's project store is used then)."""
        env = os.environ if environ is None else environ
        shared = env.get(STORE_ENV) or None
        return cls(temporal=env.get(TEMPORAL_ENV) or None,
                   namespace=env.get(NAMESPACE_ENV) or DEFAULT_NAMESPACE,
                   store=shared if shared is not None and is_database_url(shared) else None)


class RemoteRuns:
    """A face's access to runs by id: its RemoteSource, and the shared store opened once
    (on first use) and closed with `close`; without a shared store, `local_store()` (the
    face's own, which it closes itself)."""

    def __init__(self, source: RemoteSource, local_store: Callable[[], Store]) -> None:
        self.source = source
        self._local_store = local_store
        self._shared: Store | None = None
        self._opening = asyncio.Lock()

    @classmethod
    def from_env(cls, local_store: Callable[[], Store],
                 environ: Mapping[str, str] | None = None) -> RemoteRuns:
        return cls(RemoteSource.from_env(environ), local_store)

    async def view(self, run_id: str, *, events_after: int = 0, limit: int = DEFAULT_LIMIT,
                   project: Projection | None = None) -> dict[str, Any]:
        """`remote_run` with this face's Temporal server and store."""
        check_query(run_id, events_after, limit)
        return await remote_run(run_id, temporal=self.source.temporal,
                                namespace=self.source.namespace, store=await self._store(),
                                events_after=events_after, limit=limit, project=project)

    async def _store(self) -> Store:
        url = self.source.store
        if url is None:
            return self._local_store()
        async with self._opening:
            if self._shared is None:
                from ralph.store import Store  # noqa: PLC0415 - loaded on first use

                self._shared = await asyncio.to_thread(Store, url, create=False)
            return self._shared

    def close(self) -> None:
        if self._shared is not None:
            self._shared.close()
            self._shared = None

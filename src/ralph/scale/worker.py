"""`ralph worker`: a process that runs RalphRun workflows and their iterations.

Each worker has its own work directories (one clone per run under `--workdir`) and opens the
shared store; agents run there as they run locally (the project's ralph.toml, this machine's
programs). `--concurrency` bounds the iterations it runs at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from ralph.scale.model import DEFAULT_NAMESPACE, DEFAULT_QUEUE
from ralph.store import Store

log = logging.getLogger("ralph.scale")


@dataclass(frozen=True)
class WorkerOptions:
    address: str
    store: str
    workdir: Path
    namespace: str = DEFAULT_NAMESPACE
    queue: str = DEFAULT_QUEUE
    concurrency: int = 2
    name: str | None = None
    heartbeat_seconds: float = 1.0
    # How long Temporal keeps a dead worker's workflow tasks on its sticky queue before
    # another worker may take them (the SDK's default, 10 s, would hold a run that long
    # after its worker died; a RalphRun's history is small and cheap to replay elsewhere).
    sticky_timeout_seconds: float = 1.0


async def run_worker(options: WorkerOptions, stop: asyncio.Event,
                     ready: Callable[[str], None] | None = None) -> None:
    """Run until `stop` is set; a worker stopped mid-iteration lets Temporal retry it
    elsewhere (the iteration's activity is cancelled with the worker)."""
    from temporalio.worker import Worker  # noqa: PLC0415 - the scale extra

    from ralph.scale.activities import RunActivities  # noqa: PLC0415
    from ralph.scale.client import connect  # noqa: PLC0415
    from ralph.scale.workflow import RalphRun  # noqa: PLC0415

    client = await connect(options.address, options.namespace)
    options.workdir.mkdir(parents=True, exist_ok=True)
    with Store(options.store) as store:
        acts = RunActivities(store, options.workdir.resolve(), name=options.name,
                             heartbeat_seconds=options.heartbeat_seconds)
        worker = Worker(
            client, task_queue=options.queue, workflows=[RalphRun], activities=acts.all(),
            max_concurrent_activities=options.concurrency,
            max_heartbeat_throttle_interval=timedelta(seconds=options.heartbeat_seconds),
            default_heartbeat_throttle_interval=timedelta(seconds=options.heartbeat_seconds),
            sticky_queue_schedule_to_start_timeout=timedelta(
                seconds=options.sticky_timeout_seconds),
            graceful_shutdown_timeout=timedelta(seconds=5))
        async with worker:
            if ready is not None:
                ready(acts.name)
            await stop.wait()
        with contextlib.suppress(Exception):
            await asyncio.sleep(0)

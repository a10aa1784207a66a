"""The workflow and activity the harness tests run, importable by the test and by the worker
child. Workflows run in temporalio's sandbox, which re-imports this module: it imports only
the standard library and temporalio, and the activity's file access runs outside it."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from temporalio import activity, workflow
from temporalio.common import RetryPolicy

HEARTBEAT_TIMEOUT = timedelta(seconds=2)
HEARTBEAT_THROTTLE = timedelta(milliseconds=500)
"""Workers' `max_heartbeat_throttle_interval`: the SDK otherwise sends heartbeats only every
80% of the heartbeat timeout (1.6 s of 2 s), too close to it on a loaded machine."""
ACTIVITY_LIMIT_S = 60.0
"""Longest an activity waits (for its gate, or to be killed) before failing the attempt."""


@dataclass
class Job:
    """What `work` does: `marker` is a path prefix; each attempt writes `<marker>.<attempt>`
    (holding its pid) when it starts; it then heartbeats until the `gate` file exists, or, if
    `hang_first`, on attempt 1 until it is killed; otherwise it returns after a few beats."""

    name: str
    marker: str = ""
    gate: str = ""
    hang_first: bool = False


@activity.defn
async def work(job: Job) -> str:
    info = activity.info()
    if job.marker:
        # Written whole, then renamed: a reader that sees the file sees the pid.
        tmp = Path(f"{job.marker}.{info.attempt}.tmp")
        tmp.write_text(str(os.getpid()), encoding="ascii")
        tmp.replace(f"{job.marker}.{info.attempt}")
    beats = 0
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ACTIVITY_LIMIT_S
    while True:
        activity.heartbeat(beats)
        beats += 1
        if job.gate:
            done = Path(job.gate).exists()
        elif job.hang_first and info.attempt == 1:
            done = False
        else:
            done = beats >= 3
        if done:
            return f"{job.name} done on attempt {info.attempt} after {beats} heartbeats"
        if loop.time() > deadline:
            raise RuntimeError(f"{job.name}: nothing happened in {ACTIVITY_LIMIT_S}s")
        await asyncio.sleep(0.1)


@workflow.defn
class HarnessWorkflow:
    """One heartbeating activity, retried when its worker stops heartbeating."""

    @workflow.run
    async def run(self, job: Job) -> str:
        return await workflow.execute_activity(
            work, job, start_to_close_timeout=timedelta(seconds=ACTIVITY_LIMIT_S + 30),
            heartbeat_timeout=HEARTBEAT_TIMEOUT,
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200),
                                     backoff_coefficient=1.0, maximum_attempts=3))

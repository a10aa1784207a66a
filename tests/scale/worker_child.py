"""A Temporal worker in a process of its own, for the tests that SIGKILL it mid-activity.

Usage: python -m tests.scale.worker_child ADDRESS TASK_QUEUE [STICKY_TIMEOUT_S] (from the
project root). Runs `HarnessWorkflow` and `work` until it is killed, or until SIGTERM/SIGINT.

STICKY_TIMEOUT_S (default 10, the SDK's) bounds how long the server keeps sending this
worker's workflow tasks to its sticky queue once it stops polling it: after a SIGKILL the
workflow's next task waits that long before another worker can take it."""

from __future__ import annotations

import asyncio
import signal
import sys
from datetime import timedelta

from temporalio.client import Client
from temporalio.worker import Worker

from tests.scale.flows import HEARTBEAT_THROTTLE, HarnessWorkflow, work


async def serve(address: str, task_queue: str, sticky_timeout_s: float) -> None:
    client = await Client.connect(address)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with Worker(client, task_queue=task_queue, workflows=[HarnessWorkflow],
                      activities=[work], max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
                      sticky_queue_schedule_to_start_timeout=timedelta(seconds=sticky_timeout_s)):
        print("ready", flush=True)
        await stop.wait()


if __name__ == "__main__":
    sticky = float(sys.argv[3]) if len(sys.argv) > 3 else 10.0
    asyncio.run(serve(sys.argv[1], sys.argv[2], sticky))

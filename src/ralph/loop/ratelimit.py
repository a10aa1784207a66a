"""Waiting out rate limits: the hourly cap on agent starts, and backoff after a 429."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime

from ralph.loop.events import EventSink
from ralph.loop.state import LoopState

HOUR_S = 3600.0
sleep = asyncio.sleep  # the hourly cap's wait (tests replace it to observe the wait)
BACKOFF_BASE_S = 30.0


async def wait_for_start_slot(state: LoopState, per_hour: int, emit: EventSink) -> None:
    """With `rate_limit_per_hour` set, wait until fewer than that many agents started in the
    last hour, then record this start."""
    now = time.time()
    state.agent_starts = [t for t in state.agent_starts if now - t < HOUR_S]
    if per_hour > 0 and len(state.agent_starts) >= per_hour:
        wait = state.agent_starts[-per_hour] + HOUR_S - now
        if wait > 0:
            emit("agent.rate_limited", {"reason": "rate_limit_per_hour", "wait_seconds": wait,
                                        "limit": per_hour})
            await sleep(wait)
    state.agent_starts.append(time.time())
    if per_hour > 0:
        state.agent_starts = state.agent_starts[-per_hour:]
    else:
        state.agent_starts = []


def backoff_seconds(attempt: int, *, retry_after_s: float | None, reset_at: str | None,
                    cap_s: float) -> float:
    """How long to wait before retrying a rate-limited agent: the CLI's own reset time when it
    gave one, else exponential backoff from 30 s; never more than `cap_s`."""
    if retry_after_s is not None:
        wait = retry_after_s
    elif reset_at is not None:
        try:
            wait = datetime.fromisoformat(reset_at).timestamp() - time.time()
        except ValueError:
            wait = BACKOFF_BASE_S * 2 ** min(attempt, 30)
    else:
        wait = BACKOFF_BASE_S * 2 ** min(attempt, 30)  # capped exponent: no overflow
    return max(0.0, min(wait, cap_s))

"""Per connection limits of the remote API: what one client may send, and how much may wait
to be sent to it."""

from __future__ import annotations

import time
from collections import deque

MAX_MESSAGE_BYTES = 16 * 1024 * 1024  # one WebSocket message, either way
MESSAGES_PER_MINUTE = 600
SEND_QUEUE = 1024  # messages waiting for a client; a client that lets it fill is dropped
SEND_QUEUE_CHARS = 8 * 1024 * 1024  # ... or lets this much text of events wait
ANSWER_QUEUE_CHARS = 32 * 1024 * 1024  # answers waiting to be sent: the next one waits
MAX_BATCH = 50  # requests in one batch


class RateLimit:
    """At most `limit` messages in any `window_s` (a sliding window)."""

    def __init__(self, limit: int = MESSAGES_PER_MINUTE, window_s: float = 60.0) -> None:
        self.limit = limit
        self.window_s = window_s
        self._times: deque[float] = deque()

    def allow(self, now: float | None = None, count: int = 1) -> float | None:
        """None if `count` more messages are allowed now (and count them), else the seconds
        until one is (a batch counts for its elements; one larger than the limit never
        passes: retry_after then says when the window is empty)."""
        now = time.monotonic() if now is None else now
        while self._times and self._times[0] <= now - self.window_s:
            self._times.popleft()
        if len(self._times) + count > self.limit:
            return round(self._times[0] + self.window_s - now, 3) if self._times else \
                self.window_s
        self._times.extend([now] * count)
        return None

"""Rate limits: how long to back off (ralph.loop.ratelimit.backoff_seconds), the hourly cap on
agent starts (wait_for_start_slot), and how a plain-text agent run is classified
(ralph.agents.base.classify_text)."""

from __future__ import annotations

import types
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, cast

import pytest

from ralph.agents.base import classify_text
from ralph.loop import ratelimit
from ralph.loop.events import EventSink
from ralph.loop.ratelimit import BACKOFF_BASE_S, HOUR_S, backoff_seconds, wait_for_start_slot
from ralph.loop.state import LoopState

NOW = 1_700_000_000.0


@pytest.fixture
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """ralph.loop.ratelimit sees a clock standing at NOW (a list, so tests can move it)."""
    clock = [NOW]
    monkeypatch.setattr(ratelimit, "time", types.SimpleNamespace(time=lambda: clock[0]))
    return clock


def iso(seconds_from_now: float) -> str:
    return datetime.fromtimestamp(NOW + seconds_from_now, tz=UTC).isoformat()


# -- backoff_seconds -------------------------------------------------------------------------------


def test_retry_after_is_used_as_given() -> None:
    assert backoff_seconds(0, retry_after_s=7.5, reset_at=None, cap_s=3600) == 7.5
    assert backoff_seconds(5, retry_after_s=2, reset_at=None, cap_s=3600) == 2


def test_retry_after_wins_over_reset_at(frozen_clock: list[float]) -> None:
    assert backoff_seconds(0, retry_after_s=3, reset_at=iso(600), cap_s=3600) == 3


def test_retry_after_is_capped() -> None:
    assert backoff_seconds(0, retry_after_s=10_000, reset_at=None, cap_s=120) == 120


def test_zero_retry_after_means_no_wait() -> None:
    assert backoff_seconds(3, retry_after_s=0, reset_at=None, cap_s=3600) == 0


def test_reset_at_in_the_future_waits_until_then(frozen_clock: list[float]) -> None:
    assert backoff_seconds(0, retry_after_s=None, reset_at=iso(90), cap_s=3600) == \
        pytest.approx(90)


@pytest.mark.parametrize("text", [
    datetime.fromtimestamp(NOW + 45, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    datetime.fromtimestamp(NOW + 45, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.000+00:00"),
    datetime.fromtimestamp(NOW + 45, tz=UTC).astimezone(timezone(timedelta(hours=2))).isoformat(),
])
def test_reset_at_in_any_iso_form(frozen_clock: list[float], text: str) -> None:
    assert backoff_seconds(0, retry_after_s=None, reset_at=text, cap_s=3600) == \
        pytest.approx(45)


def test_reset_at_far_away_is_capped(frozen_clock: list[float]) -> None:
    assert backoff_seconds(0, retry_after_s=None, reset_at=iso(86_400), cap_s=600) == 600


def test_reset_at_in_the_past_means_no_wait(frozen_clock: list[float]) -> None:
    assert backoff_seconds(0, retry_after_s=None, reset_at=iso(-30), cap_s=3600) == 0
    assert backoff_seconds(4, retry_after_s=None, reset_at=iso(-86_400), cap_s=3600) == 0


@pytest.mark.parametrize("garbage", ["", "soon", "in 5 minutes", "2024-13-45T99:99:99Z",
                                     "tomorrow at noon"])
def test_garbage_reset_at_falls_back_to_exponential_backoff(frozen_clock: list[float],
                                                            garbage: str) -> None:
    assert backoff_seconds(0, retry_after_s=None, reset_at=garbage, cap_s=3600) == \
        BACKOFF_BASE_S
    assert backoff_seconds(2, retry_after_s=None, reset_at=garbage, cap_s=3600) == \
        BACKOFF_BASE_S * 4


def test_exponential_backoff_doubles_from_the_base() -> None:
    waits = [backoff_seconds(n, retry_after_s=None, reset_at=None, cap_s=10**9)
             for n in range(6)]
    assert waits == [BACKOFF_BASE_S * 2 ** n for n in range(6)]
    assert waits[0] == 30


def test_exponential_backoff_is_capped() -> None:
    waits = [backoff_seconds(n, retry_after_s=None, reset_at=None, cap_s=100)
             for n in range(10)]
    assert waits[:2] == [30, 60]
    assert all(w == 100 for w in waits[2:])


def test_exponential_backoff_never_overflows() -> None:
    # An agent that stays rate-limited under a small cap (rate_limit_max_wait_seconds = 1)
    # reaches a thousand retries in under twenty minutes; the wait must stay the cap.
    assert backoff_seconds(1100, retry_after_s=None, reset_at=None, cap_s=1) == 1


def test_zero_cap_never_waits(frozen_clock: list[float]) -> None:
    assert backoff_seconds(3, retry_after_s=None, reset_at=None, cap_s=0) == 0
    assert backoff_seconds(0, retry_after_s=50, reset_at=None, cap_s=0) == 0
    assert backoff_seconds(0, retry_after_s=None, reset_at=iso(50), cap_s=0) == 0


# -- wait_for_start_slot ---------------------------------------------------------------------------


class RecordingSink:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, topic: str, meta: dict[str, Any],
                 content: bytes | str | None = None) -> None:
        self.events.append((topic, meta))


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch, frozen_clock: list[float]) -> list[float]:
    """asyncio.sleep as ralph.loop.ratelimit sees it: records the wait and moves the clock."""
    recorded: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        recorded.append(seconds)
        frozen_clock[0] += seconds

    # the module's own sleep (`ratelimit.sleep`), and asyncio.sleep as the module sees it
    monkeypatch.setattr(ratelimit, "sleep", fake_sleep, raising=False)
    monkeypatch.setattr(ratelimit, "asyncio", types.SimpleNamespace(sleep=fake_sleep),
                        raising=False)
    return recorded


async def test_a_full_hour_waits_for_the_oldest_start_to_age_out(sleeps: list[float],
                                                                  frozen_clock: list[float]
                                                                  ) -> None:
    state = LoopState(agent_starts=[NOW - 3000, NOW - 2000, NOW - 1000])
    sink = RecordingSink()
    await wait_for_start_slot(state, 3, cast(EventSink, sink))
    assert sleeps == [pytest.approx(600)]  # NOW - 3000 + 3600 - NOW
    assert [topic for topic, _ in sink.events] == ["agent.rate_limited"]
    meta = sink.events[0][1]
    assert meta["reason"] == "rate_limit_per_hour" and meta["limit"] == 3
    assert meta["wait_seconds"] == pytest.approx(600)
    # this start is recorded at the time it happens; the list keeps only the cap's worth
    assert state.agent_starts == [NOW - 2000, NOW - 1000, pytest.approx(NOW + 600)]


async def test_the_wait_counts_from_the_start_that_ages_out_first(sleeps: list[float]) -> None:
    state = LoopState(agent_starts=[NOW - 3500, NOW - 3400, NOW - 100, NOW - 50])
    await wait_for_start_slot(state, 2, cast(EventSink, RecordingSink()))
    # two starts in the last hour would be allowed; the older of the last two ages out first
    assert sleeps == [pytest.approx(3500)]


async def test_room_left_in_the_hour_means_no_wait(sleeps: list[float]) -> None:
    state = LoopState(agent_starts=[NOW - 1000, NOW - 10])
    sink = RecordingSink()
    await wait_for_start_slot(state, 3, cast(EventSink, sink))
    assert sleeps == []
    assert sink.events == []
    assert state.agent_starts == [NOW - 1000, NOW - 10, NOW]


async def test_starts_older_than_an_hour_do_not_count(sleeps: list[float]) -> None:
    state = LoopState(agent_starts=[NOW - HOUR_S - 5, NOW - HOUR_S - 1, NOW - HOUR_S])
    await wait_for_start_slot(state, 1, cast(EventSink, RecordingSink()))
    assert sleeps == []
    assert state.agent_starts == [NOW]


async def test_no_cap_keeps_the_list_empty(sleeps: list[float]) -> None:
    state = LoopState(agent_starts=[NOW - 3, NOW - 2, NOW - 1])
    sink = RecordingSink()
    for _ in range(5):
        await wait_for_start_slot(state, 0, cast(EventSink, sink))
        assert state.agent_starts == []
    assert sleeps == []
    assert sink.events == []


async def test_the_list_stays_bounded_by_the_cap(sleeps: list[float],
                                                 frozen_clock: list[float]) -> None:
    state = LoopState()
    starts: list[float] = []
    for _ in range(50):
        await wait_for_start_slot(state, 4, cast(EventSink, RecordingSink()))
        starts.append(state.agent_starts[-1])
        assert len(state.agent_starts) <= 4
        frozen_clock[0] += 60
    # 50 starts wanted a minute apart under a cap of 4 an hour: never 5 within an hour
    assert sleeps
    for index in range(4, len(starts)):
        assert starts[index] - starts[index - 4] >= HOUR_S - 1e-6


# -- classify_text ---------------------------------------------------------------------------------


def test_exit_zero_is_ok_whatever_the_output() -> None:
    result = classify_text(0, "Error: 429 Too Many Requests\n401 Unauthorized")
    assert result.status == "ok"


@pytest.mark.parametrize("tail", [
    "Error: 429 Too Many Requests",
    "HTTP 429",
    "rate limit reached for this model",
    "Rate-limit exceeded",
    "rate_limit_error: slow down",
    "You have hit your usage limit. Try again later.",
    "quota exceeded for requests per minute",
    "too many requests",
])
def test_rate_limit_signs(tail: str) -> None:
    result = classify_text(1, f"starting\n{tail}\n")
    assert result.status == "rate_limited"
    assert result.retry_after_s is None
    assert result.message == tail


@pytest.mark.parametrize(("tail", "seconds"), [
    ("Error: 429 Too Many Requests\nRetry-After: 17", 17.0),
    ("429: rate limit reached; retry after 2.5 seconds", 2.5),
    ("rate limited (retry-after=30s)", 30.0),
    ("Too Many Requests. retry after 12 sec", 12.0),
])
def test_retry_after_is_read(tail: str, seconds: float) -> None:
    result = classify_text(1, tail)
    assert result.status == "rate_limited"
    assert result.retry_after_s == seconds


@pytest.mark.parametrize("tail", [
    "HTTP 401",
    "Error: 401 Unauthorized",
    "unauthorised: check your token",
    "Invalid API key provided",
    "You are not logged in. Run `agent login`.",
    "Authentication failed",
])
def test_auth_signs(tail: str) -> None:
    result = classify_text(1, tail)
    assert result.status == "auth_error"
    assert result.message == tail


@pytest.mark.parametrize("tail", [
    "pytest: 3 failed, 429 passed", "wrote 429 bytes", "line 429: syntax error",
    # a port in a URL (codex names the URL it used): the flaky 401 run that read as a 429
    "unexpected status 401 Unauthorized: Invalid API key, url: http://127.0.0.1:40429/v1",
    "GET http://localhost:8429/v1/models failed"])
def test_a_bare_429_is_no_rate_limit(tail: str) -> None:
    assert classify_text(1, tail).status in ("error", "auth_error")


def test_rate_limit_wins_over_auth() -> None:
    assert classify_text(1, "401 Unauthorized\n429 Too Many Requests").status == "rate_limited"


@pytest.mark.parametrize("tail", ["Traceback: KeyError 'x'", "segmentation fault",
                                  "error: could not compile", "processed 4290 files"])
def test_plain_errors(tail: str) -> None:
    result = classify_text(2, f"working...\n{tail}")
    assert result.status == "error"
    assert result.message == tail
    assert result.retry_after_s is None


def test_no_output_names_the_exit_code() -> None:
    result = classify_text(3, "")
    assert (result.status, result.message) == ("error", "exited with 3")
    assert classify_text(None, "  \n").status == "error"  # killed: no exit code


def test_only_the_last_lines_are_looked_at() -> None:
    old = "Error: 429 Too Many Requests\n" + "\n".join(f"line {i}" for i in range(30))
    result = classify_text(1, old)
    assert result.status == "error"
    assert result.message == "line 29"


def test_message_is_one_bounded_line() -> None:
    result = classify_text(1, "x" * 5000)
    assert result.status == "error"
    assert len(result.message) == 300

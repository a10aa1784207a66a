"""`events.subscribe`'s machinery: each subscription follows the events files of its
workspace (or of every workspace this server was asked about) through a `ralph.company.live`
Feed, woken by a watcher of the workspace's projects directory (inotify; polling where that
cannot be had) and by a safety tick, and sends each matching event as an
`events.notification`. Events appended by any process are seen, because the files are the
source, not this process's own appends.

Backfill and live meet without a gap or a repeat: the backfill is read from the index after a
sync, and the feed then starts where that sync stopped in each file. A client that
acknowledges events (`events.ack`) has its positions kept in the workspace
(`.local/subscriptions/<id>.json`); subscribing again with the same id resumes after them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import watchfiles

from ralph.company.layout import EVENTS_FILE, PROJECTS, CompanyError
from ralph.company.live import Feed, LiveEvent, load_acks, save_acks
from ralph.store.lines import FileCursor

log = logging.getLogger("ralph.controlplane")

MAX_SUBSCRIPTIONS = 64
MAX_UNACKED = 10_000  # delivered events remembered for `events.ack` (older ones: see Sub.floor)
SAFETY_TICK_S = 1.0  # a missed file event costs at most this much latency
_DEBOUNCE_MS = 10
Notify = Callable[[str, dict[str, Any]], Awaitable[None]]
Backfill = Callable[["Filters", Path, int], Awaitable[tuple[list[dict[str, Any]],
                                                            dict[str, FileCursor]]]]


def default_subscription_id() -> str:
    """As the original makes them: `sub_<epoch ms>_<0..99999>`."""
    return f"sub_{time.time_ns() // 1_000_000}_{random.randrange(100_000)}"


@dataclass(frozen=True)
class Filters:
    project_id: str | None = None
    run_id: str | None = None
    event_types: frozenset[str] | None = None

    def match(self, project_id: str | None, event: dict[str, Any]) -> bool:
        if self.project_id is not None and project_id != self.project_id:
            return False
        if self.run_id is not None and event.get("run_id") != self.run_id:
            return False
        return self.event_types is None or event.get("type") in self.event_types


@dataclass(eq=False)
class Sub:
    id: str
    root: Path | None  # None: every workspace this server was asked about
    filters: Filters
    feeds: dict[Path, Feed] = field(default_factory=dict)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    changed: dict[Path, set[Path] | None] = field(default_factory=dict)  # None: read all
    # (ts_monotonic_ms, run key, line start) of each event delivered and not acknowledged
    unacked: deque[tuple[Any, str, int]] = field(default_factory=deque)
    floor: dict[str, int] = field(default_factory=dict)  # unacknowledged from here (overflow)
    # How far each file was handled (each event in it sent or filtered out), per workspace:
    # a feed reads ahead of what has been sent, so acks are kept against this, not the feed.
    handled: dict[Path, dict[str, FileCursor]] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None

    def touch(self, root: Path, paths: set[Path] | None) -> None:
        known = self.changed.get(root, set())
        self.changed[root] = None if paths is None or known is None else known | paths
        self.wake.set()

    def positions(self, root: Path) -> dict[str, FileCursor]:
        """What a restart resumes from: each file's position, held back to the first event
        delivered but not acknowledged."""
        held = dict(self.floor)
        for _ts, key, start in self.unacked:
            held[key] = min(held.get(key, start), start)
        return {key: FileCursor(min(c.offset, held.get(key, c.offset)), c.ino)
                for key, c in self.handled.get(root, {}).items()}

    def acknowledge(self, upto: Any) -> None:
        """Acknowledge delivered events in delivery order: each one below `upto`, through
        the first whose ts_monotonic_ms is `upto`, stopping at the first one above it (or
        without a number); everything delivered when `upto` is None. Several events can
        share a millisecond, so an ack never reaches past the first of them: a resume may
        send one again (at least once), never skip one."""
        if upto is None:
            self.unacked.clear()
            self.floor.clear()
            return
        while self.unacked:
            ts = self.unacked[0][0]
            if not isinstance(ts, int | float) or isinstance(ts, bool) or ts > upto:
                return
            self.unacked.popleft()
            if ts == upto:
                return


class Watch:
    """One workspace's projects directory watched for changed events files."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.subs: set[Sub] = set()
        self._stop = asyncio.Event()
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        projects = self.root / PROJECTS
        while not projects.is_dir():  # not a workspace yet: the safety tick reads it
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), SAFETY_TICK_S)
            if self._stop.is_set():
                return
        for polling in (False, True):
            try:
                async for changes in watchfiles.awatch(
                        projects, watch_filter=None, debounce=_DEBOUNCE_MS * 5,
                        step=_DEBOUNCE_MS, stop_event=self._stop, force_polling=polling,
                        poll_delay_ms=100, ignore_permission_denied=True):
                    paths = {Path(p) for _change, p in changes if p.endswith(EVENTS_FILE)}
                    dirs = any(not p.endswith(EVENTS_FILE) and os.sep + "runs" in p
                               and Path(p).is_dir() for _change, p in changes)
                    for sub in list(self.subs):
                        # A new run directory: its file may have been written before a
                        # watch on the directory existed, so read every file.
                        sub.touch(self.root, None if dirs else paths)
                return
            except (OSError, RuntimeError) as exc:
                if polling:
                    log.warning("cannot watch %s (%s); reading it once a second", projects, exc)
                    return
                log.warning("cannot watch %s (%s); polling it instead", projects, exc)

    def close(self) -> None:
        self._stop.set()
        self.task.cancel()


class Subscriptions:
    """Every subscription of one server (one client)."""

    def __init__(self, notify: Callable[[], Notify | None], workspaces: set[str]) -> None:
        self._notify = notify
        self._workspaces = workspaces
        self.subs: dict[str, Sub] = {}
        self._watches: dict[Path, Watch] = {}
        self._ticker: asyncio.Task[None] | None = None
        # One subscribe at a time: two with the same id (or the 64th and 65th) would
        # otherwise both pass the checks while they wait for their feeds.
        self._subscribing = asyncio.Lock()

    async def subscribe(self, sub_id: str, root: Path | None, filters: Filters,
                        backfill_limit: int | None, backfill: Backfill | None) -> None:
        """Start (or replace) a subscription. Where it starts reading is settled before the
        caller answers, so every event appended after the answer is sent; the first
        notification goes out after the answer (the task starts on a later turn)."""
        async with self._subscribing:
            await self._subscribe(sub_id, root, filters, backfill_limit, backfill)

    async def _subscribe(self, sub_id: str, root: Path | None, filters: Filters,
                         backfill_limit: int | None, backfill: Backfill | None) -> None:
        old = self.subs.pop(sub_id, None)
        if old is not None:
            self._drop(old)
        if len(self.subs) >= MAX_SUBSCRIPTIONS:
            raise CompanyError(f"Too many subscriptions (at most {MAX_SUBSCRIPTIONS})",
                               subscription_id=sub_id)
        sub = Sub(sub_id, root, filters)
        starts: dict[Path, Feed] = {}
        backfilling = False
        if root is None:
            for found in self._roots(sub):
                starts[found] = await asyncio.to_thread(Feed, found)
        else:
            acked = await asyncio.to_thread(load_acks, root, sub_id)
            if acked is not None:  # made again after a restart: resume after the last ack
                starts[root] = await asyncio.to_thread(Feed, root, acked, from_start=True)
            elif backfill_limit is not None and backfill is not None:
                backfilling = True  # the feed starts where the backfill's index sync ends
            else:
                starts[root] = await asyncio.to_thread(Feed, root)
        self.subs[sub_id] = sub
        sub.task = asyncio.create_task(self._follow(
            sub, starts, backfill_limit if backfilling else None, backfill))
        if self._ticker is None:
            self._ticker = asyncio.create_task(self._tick())

    async def workspace_added(self, root: Path) -> None:
        """A workspace this server hears of for the first time: subscriptions without a
        workspace follow it from now on (before the request that named it runs, so they
        see what that request appends)."""
        for sub in list(self.subs.values()):
            if sub.root is None and root not in sub.feeds:
                self._attach(sub, root, await asyncio.to_thread(Feed, root))

    def unsubscribe(self, sub_id: str) -> bool:
        sub = self.subs.pop(sub_id, None)
        if sub is None:
            return False
        self._drop(sub)
        return True

    def get(self, sub_id: str) -> Sub | None:
        return self.subs.get(sub_id)

    async def close(self) -> None:
        for sub in list(self.subs.values()):
            self._drop(sub)
        self.subs.clear()
        if self._ticker is not None:
            self._ticker.cancel()
        for watch in self._watches.values():
            watch.close()
        tasks = [w.task for w in self._watches.values()]
        self._watches.clear()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def _drop(self, sub: Sub) -> None:
        if sub.task is not None:
            sub.task.cancel()
        for root in list(sub.feeds):
            watch = self._watches.get(root)
            if watch is not None:
                watch.subs.discard(sub)
                if not watch.subs:  # nobody follows this workspace any more
                    watch.close()
                    del self._watches[root]

    def _roots(self, sub: Sub) -> list[Path]:
        if sub.root is not None:
            return [sub.root]
        return [Path(ws) for ws in sorted(self._workspaces)]

    def _attach(self, sub: Sub, root: Path, feed: Feed) -> None:
        sub.feeds[root] = feed
        sub.handled[root] = dict(feed.cursors)
        watch = self._watches.get(root)
        if watch is None:
            watch = self._watches[root] = Watch(root)
        watch.subs.add(sub)
        sub.touch(root, None)

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(SAFETY_TICK_S)
            for sub in list(self.subs.values()):
                for root in self._roots(sub):
                    if root not in sub.feeds:
                        self._attach(sub, root, await asyncio.to_thread(Feed, root))
                    else:
                        sub.touch(root, None)

    async def _follow(self, sub: Sub, starts: dict[Path, Feed], backfill_limit: int | None,
                      backfill: Backfill | None) -> None:
        try:
            await asyncio.sleep(0)  # after the answer to events.subscribe
            for root, feed in starts.items():
                self._attach(sub, root, feed)
            if backfill_limit is not None and backfill is not None and sub.root is not None:
                await self._backfill(sub, sub.root, backfill_limit, backfill)
            while True:
                await sub.wake.wait()
                sub.wake.clear()
                changed, sub.changed = sub.changed, {}
                for root, paths in changed.items():
                    reading = sub.feeds.get(root)
                    if reading is None:
                        continue
                    handled = sub.handled.setdefault(root, {})
                    more = True
                    while more:
                        events, more = await asyncio.to_thread(reading.read, paths)
                        read_upto = dict(reading.cursors)
                        for event in events:
                            await self._deliver(sub, root, event)
                            handled[event.key] = FileCursor(event.end, event.ino)
                        handled.update(read_upto)
        except asyncio.CancelledError:
            raise
        except Exception:  # a subscription must never take the server down
            log.exception("subscription %s stopped", sub.id)

    async def _backfill(self, sub: Sub, root: Path, limit: int, backfill: Backfill) -> None:
        """The most recent `limit` matching events from the index (after a sync), then live
        from where that sync stopped in each file."""
        try:
            rows, cursors = await backfill(sub.filters, root, limit)
        except Exception as exc:  # the original swallowed these; say it at least
            log.warning("backfill of subscription %s failed: %s", sub.id, exc)
            self._attach(sub, root, await asyncio.to_thread(Feed, root))
            return
        for row in rows:
            await self._send(sub, row["project_id"], row["event"])
        self._attach(sub, root, await asyncio.to_thread(Feed, root, cursors, from_start=True))

    async def _deliver(self, sub: Sub, root: Path, event: LiveEvent) -> None:
        if not sub.filters.match(event.project_id, event.event):
            return
        await self._send(sub, event.project_id, event.event)
        sub.unacked.append((event.event.get("ts_monotonic_ms"), event.key, event.start))
        if len(sub.unacked) > MAX_UNACKED:
            _ts, key, start = sub.unacked.popleft()
            sub.floor[key] = min(sub.floor.get(key, start), start)

    async def _send(self, sub: Sub, project_id: str | None, event: dict[str, Any]) -> None:
        notify = self._notify()
        if notify is None:
            return
        await notify("events.notification", {"subscription_id": sub.id,
                                             "project_id": project_id, "event": event})

    async def acknowledge(self, sub: Sub, upto: Any) -> None:
        """Mark delivered events acknowledged; with a workspace, keep the positions there."""
        sub.acknowledge(upto)
        if sub.root is not None and sub.root in sub.feeds:
            await asyncio.to_thread(save_acks, sub.root, sub.id, sub.positions(sub.root))

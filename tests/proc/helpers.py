"""Helpers for process tests: Python children, and what /proc says about groups."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import textwrap
import time
from collections.abc import Callable, Iterable


def py(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def group_members(pgid: int) -> list[int]:
    """Running (non-zombie) processes of group `pgid`, straight from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            found.append(int(entry))
    return found


def running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            state = handle.read().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in (b"Z", b"X")


def pids_from(output: bytes) -> list[int]:
    """The numbers a child printed (its $$, $! ...)."""
    return [int(word) for word in output.split() if word.isdigit()]


def stat_of(pid: int) -> tuple[str, int, int, int] | None:
    """(state, ppid, pgrp, session) of `pid`, None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return fields[0].decode(), int(fields[1]), int(fields[2]), int(fields[3])


def zombie_children() -> set[int]:
    """Zombie children of this process: what nobody reaped."""
    me = os.getpid()
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = stat_of(int(entry))
            if stat is not None and stat[1] == me and stat[0] == "Z":
                found.add(int(entry))
    return found


def wait_until(predicate: Callable[[], bool], timeout_s: float) -> bool:
    """Poll `predicate` every 10 ms until it holds (True) or `timeout_s` passes (False)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


def kill_and_reap(pids: Iterable[int]) -> None:
    """Cleanup after a test: SIGKILL each pid still running; reap those that are ours."""
    for pid in pids:
        if running(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    for pid in pids:
        stat = stat_of(pid)
        if stat is not None and stat[1] == os.getpid():
            wait_until(functools.partial(_not_running, pid), 5)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


def _not_running(pid: int) -> bool:
    return not running(pid)

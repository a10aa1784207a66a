"""Helpers for process tests: Python children, and what /proc says about groups."""

from __future__ import annotations

import os
import sys
import textwrap


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

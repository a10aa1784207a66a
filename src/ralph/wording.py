"""Counts in messages people read: "1 iteration", "3 iterations", "the only task is"."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`1 attempt`, `3 attempts` (`plural` when adding an s is wrong)."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def every_task(n: int) -> str:
    """"the only task is" / "all 3 tasks are", for messages about every task."""
    return "the only task is" if n == 1 else f"all {n:,} tasks are"

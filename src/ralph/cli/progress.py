"""Progress of long work, drawn on stderr when it is a terminal (stdout stays data only)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
)


@contextlib.contextmanager
def byte_progress(label: str, *, unit: str = "bytes") -> Iterator[Callable[[int, int], None]]:
    """A callback (done, total) that drives a progress bar, or does nothing off a terminal;
    `unit` "items" counts (frames copied) instead of bytes."""
    if not sys.stderr.isatty():
        yield lambda done, total: None
        return
    amount = DownloadColumn() if unit == "bytes" else MofNCompleteColumn()
    columns = (TextColumn(label), BarColumn(), amount, TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update

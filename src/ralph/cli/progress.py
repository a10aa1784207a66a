"""Progress of long work, drawn on stderr when it is a terminal (stdout stays data only)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn


@contextlib.contextmanager
def byte_progress(label: str) -> Iterator[Callable[[int, int], None]]:
    """A callback (done, total) that drives a progress bar, or does nothing off a terminal."""
    if not sys.stderr.isatty():
        yield lambda done, total: None
        return
    columns = (TextColumn(label), BarColumn(), DownloadColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update

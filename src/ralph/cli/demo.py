"""`ralph demo`: the embedded default job. Until the loop lands, a short store demo.

A writer process records a session's notes through the CLI while this process follows them
live through a store subscription, then prints the notes grouped by type. It runs in a
temporary directory that it removes afterwards, and every child has its own process group and
a timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from ralph.cli.notes_cmd import print_notes
from ralph.notes import list_notes, note_from_frame, note_topic
from ralph.store import Store

SESSION = "demo"
NOTES = [
    ("remaining", None, "Write the event store"),
    ("remaining", None, "Add the notes projection"),
    ("in_progress", 1, "Event store: append, index, subscribe"),
    ("learning", 1, "flock on the head file serialises appends across processes"),
    ("completed", 1, "Event store with a SQLite index and live subscriptions"),
    ("decision", 2, "Notes are frames on ralph.<name>.note with text in the content store"),
    ("completed", 2, "Notes projection and CLI"),
    ("blocked", 3, "The loop waits for the loop issue"),
]
WRITER_TIMEOUT_S = 60.0


def demo(
    delay: Annotated[float, typer.Option("--delay", min=0.0,
                                         help="Seconds between the writer's notes.")] = 0.3,
    keep: Annotated[bool, typer.Option("--keep", help="Keep the demo directory.")] = False,
) -> None:
    """Append notes from another process and follow them live."""
    console = Console(highlight=False, soft_wrap=True)
    workdir = Path(tempfile.mkdtemp(prefix="ralph-demo-"))
    store_dir = workdir / ".ralph" / "store"
    try:
        console.print(f"[bold]Ralph store demo[/bold] in {workdir}")
        with Store(store_dir) as store:
            asyncio.run(_run(store, store_dir, delay, console))
            console.print("\n[bold]ralph notes list --name demo[/bold]")
            print_notes(list_notes(store, session=SESSION), console)
    finally:
        if keep:
            console.print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


async def _run(store: Store, store_dir: Path, delay: float, console: Console) -> None:
    writer = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _WRITER, str(store_dir), str(delay),
        stdin=asyncio.subprocess.DEVNULL, start_new_session=True,
    )
    console.print(f"writer process {writer.pid} appends {len(NOTES)} notes; following them live:")
    try:
        async with asyncio.timeout(WRITER_TIMEOUT_S):
            seen = 0
            async with store.subscribe(topic=note_topic(SESSION)) as frames:
                async for frame in frames:
                    note = note_from_frame(store, frame)
                    if note is not None:
                        where = f" (iteration {note.iteration})" if note.iteration else ""
                        text = escape(note.text)
                        console.print(f"  seq {frame.seq:>3}  {note.type:<11}{where}  {text}")
                    seen += 1
                    if seen == len(NOTES):
                        break
            code = await writer.wait()
            if code != 0:
                raise RuntimeError(f"the demo writer exited with {code}")
    finally:
        if writer.returncode is None:
            _kill_group(writer.pid)
            await writer.wait()


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


_WRITER = f"""
import subprocess, sys, time
store, delay = sys.argv[1], float(sys.argv[2])
for note_type, iteration, text in {NOTES!r}:
    argv = [sys.executable, "-m", "ralph", "notes", "add", "--store", store, "--name",
            {SESSION!r}, "--type", note_type, text]
    if iteration is not None:
        argv += ["--iteration", str(iteration)]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, timeout=30)
    time.sleep(delay)
"""

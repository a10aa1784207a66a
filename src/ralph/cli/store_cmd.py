"""`ralph store ...`: the event store's verbs, one JSON frame per line on stdout."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from ralph.cli.helpfmt import HelpCommand, at_least
from ralph.cli.options import StoreOption, open_store
from ralph.cli.output import piped_content, write_json, write_json_line

# A count or seq beyond MAX_SEQ (SQLite's INTEGER) is bad usage (exit 2).
from ralph.store.frame import DEFAULT_STREAM, MAX_SEQ, parse_meta_json

if TYPE_CHECKING:
    from ralph.store import Store

app = typer.Typer(help="Append to, read and maintain the event store.", no_args_is_help=True)


@app.command(cls=HelpCommand)
def append(
    topic: Annotated[str, typer.Argument(help="Topic, e.g. ralph.demo.note.")],
    meta: Annotated[str | None, typer.Option("--meta", metavar="JSON",
                                             help="Meta as a JSON object.")] = None,
    stream: Annotated[str, typer.Option("--stream", metavar="STREAM",
                                        help="Stream of the frame.")] = DEFAULT_STREAM,
    store: StoreOption = None,
) -> None:
    """Append a frame (content from stdin when piped) and print it."""
    meta_obj = parse_meta_json(meta) if meta is not None else None
    with open_store(store, create=True) as opened:
        frame = opened.append(topic, meta_obj, content=piped_content(), stream=stream)
    write_json_line(frame.to_dict())


@app.command(cls=HelpCommand)
def cat(
    topic: Annotated[str | None, typer.Option("--topic", metavar="TOPIC",
                                              help="Exact topic or prefix.*")] = None,
    stream: Annotated[str | None, typer.Option("--stream", metavar="STREAM",
                                               help="Only this stream.")] = None,
    after: Annotated[int | None, typer.Option("--after", callback=at_least(0, MAX_SEQ),
                                              help="Only seq > SEQ.", metavar="SEQ")] = None,
    limit: Annotated[int | None, typer.Option("--limit", callback=at_least(0, MAX_SEQ),
                                              help="At most N frames.", metavar="N")] = None,
    follow: Annotated[bool, typer.Option("--follow", "-f",
                                         help="Keep printing new frames as they come.")] = False,
    store: StoreOption = None,
) -> None:
    """Print frames in seq order, one JSON object per line."""
    with open_store(store) as opened:
        if follow:
            import asyncio

            asyncio.run(_follow(opened, topic, stream, after, limit))
            return
        for frame in opened.read(topic=topic, stream=stream, after_seq=after, limit=limit):
            write_json_line(frame.to_dict())


async def _follow(store: Store, topic: str | None, stream: str | None, after: int | None,
                  limit: int | None) -> None:
    if limit == 0:
        return
    printed = 0
    async with store.subscribe(topic=topic, stream=stream, after_seq=after) as frames:
        async for frame in frames:
            write_json_line(frame.to_dict())
            printed += 1
            if limit is not None and printed >= limit:
                return


@app.command(cls=HelpCommand)
def last(
    topic: Annotated[str, typer.Argument(help="Exact topic or prefix.*")],
    n: Annotated[int, typer.Argument(callback=at_least(1, MAX_SEQ), metavar="N",
                                     help="How many frames.")] = 1,
    store: StoreOption = None,
) -> None:
    """Print the last N frames of a topic, oldest first."""
    with open_store(store) as opened:
        for frame in opened.last(topic, n):
            write_json_line(frame.to_dict())


@app.command(cls=HelpCommand)
def get(frame_id: Annotated[str, typer.Argument(metavar="ID", help="Frame id.")],
        store: StoreOption = None) -> None:
    """Print the frame with this id."""
    with open_store(store) as opened:
        write_json_line(opened.get(frame_id).to_dict())


@app.command(cls=HelpCommand)
def cas(hash_: Annotated[str, typer.Argument(metavar="HASH", help="sha256-... content hash.")],
        store: StoreOption = None) -> None:
    """Write the content with this hash to stdout, verified."""
    with open_store(store) as opened:
        data = opened.cas_get(hash_)
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


@app.command(cls=HelpCommand)
def sync(store: StoreOption = None) -> None:
    """Index what was appended since the last sync."""
    from ralph.cli.progress import byte_progress

    with open_store(store, sync_on_open=False) as opened, \
            byte_progress("indexing") as progress:
        result = opened.sync(progress)
    write_json({"indexed": result.frames, "parse_errors": result.errors,
                "last_seq": result.watermark})


@app.command(cls=HelpCommand)
def rebuild(store: StoreOption = None) -> None:
    """Recreate the index from the stream files."""
    from ralph.cli.progress import byte_progress

    with open_store(store, sync_on_open=False) as opened, \
            byte_progress("rebuilding index") as progress:
        result = opened.rebuild(progress)
    write_json({"indexed": result.frames, "parse_errors": result.errors,
                "last_seq": result.watermark})


@app.command(cls=HelpCommand)
def stats(store: StoreOption = None) -> None:
    """Print counts and sizes of the store."""
    with open_store(store) as opened:
        write_json(opened.stats())


@app.command(cls=HelpCommand)
def errors(store: StoreOption = None) -> None:
    """Print the lines that are not frames (stream, byte_offset, excerpt, error)."""
    with open_store(store) as opened:
        for error in opened.errors():
            write_json_line({"stream": error.stream, "byte_offset": error.byte_offset,
                             "excerpt": error.excerpt, "error": error.error,
                             "recorded_at": error.recorded_at})


@app.command(cls=HelpCommand)
def gc(
    policy: Annotated[list[str] | None, typer.Option(
        "--policy", metavar="TOPIC=POLICY",
        help="A retention rule such as agent.output=last:1000 or ralph.*=time:86400000; "
             "adds to the rules of <store>/retention.json.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only count what would go.")] = False,
    store: StoreOption = None,
) -> None:
    """Apply the retention policies: drop expired frames and unreferenced content."""
    from ralph.store import Rule

    rules = [Rule.parse(text) for text in policy or []]
    with open_store(store) as opened:
        report = opened.gc(rules, dry_run=dry_run)
    write_json({"frames_removed": report.frames_removed,
                "streams_rewritten": report.streams_rewritten,
                "content_removed": report.content_removed, "bytes_freed": report.bytes_freed,
                "dry_run": report.dry_run})


@app.command(cls=HelpCommand)
def copy(
    source: Annotated[str, typer.Argument(metavar="SRC",
                                          help="The store to copy: a directory or a "
                                               "postgresql:// URL.")],
    target: Annotated[str, typer.Argument(metavar="DST",
                                          help="An empty store to copy into (created if "
                                               "missing), of either kind.")],
) -> None:
    """Copy every frame and its content into an empty store, e.g. a directory to PostgreSQL."""
    from ralph.cli.progress import byte_progress
    from ralph.project import store_location
    from ralph.store import StoreError
    from ralph.store.copy import copy_store

    src_location, dst_location = store_location(source), store_location(target)
    if str(src_location) == str(dst_location) or (
            not isinstance(src_location, str) and not isinstance(dst_location, str)
            and src_location.resolve() == dst_location.resolve()):
        raise StoreError("SRC and DST are the same store: name another store to copy into")
    with open_store(source) as opened:
        if not opened.exists:
            raise StoreError(f"no store at {opened.display_location}: nothing to copy")
        with open_store(target, create=True) as into, \
                byte_progress("copying frames", unit="items") as progress:
            report = copy_store(opened, into, progress)
            where = into.display_location
    write_json({"frames": report.frames, "content_objects": report.content_objects,
                "last_seq": report.last_seq, "target": where})

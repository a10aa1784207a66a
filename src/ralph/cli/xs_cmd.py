"""`ralph xs ...`: the command forms of the xs CLI (cross.stream), over Ralph's own store.

An agent taught to keep its state with xs works by putting `ralph` in front of its commands:
`ralph xs append ./.ralph/store ralph.demo.note --meta '{"type":"completed"}'` (the text on
stdin) records a note that `ralph notes list` shows. Frames print as xs prints them: one JSON
object with the keys `topic, id, hash, meta, ttl`. Ralph's store is embedded, so STORE is
always a directory (a path starting with `/` or `.`), never a server's address.

`cat` takes the flags of both generations of xs (up to 0.8 and from 0.9 on), so it parses its
own arguments: `-a` is `--after ID` when the next argument is a frame id (25 lowercase letters
and digits) and `--all` otherwise.
"""

from __future__ import annotations

import re
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import orjson
import typer

from ralph.cli.helpfmt import HelpCommand, at_least
from ralph.cli.output import error_line, piped_content, terminal_safe, write_json_line

if TYPE_CHECKING:
    from typer._click import Context, HelpFormatter

    from ralph.store import Frame, Store

EXIT_ERROR = 1
EXIT_USAGE = 2
FOREVER = "forever"
EPHEMERAL = "ephemeral"
_ID = re.compile(r"[0-9a-z]{25}")
_HEX = re.compile(r"[0-9a-fA-F]{64}")
_TTL = re.compile(r"(time|last|head):([0-9]+)")
_MAX_COUNT = 2**63 - 1  # SQLite's INTEGER, as the store's own counts
_CAT_HELP = "see 'ralph xs cat --help'"

app = typer.Typer(help="The xs CLI's commands (cross.stream) on Ralph's own event store.",
                  no_args_is_help=True)

StoreArgument = Annotated[str, typer.Argument(
    metavar="STORE", help="The store directory, a path starting with / or . (./.ralph/store).",
    show_default=False)]


def _usage(message: str) -> NoReturn:
    """Bad usage: one line on stderr, exit 2."""
    error_line(message)
    raise typer.Exit(EXIT_USAGE)


def _fail(message: str) -> NoReturn:
    """A failed operation: one line on stderr, exit 1."""
    error_line(message)
    raise typer.Exit(EXIT_ERROR)


def _store_dir(address: str) -> Path:
    """STORE as xs reads it: a path starting with `/` or `.` is a directory; anything else
    (`host:port`, `:port`) would be a server's address, which Ralph's embedded store has not."""
    if not address.startswith(("/", ".")):
        _usage("ralph xs works on a store directory (a path starting with / or .), not on a "
               f"server address {terminal_safe(address)!s}")
    return Path(address)


def _existing_store(address: str) -> Path:
    """STORE for the commands that only read: it must be a directory."""
    path = _store_dir(address)
    if not path.is_dir():
        _fail(f"no store at: {terminal_safe(address)}")
    return path


def _open(path: Path, *, create: bool = False) -> Store:
    from ralph.cli.options import open_store

    return open_store(path, create=create)


def xs_frame(frame: Frame, ttl: str = FOREVER, *, with_timestamp: bool = False
             ) -> dict[str, Any]:
    """A frame as xs prints it: `topic, id, hash, meta, ttl` (and `timestamp`, RFC 3339)."""
    shown: dict[str, Any] = {"topic": frame.topic, "id": frame.id, "hash": frame.hash,
                             "meta": frame.meta, "ttl": ttl}
    if with_timestamp:
        shown["timestamp"] = frame.ts
    return shown


class _Markers:
    """xs's own frames, which are printed and never stored: `xs.threshold` (the history is
    done, live frames follow) and `xs.pulse` (a heartbeat while following)."""

    def __init__(self, with_timestamp: bool) -> None:
        from ralph.store.ids import IdGenerator

        self._ids = IdGenerator()
        self._with_timestamp = with_timestamp

    def frame(self, topic: str) -> dict[str, Any]:
        from ralph.store.frame import format_ts

        frame_id, ms = self._ids.next()
        shown: dict[str, Any] = {"topic": topic, "id": frame_id, "hash": None, "meta": None,
                                 "ttl": EPHEMERAL}
        if self._with_timestamp:
            shown["timestamp"] = format_ts(ms)
        return shown


# -- append -----------------------------------------------------------------------------------


def _check_ttl(ttl: str) -> str:
    if ttl in (FOREVER, EPHEMERAL):
        return ttl
    match = _TTL.fullmatch(ttl)
    if match is None or (match[1] != "time" and int(match[2]) < 1):
        _usage(f"invalid ttl {terminal_safe(ttl)!r}: use forever, ephemeral, time:MS, last:N or "
               "head:N (N at least 1)")
    return ttl


def _session_of(topic: str) -> str | None:
    """The session a `ralph.<session>.<anything>` topic belongs to (None: no session's)."""
    from ralph.notes import NoteError, check_session

    parts = topic.split(".")
    if len(parts) < 3 or parts[0] != "ralph":
        return None
    try:
        return check_session(parts[1])
    except NoteError:
        return None


def _check_note(topic: str, meta: dict[str, Any] | None, content: bytes | None) -> None:
    """A `ralph.<session>.note` frame must be a note `ralph notes add` could have written."""
    from ralph.notes import NOTE_TYPES, NoteError, check_session

    try:
        check_session(topic.split(".")[1])
    except NoteError as exc:
        _usage(str(exc))
    types = ", ".join(NOTE_TYPES)
    if meta is None or "type" not in meta:
        _usage(f'a note needs its type in --meta, e.g. \'{{"type":"completed"}}\' (one of {types})')
    if meta["type"] not in NOTE_TYPES:
        _usage(f"invalid note type {terminal_safe(repr(meta['type']))}: use one of {types}")
    iteration = meta.get("iteration")
    if "iteration" in meta and (not isinstance(iteration, int) or isinstance(iteration, bool)
                                or iteration < 1):
        _usage("a note's iteration must be a whole number, 1 or more")
    resolves = meta.get("resolves")
    if "resolves" in meta and (not isinstance(resolves, list)
                               or not all(isinstance(item, str) for item in resolves)):
        _usage("a note's resolves must be a list of note ids")
    if content is None or not content.decode("utf-8", "replace").strip():
        _usage("a note needs some text: pipe it on stdin")


def _check_resolved(store: Store, session: str, meta: dict[str, Any]) -> None:
    """The notes a note resolves must be notes of its session (as `ralph notes add` checks)."""
    from ralph.notes import list_notes

    settled = meta.get("resolves") or []
    if not settled:
        return
    known = {note.id for note in list_notes(store, session=session)}
    missing = [note_id for note_id in settled if note_id not in known]
    if missing:
        _fail(f"no note {terminal_safe(missing[0])} in session {session!r} to resolve: "
              f"`ralph notes list --name {session} --json` shows their ids")


@app.command(cls=HelpCommand)
def append(
    store: StoreArgument,
    topic: Annotated[str, typer.Argument(metavar="TOPIC", help="Topic, e.g. ralph.demo.note.")],
    meta: Annotated[str | None, typer.Option("--meta", metavar="JSON",
                                             help="Meta as a JSON object.")] = None,
    ttl: Annotated[str, typer.Option(
        "--ttl", metavar="TTL",
        help="forever, ephemeral, time:MS, last:N or head:N: printed as given; Ralph keeps "
             "every frame until `ralph store gc`.")] = FOREVER,
) -> None:
    """Append a frame (content from stdin when piped) and print it as xs does.

    A topic ralph.SESSION.* goes to the session's stream, where `ralph notes` and `ralph nu`
    read it; a ralph.SESSION.note must be a note (meta type, text on stdin)."""
    from ralph.store.errors import InvalidMetaError, InvalidTopicError
    from ralph.store.frame import DEFAULT_STREAM, check_topic, parse_meta_json

    path = _store_dir(store)
    try:
        check_topic(topic)
    except InvalidTopicError as exc:
        _usage(str(exc))
    meta_obj = None
    if meta is not None:
        try:
            meta_obj = parse_meta_json(meta)
        except InvalidMetaError as exc:
            _usage(str(exc))
    _check_ttl(ttl)
    content = piped_content()
    session = _session_of(topic)
    note = topic.count(".") == 2 and topic.startswith("ralph.") and topic.endswith(".note")
    if note:
        _check_note(topic, meta_obj, content)
    with _open(path, create=True) as opened:
        if note and session is not None and meta_obj is not None:
            _check_resolved(opened, session, meta_obj)
        frame = opened.append(topic, meta_obj, content=content,
                              stream=DEFAULT_STREAM if session is None else f"sessions/{session}")
    out = sys.stdout.buffer
    out.write(orjson.dumps(xs_frame(frame, ttl)))  # as xs: no newline after the frame
    out.flush()


# -- cat --------------------------------------------------------------------------------------

_FLAGS = {"--follow": "follow", "--tail": "new", "--new": "new", "--all": "all",
          "--with-timestamp": "with_timestamp"}
_VALUES = {"--pulse": "pulse", "--last-id": "after", "--after": "after", "--from": "start_from",
           "--limit": "limit", "--last": "last", "--context": "context", "--topic": "topic"}
_SHORT = {"f": "--follow", "p": "--pulse", "t": "--tail", "n": "--new", "l": "--last-id",
          "c": "--context", "T": "--topic"}  # and -a: --after ID or --all (see _parse_cat)
_CAT_OPTIONS = [
    ("-f, --follow", "After the history, print an xs.threshold frame, then new frames as "
                     "they come, until Ctrl-C."),
    ("-p, --pulse MS", "While following, print an xs.pulse frame every MS milliseconds."),
    ("-n, --new, -t, --tail", "Skip the history: only frames appended from now on."),
    ("-a, --after ID", "Only frames after the frame ID (-a takes an ID only when the next "
                       "argument is one: 25 lowercase letters and digits)."),
    ("-l, --last-id ID", "The same as --after ID (the xs 0.8 name)."),
    ("--from ID", "Frames from the frame ID on, that frame included."),
    ("--last N", "Only the last N frames of the history."),
    ("--limit N", "At most N frames in all."),
    ("-T, --topic PATTERN", "Only these topics: exact, prefix.* or *; a comma-separated list "
                            "for several."),
    ("--with-timestamp", "Add each frame's time (RFC 3339) as `timestamp`."),
    ("-a, --all", "Every context (xs 0.8): Ralph's store has one, so it changes nothing."),
    ("-c, --context ID", "Accepted and ignored: Ralph's store has no contexts."),
]


@dataclass
class _CatArgs:
    store: str | None = None
    follow: bool = False
    new: bool = False
    all: bool = False
    with_timestamp: bool = False
    pulse: int | None = None
    after: str | None = None
    start_from: str | None = None
    limit: int | None = None
    last: int | None = None
    context: str | None = None
    topics: list[str] = field(default_factory=list)

    def set_flag(self, option: str) -> None:
        setattr(self, _FLAGS[option], True)

    def set_value(self, option: str, value: str) -> None:
        name = _VALUES[option]
        if name == "topic":
            self.topics.extend(_topic_patterns(option, value))
        elif name in ("after", "start_from"):
            setattr(self, name, _frame_id(option, value))
        elif name == "context":
            self.context = value
        else:
            setattr(self, name, _count(option, value, minimum=1 if name == "pulse" else 0))


def _count(option: str, value: str, *, minimum: int) -> int:
    if not value.isascii() or not value.isdigit() or not minimum <= int(value) <= _MAX_COUNT:
        _usage(f"invalid value for {option}: {terminal_safe(value)!r} is not a whole number "
               f"from {minimum} to {_MAX_COUNT}")
    return int(value)


def _frame_id(option: str, value: str) -> str:
    if _ID.fullmatch(value) is None:
        _usage(f"invalid value for {option}: {terminal_safe(value)!r} is not a frame id "
               "(25 lowercase letters and digits)")
    return value


def _topic_patterns(option: str, value: str) -> list[str]:
    from ralph.store.errors import InvalidTopicError
    from ralph.store.frame import topic_filter

    patterns = [part.strip() for part in value.split(",")]
    for pattern in patterns:
        try:
            topic_filter(pattern)
        except InvalidTopicError as exc:
            _usage(f"invalid value for {option}: {exc}")
    return patterns


def _parse_cat(args: list[str]) -> _CatArgs:
    """cat's flags, as xs up to 0.8 and from 0.9 on spell them (see `_CAT_OPTIONS`)."""
    parsed = _CatArgs()
    bare_a = False  # the argument before was `-a` taken as --all
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        after_bare_a, bare_a = bare_a, False
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            if name in _FLAGS:
                if eq:
                    _usage(f"option {name} does not take a value ({_CAT_HELP})")
                parsed.set_flag(name)
            elif name in _VALUES:
                if not eq:
                    if i >= len(args):
                        _usage(f"option {name} requires an argument ({_CAT_HELP})")
                    value = args[i]
                    i += 1
                parsed.set_value(name, value)
            else:
                _usage(f"no such option: {terminal_safe(name)} ({_CAT_HELP})")
        elif arg.startswith("-") and len(arg) > 1:
            i, bare_a = _parse_short(parsed, arg, args, i)
        elif parsed.store is None:
            parsed.store = arg
        else:
            hint = (" (-a takes a frame id only when the next argument is one: 25 lowercase "
                    "letters and digits)") if after_bare_a else f" ({_CAT_HELP})"
            _usage(f"unexpected extra argument: {terminal_safe(arg)}{hint}")
    if parsed.store is None:
        _usage(f"missing argument STORE ({_CAT_HELP})")
    if parsed.after is not None and parsed.start_from is not None:
        _usage("--after and --from both say where to start: give one")
    return parsed


def _parse_short(parsed: _CatArgs, arg: str, args: list[str], i: int) -> tuple[int, bool]:
    """One group of short options (`-f`, `-fT topic`, `-p500`); returns the index of the next
    argument and whether the group ended in an `-a` taken as --all."""
    chars = arg[1:]
    j = 0
    bare_a = False
    while j < len(chars):
        char = chars[j]
        j += 1
        rest = chars[j:]
        bare_a = False
        if char == "a":
            if rest and _ID.fullmatch(rest):
                parsed.after = rest
                return i, False
            if not rest and i < len(args) and _ID.fullmatch(args[i]):
                parsed.after = args[i]
                return i + 1, False
            parsed.all = True
            bare_a = True
            continue
        option = _SHORT.get(char)
        if option is None:
            _usage(f"no such option: -{terminal_safe(char)} ({_CAT_HELP})")
        if option in _FLAGS:
            parsed.set_flag(option)
            continue
        if rest:
            value = rest
        elif i < len(args):
            value = args[i]
            i += 1
        else:
            _usage(f"option -{char} requires an argument ({_CAT_HELP})")
        parsed.set_value(option, value)
        return i, False
    return i, bare_a


class _CatCommand(HelpCommand):
    """cat parses its own flags (see `_parse_cat`); its help lists them all the same."""

    def collect_usage_pieces(self, ctx: Context) -> list[str]:
        return ["[OPTIONS]", "STORE"]

    def format_options(self, ctx: Context, formatter: HelpFormatter) -> None:
        with formatter.section("Arguments"):
            formatter.write_dl([("STORE", "The store directory, e.g. ./.ralph/store.")])
        with formatter.section("Options"):
            formatter.write_dl([*_CAT_OPTIONS, ("--help", "Show this message and exit.")])


@app.command(cls=_CatCommand, context_settings={"allow_extra_args": True,
                                                "ignore_unknown_options": True})
def cat(ctx: typer.Context) -> None:
    """Print frames in append order, one JSON object per line, as xs does."""
    parsed = _parse_cat(list(ctx.args))
    assert parsed.store is not None  # _parse_cat requires it
    path = _existing_store(parsed.store)
    with _open(path) as store:
        _cat(store, parsed)


def _cat(store: Store, parsed: _CatArgs) -> None:
    keep, after_seq = _selection(store, parsed)
    topic = parsed.topics[0] if len(parsed.topics) == 1 else None
    left = parsed.limit
    upto = store.last_seq
    frames: Iterable[Frame] = () if parsed.new else _history(store, topic, after_seq, upto,
                                                              keep)
    if parsed.last is not None:
        frames = deque(frames, maxlen=parsed.last)
    for frame in frames:
        if left is not None and left <= 0:
            return
        write_json_line(xs_frame(frame, with_timestamp=parsed.with_timestamp))
        if left is not None:
            left -= 1
    if not parsed.follow or left == 0:
        return
    markers = _Markers(parsed.with_timestamp)
    write_json_line(markers.frame("xs.threshold"))
    import asyncio

    asyncio.run(_follow(store, parsed, markers, topic, keep, max(upto, after_seq), left))


def _history(store: Store, topic: str | None, after_seq: int, upto: int,
             keep: Callable[[Frame], bool]) -> Iterator[Frame]:
    for frame in store.read(topic=topic, after_seq=after_seq):
        if frame.seq > upto:
            return
        if keep(frame):
            yield frame


def _selection(store: Store, parsed: _CatArgs) -> tuple[Callable[[Frame], bool], int]:
    """Which frames cat prints: a test of each frame, and the seq it starts after."""
    from ralph.store.errors import FrameNotFoundError
    from ralph.store.frame import topic_filter

    patterns = [topic_filter(pattern) for pattern in parsed.topics]
    bound = parsed.after or parsed.start_from
    after_seq = 0
    first_id: str | None = None  # a frame id not in the store: frames with ids from it on
    if bound is not None:
        try:
            start = store.get(bound)
        except FrameNotFoundError:
            first_id = bound
        else:
            after_seq = start.seq if parsed.after is not None else start.seq - 1
    inclusive = parsed.start_from is not None

    def keep(frame: Frame) -> bool:
        if first_id is not None and (frame.id < first_id
                                     or (frame.id == first_id and not inclusive)):
            return False
        return not patterns or any(
            frame.topic.startswith(value) if prefix else frame.topic == value
            for value, prefix in patterns)

    return keep, after_seq


async def _follow(store: Store, parsed: _CatArgs, markers: _Markers, topic: str | None,
                  keep: Callable[[Frame], bool], after_seq: int, left: int | None) -> None:
    import asyncio

    pulses = asyncio.create_task(_pulse(markers, parsed.pulse)) if parsed.pulse else None
    try:
        async with store.subscribe(topic=topic, after_seq=after_seq) as frames:
            async for frame in frames:
                if not keep(frame):
                    continue
                write_json_line(xs_frame(frame, with_timestamp=parsed.with_timestamp))
                if left is not None:
                    left -= 1
                    if left <= 0:
                        return
    finally:
        if pulses is not None:
            pulses.cancel()


async def _pulse(markers: _Markers, every_ms: int) -> None:
    import asyncio

    while True:
        await asyncio.sleep(every_ms / 1000)
        write_json_line(markers.frame("xs.pulse"))


# -- cas, version, serve, last, head ------------------------------------------------------


def _sri(hash_: str) -> str:
    """A content hash as Ralph names content: `sha256-<base64>`, given so or as 64 hex digits."""
    from ralph.store.errors import InvalidHashError
    from ralph.store.frame import digest_from_sri, sri_from_digest

    if _HEX.fullmatch(hash_):
        return sri_from_digest(bytes.fromhex(hash_))
    try:
        digest_from_sri(hash_)
    except InvalidHashError:
        _usage(f"invalid content hash {terminal_safe(hash_)!r}: expected sha256-<base64> "
               "(as frames show it) or 64 hex digits")
    return hash_


@app.command(cls=HelpCommand)
def cas(
    store: StoreArgument,
    hash_: Annotated[str, typer.Argument(
        metavar="HASH", help="A frame's hash: sha256-<base64>, or the sha256 in hex.")],
) -> None:
    """Write the content with this hash to stdout, byte for byte."""
    path = _existing_store(store)
    sri = _sri(hash_)
    with _open(path) as opened:
        data = opened.cas_get(sri)
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


@app.command(cls=HelpCommand)
def version(
    store: Annotated[str | None, typer.Argument(
        metavar="STORE", help="A store directory that must exist (optional).",
        show_default=False)] = None,
) -> None:
    """Print Ralph's version (not an xs version) as JSON."""
    from ralph import __version__

    if store is not None:
        _existing_store(store)
    write_json_line({"version": __version__, "implementation": "ralph"})


@app.command(cls=HelpCommand)
def serve(
    store: StoreArgument,
    expose: Annotated[str | None, typer.Option(
        "--expose", metavar="ADDR", help="Accepted and ignored: nothing listens.")] = None,
) -> None:
    """Make sure the store exists and return at once: Ralph's store needs no server."""
    path = _store_dir(store)
    with _open(path, create=True):
        pass
    sys.stderr.write(f"store ready at {terminal_safe(store)} (Ralph's store is embedded: no "
                     "server runs; xs commands work on it directly)\n")
    sys.stderr.flush()


@app.command(cls=HelpCommand)
def last(
    store: StoreArgument,
    topic: Annotated[str | None, typer.Argument(
        metavar="TOPIC", help="Exact topic, prefix.* or * (default: every topic).",
        show_default=False)] = None,
    count: Annotated[int | None, typer.Argument(
        metavar="COUNT", callback=at_least(1, _MAX_COUNT), help="How many frames (default 1).",
        show_default=False)] = None,
) -> None:
    """Print the last frames of a topic, oldest first, one JSON object per line."""
    if count is None and topic is not None and topic.isascii() and topic.isdigit():
        count = _count("COUNT", topic, minimum=1)  # `last STORE 5`: no topic is a number
        topic = None
    _print_last(store, topic or "*", count or 1)


@app.command(cls=HelpCommand)
def head(
    store: StoreArgument,
    topic: Annotated[str, typer.Argument(metavar="TOPIC", help="The topic.")],
) -> None:
    """Print the last frame of a topic (nothing if it has none)."""
    _print_last(store, topic, 1)


def _print_last(store: str, topic: str, count: int) -> None:
    from ralph.store.errors import InvalidTopicError
    from ralph.store.frame import topic_filter

    path = _existing_store(store)
    try:
        topic_filter(topic)
    except InvalidTopicError as exc:
        _usage(str(exc))
    with _open(path) as opened:
        for frame in opened.last(topic, count):
            write_json_line(xs_frame(frame))

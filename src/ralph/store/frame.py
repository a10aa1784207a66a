"""The frame: the one event shape of Ralph, its naming rules and its line encoding.

A frame is stored as one JSON line in its stream file. The encoder writes the fields in a fixed
order so that the same frame always has the same bytes, and the decoder checks every field, so a
line that is not a frame is reported, never half-trusted.
"""

from __future__ import annotations

import base64
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from ralph.store.errors import (
    InvalidHashError,
    InvalidMetaError,
    InvalidStreamError,
    InvalidTopicError,
)

MAX_NAME_BYTES = 255
STREAM_SUFFIX = ".jsonl"
MAX_PART_BYTES = MAX_NAME_BYTES - len(STREAM_SUFFIX)
MAX_SEQ = 2**63 - 1  # SQLite's INTEGER range; a line claiming more is a parse error
DEFAULT_STREAM = "default"

_TOPIC = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*")
_STREAM = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*(?:/[A-Za-z0-9_][A-Za-z0-9_.-]*)*")
_SRI = re.compile(r"sha256-[A-Za-z0-9+/]{43}=")
_ID = re.compile(r"[0-9a-z]{25}")


@dataclass(frozen=True, slots=True)
class Frame:
    """One event. `seq` is store-wide and gapless at append; `hash` names content in the CAS.

    A plain frozen dataclass: frames are made on every append and every read, where a
    validating model would cost more than the rest of the append. Pydantic models embed it
    as a field and derive its JSON Schema all the same.
    """

    id: str
    seq: int
    ts: str
    topic: str
    stream: str
    meta: dict[str, Any]
    hash: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "seq": self.seq, "ts": self.ts, "topic": self.topic,
                "stream": self.stream, "meta": self.meta, "hash": self.hash}

    def to_json(self) -> bytes:
        """The frame as one compact JSON object, fields in the on-disk order."""
        return orjson.dumps(self.to_dict())

    @property
    def timestamp_ms(self) -> int:
        return parse_ts_ms(self.ts)


def check_topic(topic: object) -> str:
    """Return `topic` if it is a valid topic, else raise InvalidTopicError naming the rule."""
    if not isinstance(topic, str) or not topic:
        raise InvalidTopicError("topic must be a non-empty string")
    if len(topic) > MAX_NAME_BYTES:
        raise InvalidTopicError(f"topic is longer than {MAX_NAME_BYTES} bytes")
    if _TOPIC.fullmatch(topic) is None:
        raise InvalidTopicError(
            f"invalid topic {topic!r}: use letters, digits, '_' and '-' in dot-separated parts, "
            "starting with a letter or '_'"
        )
    return topic


def check_stream(stream: object) -> str:
    """Return `stream` if it is a valid stream name such as `runs/run_01H...`."""
    if not isinstance(stream, str) or not stream:
        raise InvalidStreamError("stream must be a non-empty string")
    if len(stream.encode()) > MAX_NAME_BYTES:
        raise InvalidStreamError(f"stream is longer than {MAX_NAME_BYTES} bytes")
    if _STREAM.fullmatch(stream) is None:
        raise InvalidStreamError(
            f"invalid stream {stream!r}: use '/'-separated parts of letters, digits, '_', '.' "
            "and '-', each starting with a letter, digit or '_'"
        )
    # Each part is a file or directory name below streams/ (the last one gets `.jsonl`).
    *dirs, last = stream.split("/")
    if any(part.endswith(STREAM_SUFFIX) for part in dirs):
        raise InvalidStreamError(f"invalid stream {stream!r}: a part before the last must not "
                                 f"end in {STREAM_SUFFIX!r} (that name is a stream's file)")
    if len(last.encode()) > MAX_PART_BYTES:
        raise InvalidStreamError(f"invalid stream {stream!r}: its last part is longer than "
                                 f"{MAX_PART_BYTES} bytes (with {STREAM_SUFFIX!r} it is a file "
                                 "name, at most 255 bytes)")
    return stream


def topic_filter(pattern: str) -> tuple[str, bool]:
    """Split a topic query into (value, is_prefix).

    `ralph.auth.note` matches that topic only; `ralph.auth.*` matches every topic below
    `ralph.auth.`; `*` matches every topic (an empty prefix).
    """
    if pattern == "*":
        return "", True
    if pattern.endswith(".*"):
        check_topic(pattern[:-2])
        return pattern[:-1], True
    return check_topic(pattern), False


def encode_meta(meta: object) -> bytes:
    """Serialize meta, which must be a JSON object (None means `{}`)."""
    if meta is None:
        return b"{}"
    if not isinstance(meta, dict):
        raise InvalidMetaError(f"meta must be a JSON object, not {type(meta).__name__}")
    try:
        return orjson.dumps(meta)
    except TypeError as exc:
        raise InvalidMetaError(f"meta is not JSON-serializable: {exc}") from None


def parse_meta_json(text: str | bytes) -> dict[str, Any]:
    """Parse meta given as JSON text (the CLI's `--meta`): it must be an object."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise InvalidMetaError(f"meta is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidMetaError(f"meta must be a JSON object, not {_json_kind(value)}")
    return value


def _json_kind(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"


def encode_frame(
    frame_id: str, seq: int, ts: str, topic: str, stream: str, meta_json: bytes, hash_: str | None
) -> bytes:
    """One frame as its stream-file line. Topic, stream, id, ts and hash hold no JSON specials."""
    hash_json = b"null" if hash_ is None else b'"%s"' % hash_.encode()
    return b'{"id":"%s","seq":%d,"ts":"%s","topic":"%s","stream":"%s","meta":%s,"hash":%s}\n' % (
        frame_id.encode(), seq, ts.encode(), topic.encode(), stream.encode(), meta_json, hash_json
    )


class LineError(ValueError):
    """A stream-file line that is not a valid frame."""


def decode_line(line: bytes, stream: str) -> tuple[str, int, str, str, dict[str, Any], str | None]:
    """Parse and check one stream-file line: (id, seq, ts, topic, meta, hash).

    Raises LineError with a short reason; the caller records it as a parse error.
    """
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise LineError(f"not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise LineError("not a JSON object")
    frame_id = obj.get("id")
    seq = obj.get("seq")
    ts = obj.get("ts")
    topic = obj.get("topic")
    meta = obj.get("meta")
    hash_ = obj.get("hash")
    if not isinstance(frame_id, str) or _ID.fullmatch(frame_id) is None:
        raise LineError("id is not a SCRU128 string")
    if not isinstance(seq, int) or isinstance(seq, bool) or not 1 <= seq <= MAX_SEQ:
        raise LineError(f"seq is not an integer from 1 to {MAX_SEQ}")
    if not isinstance(ts, str) or len(ts) != 24:
        raise LineError("ts is not an ISO-8601 UTC timestamp with milliseconds")
    if not isinstance(topic, str) or _TOPIC.fullmatch(topic) is None or len(topic) > MAX_NAME_BYTES:
        raise LineError("topic is missing or invalid")
    if obj.get("stream", stream) != stream:
        raise LineError(f"stream field {obj.get('stream')!r} does not match its file")
    if not isinstance(meta, dict):
        raise LineError("meta is not a JSON object")
    if hash_ is not None and (not isinstance(hash_, str) or _SRI.fullmatch(hash_) is None):
        raise LineError("hash is neither null nor an SRI sha256 string")
    return frame_id, seq, ts, topic, meta, hash_


_ts_cache: tuple[int, str] = (-1, "")


def format_ts(ms: int) -> str:
    """UTC ISO-8601 with milliseconds, e.g. `2026-11-22T01:43:24.123Z`."""
    global _ts_cache  # noqa: PLW0603 - a one-entry cache of the formatted second
    sec, milli = divmod(ms, 1000)
    cached_sec, prefix = _ts_cache
    if cached_sec != sec:
        prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
        _ts_cache = (sec, prefix)
    return f"{prefix}.{milli:03d}Z"


def parse_ts_ms(ts: str) -> int:
    """Milliseconds since the epoch of a frame timestamp (or any ISO-8601 time; naive means UTC)."""
    try:
        moment = datetime.fromisoformat(ts)
    except ValueError:
        raise ValueError(f"not an ISO-8601 time: {ts!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return round(moment.timestamp() * 1000)


def sri_from_digest(digest: bytes) -> str:
    return "sha256-" + base64.b64encode(digest).decode()


def digest_from_sri(hash_: object) -> bytes:
    """The raw sha256 digest named by an SRI string; InvalidHashError if it is not one."""
    if not isinstance(hash_, str) or _SRI.fullmatch(hash_) is None:
        raise InvalidHashError(f"invalid content hash {hash_!r}: expected sha256-<base64 digest>")
    return base64.b64decode(hash_[7:])

"""The head file: the append lock, the last seq handed out, and the pending frame's place.

`<store>/head` is a fixed-size JSON line, rewritten in place with pwrite:
`{"v":1,"seq":K,"gen":G,"boot":B,"stream":T,"offset":O}`. With `stream`/`offset` it says
"frame K is being written at offset O of stream T" (still to be confirmed by the next
writer); without them, "K is the last committed seq". `gen` changes whenever stream files
were rewritten or repaired, telling every process to drop its cached descriptors. `boot` is
the kernel's boot id: a head from before a reboot is not trusted.

`<store>/seq_floor` holds a seq that is never to be handed out again (gc writes it, fsynced,
before removing frames): recounting from the stream tails never goes below it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import orjson

HEAD_SIZE = 1024
HEAD_VERSION = 1


def _read_boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


BOOT_ID = _read_boot_id()


@dataclass(frozen=True)
class Head:
    """The decoded head: `seq` is the last seq handed out; `pending` its unconfirmed place."""

    seq: int
    gen: int
    boot: str
    pending: tuple[str, int] | None

    def encode(self) -> bytes:
        body: dict[str, object] = {"v": HEAD_VERSION, "seq": self.seq, "gen": self.gen,
                                   "boot": self.boot}
        if self.pending is not None:
            body["stream"], body["offset"] = self.pending
        return orjson.dumps(body).ljust(HEAD_SIZE - 1) + b"\n"

    @classmethod
    def decode(cls, raw: bytes) -> Head | None:
        try:
            body = orjson.loads(raw)
            if body.get("v") != HEAD_VERSION:
                return None
            pending = (str(body["stream"]), int(body["offset"])) if "stream" in body else None
            return cls(int(body["seq"]), int(body["gen"]), str(body["boot"]), pending)
        except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError):
            return None


_PENDING_HEAD = b'{"v":%d,"seq":%%d,"gen":%%d,"boot":"%s","stream":"%%s","offset":%%d}' % (
    HEAD_VERSION, BOOT_ID.encode())


def pending_head(seq: int, gen: int, stream: str, offset: int) -> bytes:
    """Head(...).encode() for a pending frame, formatted directly (the append path's version)."""
    return (_PENDING_HEAD % (seq, gen, stream.encode(), offset)).ljust(HEAD_SIZE - 1) + b"\n"


def read_seq_floor(root: Path) -> int:
    try:
        return int((root / "seq_floor").read_text().strip() or 0)
    except (OSError, ValueError):
        return 0


def write_seq_floor(root: Path, seq: int) -> None:
    """Durably record that no seq up to `seq` may be handed out again."""
    tmp = root / ".seq_floor.tmp"
    with tmp.open("w") as handle:
        handle.write(f"{seq}\n")
        handle.flush()
        os.fsync(handle.fileno())
    tmp.replace(root / "seq_floor")

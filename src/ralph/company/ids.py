"""Ids as AgentCompany writes them: `<prefix>_<ULID>` (a ULID: 48 bits of milliseconds and
80 random bits in Crockford's base 32, 26 characters, sorting as it was made). Ids made in
one millisecond by one process still sort in the order they were made (the random part of
the last one, plus one), as a monotonic ULID factory does."""

from __future__ import annotations

import os
import re
import threading
import time

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
PREFIXES = ("cmp", "team", "agent", "proj", "task", "ms", "run", "art", "ctx", "share", "rev",
            "help")
_ULID = "[0-9A-HJKMNP-TV-Z]{26}"
ID = re.compile(rf"(?:{'|'.join(PREFIXES)})_{_ULID}")
_RANDOM_BITS = 80


class _Clock:
    """The last ULID made: (milliseconds, random part)."""

    lock = threading.Lock()
    last = (0, 0)


def _encode(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        chars.append(ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def ulid(now_ms: int | None = None) -> str:
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    with _Clock.lock:
        last_ms, last_random = _Clock.last
        if ms <= last_ms:  # the same millisecond (or the clock went back): keep the order
            ms, random = last_ms, last_random + 1
            if random >> _RANDOM_BITS:
                ms, random = ms + 1, int.from_bytes(os.urandom(10), "big")
        else:
            random = int.from_bytes(os.urandom(10), "big")
        _Clock.last = (ms, random)
    return _encode(ms, 10) + _encode(random, 16)


def new_id(prefix: str) -> str:
    if prefix not in PREFIXES:
        raise ValueError(f"unknown id prefix {prefix!r}: one of {', '.join(PREFIXES)}")
    return f"{prefix}_{ulid()}"


def is_id(value: str, prefix: str | None = None) -> bool:
    """`value` is an id (of `prefix`, when given)."""
    if not ID.fullmatch(value):
        return False
    return prefix is None or value.startswith(prefix + "_")

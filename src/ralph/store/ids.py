"""Frame ids: SCRU128 (25 base-36 digits, time-sortable), generated on the append path.

The scru128 package supplies the generator's state machine (monotonic counters, clock
rollback); its string conversion costs several microseconds, a fifth of an append, so the
base-36 encoding here does the same work with a table of digit triples.
"""

from __future__ import annotations

import random
import time

import scru128

_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"
_TRIPLES = [a + b + c for a in _DIGITS for b in _DIGITS for c in _DIGITS]  # 46,656 strings
_D12 = 36**12
_D6 = 36**6
_D3 = 36**3
_ROLLBACK_ALLOWANCE_MS = 10_000


def encode_base36(value: int) -> str:
    """A 128-bit integer as the 25-digit SCRU128 string (1 digit, then 8 groups of 3)."""
    high, low = divmod(value, _D12)
    first, high = divmod(high, _D12)
    h1, h2 = divmod(high, _D6)
    l1, l2 = divmod(low, _D6)
    a, b = divmod(h1, _D3)
    c, d = divmod(h2, _D3)
    e, f = divmod(l1, _D3)
    g, h = divmod(l2, _D3)
    t = _TRIPLES
    return _DIGITS[first] + t[a] + t[b] + t[c] + t[d] + t[e] + t[f] + t[g] + t[h]


class IdGenerator:
    """Not thread-safe: the writer calls it with its lock held."""

    def __init__(self) -> None:
        # Seeded from os.urandom. A Store refuses to work across fork(), so a child never
        # continues this sequence.
        self._gen = scru128.Scru128Generator(rng=random.Random())

    def next(self) -> tuple[str, int]:
        """(id, its timestamp in ms)."""
        frame_id = self._gen.generate_or_reset_core(time.time_ns() // 1_000_000,
                                                    _ROLLBACK_ALLOWANCE_MS)
        return encode_base36(int(frame_id)), frame_id.timestamp

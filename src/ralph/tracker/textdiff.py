"""Where two versions of a text differ: their common start and end, found at C speed.

The tracker file changes a little between reads (an agent ticks one box), so only the lines
between the common prefix and the common suffix need parsing again.
"""

from __future__ import annotations

_CHUNK = 4096  # compared a slice at a time: one C comparison each, few slices per file


def common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix of `a` and `b`."""
    limit = min(len(a), len(b))
    start = 0
    while start < limit:
        end = min(start + _CHUNK, limit)
        if a[start:end] != b[start:end]:
            return start + _first_difference(a[start:end], b[start:end])
        start = end
    return limit


def common_affixes(a: str, b: str) -> tuple[int, int]:
    """(prefix, suffix): the lengths of the common start and of the common end that does not
    overlap it, so that `a[prefix:len(a) - suffix]` became `b[prefix:len(b) - suffix]`."""
    prefix = common_prefix(a, b)
    room = min(len(a), len(b)) - prefix
    suffix = 0
    while suffix < room:
        size = min(_CHUNK, room - suffix)
        tail_a = a[len(a) - suffix - size:len(a) - suffix]
        tail_b = b[len(b) - suffix - size:len(b) - suffix]
        if tail_a != tail_b:
            return prefix, suffix + _last_difference(tail_a, tail_b)
        suffix += size
    return prefix, suffix


def _first_difference(a: str, b: str) -> int:
    """The index of the first differing character of two equally long, different slices
    (binary search on the slices' prefixes)."""
    low, high = 0, len(a)  # a[:low] == b[:low]; a[:high] != b[:high]
    while high - low > 1:
        middle = (low + high) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle
    return low


def _last_difference(a: str, b: str) -> int:
    """How many characters at the end of two equally long, different slices are equal."""
    low, high = 0, len(a)  # a[len-low:] == b[len-low:]; the last `high` differ somewhere
    while high - low > 1:
        middle = (low + high) // 2
        if a[len(a) - middle:] == b[len(b) - middle:]:
            low = middle
        else:
            high = middle
    return low

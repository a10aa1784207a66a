"""The orchestrator's guard, and the /proc primitives containment is built on.

Run as `python -I -S procguard.py OWNER` (stdlib only: it must start in ~10 ms without
site-packages), with stdin the read end of a pipe whose only write end the orchestrator
holds (close-on-exec, closed in forked children). The orchestrator writes `+PGID` / `-PGID`
lines as contained children start and end. When the pipe reaches EOF the orchestrator is gone
(whatever the cause: normal exit, exception, exec, SIGKILL, the OOM killer), and the guard
ends everything the orchestrator ran contained:

- every process whose environment carries one of OWNER's markers (`RALPH_OWNER` holds a
  comma-separated list of `OWNER:SEQ` items, one per nested orchestrator), and its group;
- every recorded group (the only part that works without /proc, e.g. on macOS);

with SIGTERM, up to `_GUARD_GRACE_S` to go, then SIGKILL, rescanning until none is left
(a process forking meanwhile is found by the next scan), then exits. A normal exit finds
nothing left and costs one scan of /proc.

The guard lives in a session of its own and holds none of the orchestrator's stdio or pipes.
It does not use PR_SET_PDEATHSIG: that fires when the *thread* that forked it ends, not the
process, and pipe EOF is exact.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterable

OWNER_ENV = "RALPH_OWNER"
"""The environment variable that marks a contained child and everything it starts."""

_ENV_PREFIX = OWNER_ENV.encode() + b"="
_ZOMBIE = (b"Z", b"X")
_GUARD_GRACE_S = 1.0
_GUARD_TIMEOUT_S = 4.5
_POLL_S = 0.01

Stat = tuple[bytes, int, int, int]
"""(state, ppid, pgrp, session) from /proc/PID/stat."""


def proc_stat(pid: int | str) -> Stat | None:
    """State, parent, group and session of `pid`; None once it is gone (or unreadable)."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        data = os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        # The command name may hold spaces and parentheses: split after the last ")".
        fields = data.rsplit(b")", 1)[1].split()
        return fields[0], int(fields[1]), int(fields[2]), int(fields[3])
    except (IndexError, ValueError):
        return None


def read_environ(pid: int | str) -> bytes | None:
    """The environment `pid` was started with (NUL-separated); None for a zombie, a process
    that is gone or one we may not read (another user's)."""
    try:
        fd = os.open(f"/proc/{pid}/environ", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        chunks = []
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return b"".join(chunks)


def owner_items(environ: bytes) -> list[bytes]:
    """The `OWNER:SEQ` items of the `RALPH_OWNER` variable in a NUL-separated environment."""
    if environ.startswith(_ENV_PREFIX):
        start = len(_ENV_PREFIX)
    else:
        at = environ.find(b"\0" + _ENV_PREFIX)
        if at < 0:
            return []
        start = at + 1 + len(_ENV_PREFIX)
    end = environ.find(b"\0", start)
    return environ[start:end if end >= 0 else len(environ)].split(b",")


def matcher(query: str) -> tuple[bytes, bool]:
    """(needle, exact): `OWNER:SEQ` matches that item only, `OWNER` every item of that owner."""
    if not query or "," in query or "=" in query:
        raise ValueError(f"not an owner id or marker: {query!r}")
    if ":" in query:
        return query.encode(), True
    return query.encode() + b":", False


def carries(environ: bytes, needle: bytes, exact: bool) -> bool:
    if needle not in environ:  # the fast path: a substring search in C
        return False
    items = owner_items(environ)
    if exact:
        return needle in items
    return any(item.startswith(needle) for item in items)


def have_proc() -> bool:
    return proc_stat(os.getpid()) is not None


def pids() -> list[str]:
    """The process ids /proc lists (as strings), none without /proc."""
    try:
        with os.scandir("/proc") as scan:
            return [entry.name for entry in scan if entry.name.isdigit()]
    except OSError:
        return []


def signal_process(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def signal_group(pgid: int, sig: int) -> None:
    """killpg, never for ids 0 and 1 nor our own group (a recycled id must not hit us)."""
    if pgid <= 1 or pgid == os.getpgrp():
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def scan_owned(needle: bytes, exact: bool, groups: Iterable[int] = ()) -> list[tuple[int, int]]:
    """(pid, pgid) of every running process carrying the marker or in one of `groups`, by one
    pass over /proc (zombies do not count; this process never does)."""
    groups = set(groups)
    me = os.getpid()
    found = []
    for name in pids():
        if int(name) == me:
            continue
        stat = proc_stat(name)
        if stat is None or stat[0] in _ZOMBIE:
            continue
        if stat[2] in groups:
            found.append((int(name), stat[2]))
            continue
        environ = read_environ(name)
        if environ is not None and carries(environ, needle, exact):
            found.append((int(name), stat[2]))
    return found


def end_owned(query: str, *, groups: Iterable[int] = (), grace_s: float = 0.0,
              timeout_s: float = 5.0) -> list[int]:
    """End every process carrying `query`'s marker (see `matcher`) and every member of
    `groups`, with their groups: SIGTERM and up to `grace_s` to go (0: SIGKILL at once), then
    SIGKILL, rescanning until none is running or `timeout_s` has passed. The pids found.

    Without /proc (macOS) only `groups` can be found, and a group with only zombies left
    still counts as alive (its orphans are reaped by launchd there).
    """
    needle, exact = matcher(query)
    groups = {g for g in groups if g > 1}
    procfs = have_proc()
    start = time.monotonic()
    sig: int = signal.SIGTERM if grace_s > 0 else signal.SIGKILL
    seen: set[int] = set()
    termed: set[int] = set()  # SIGTERM goes once to each; SIGKILL again on every pass
    while True:
        if procfs:
            found = scan_owned(needle, exact, groups)
        else:
            found = [(g, g) for g in groups if _group_exists(g)]
        if not found:
            break
        elapsed = time.monotonic() - start
        if elapsed >= timeout_s:
            break
        if elapsed >= grace_s:
            sig = signal.SIGKILL
        seen.update(pid for pid, _ in found)
        for pid, pgid in [*found, *((0, g) for g in groups)]:
            key = pid or -pgid
            if sig == signal.SIGTERM and key in termed:
                continue
            termed.add(key)
            if pid:
                signal_process(pid, sig)
            signal_group(pgid, sig)
        time.sleep(_POLL_S)
    return sorted(seen)


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def main(argv: list[str]) -> int:
    """Wait for EOF on stdin, keeping track of the `+PGID`/`-PGID` lines; then end it all."""
    if len(argv) != 2:
        print("usage: procguard.py OWNER", file=sys.stderr)
        return 2
    owner = argv[1]
    matcher(owner)  # reject a bad owner id now, not after the orchestrator died
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    groups: set[int] = set()
    pending = b""
    while True:
        try:
            chunk = os.read(0, 4096)
        except OSError:
            break
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            try:
                pgid = int(line[1:])
            except ValueError:
                continue
            if line.startswith(b"+"):
                groups.add(pgid)
            else:
                groups.discard(pgid)
    end_owned(owner, groups=groups, grace_s=_GUARD_GRACE_S, timeout_s=_GUARD_TIMEOUT_S)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

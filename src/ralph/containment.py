"""Containment: when a child ends, so does everything it started, even what left its group.

A process group is not enough: `setsid`, a double fork or a daemonizing tool leaves it, and
a SIGKILLed orchestrator leaves all of it running. A contained child (`run_process(...,
contain=True)`, the agent server) therefore gets three more things; uncontained children
(git, many per iteration) pay for none of them.

- **A marker.** Its environment gets `RALPH_OWNER=<owner>:<seq>`, `<owner>` unique to this
  orchestrator process (`owner_id()`), `<seq>` to the child. Every descendant inherits it,
  whatever session or group it moves to; /proc/PID/environ shows the environment a process
  was *started* with, so unsetting the variable in-process does not hide it. An orchestrator
  run inside a contained child (Ralph's tests run as a gate) appends its own item
  (`outer,inner`), so the outer containment still holds. Several orchestrators on a machine
  each have their own owner id and guard; a sweep ends only its child's exact marker.
- **The subreaper** (Linux, set on the first contained child): the orchestrator calls
  `prctl(PR_SET_CHILD_SUBREAPER)`, so an orphan anywhere below it is reparented to it instead
  of init. Whatever a contained child left is then a direct child of ours or below a marked
  one, so the end-of-call sweep (`Contained.sweep`) reads only our direct children and the
  subtrees of what it ends (/proc/PID/task/TID/children; ~15 us, plus ~20 us per direct
  child), not every process. It ends every running process carrying the child's exact marker,
  in the child's session, or below one of those, with SIGKILL to each and to its group (as
  `run_process` treats what is left in the group), rescanning until none runs. The orphans we
  adopt we reap by pid, never waitpid(-1) (asyncio's ThreadedChildWatcher waits per pid and
  must get its statuses): those we killed, those seen alive with one of our markers, the
  leader of a session or group that held what we killed, and any zombie child in a session it
  does not lead and that is not ours (no child we forked can be in one). Orphans of
  uncontained children (a detached `git gc --auto`) are adopted too; they run on untouched.
- **The guard** (`ralph.procguard`): one small process per orchestrator, started on the first
  contained child, detached through `sh -c '... &'` while we are not a subreaper (so it is
  not our child: nothing to reap, and not among "our children" for tests that count them),
  in a session of its own, with none of our stdio, reading a pipe whose only write end we
  hold (close-on-exec, non-blocking; a forked child of ours closes it, see
  `_forget_after_fork`). At EOF (the orchestrator died, however: exit, exception, exec,
  SIGKILL, OOM) it ends every process carrying one of our markers, with their groups, and the
  groups of the contained children still running: SIGTERM, up to 1 s, SIGKILL; then exits.
  It costs us ~5-10 ms once (the shell, and ctypes for prctl); the guard takes ~10 ms to
  start and ~9 MB resident; per child, one short write to the pipe at its start and end. A
  dead guard is noticed (the write end polls POLLERR) and replaced at the next contained
  child. PR_SET_PDEATHSIG is not used: it fires when the *thread* that forked ends.

Limits. A process that both starts with the marker scrubbed (`env -i`) and leaves the child's
session, and is no longer below a marked process when the call ends, escapes the sweep; so
does a setuid program's environment, which we cannot read (it is still caught by session
or ancestry). An adopted orphan that leads its own session and exits by itself before any
sweep saw it stays a zombie until the orchestrator exits: a child forked with
`start_new_session` by other code of ours looks the same, and reaping that would steal its
status. Processes handed to another supervisor (systemd-run, a container runtime, ssh) are
out of reach. Cgroups would close the first gap but are not used: creating one needs a
delegated hierarchy (root, or systemd's user delegation, not where Ralph usually runs), and
moving a child into it before it can fork needs a preexec_fn (unsafe with threads, and no
vfork) or a wrapper process per child.

Without /proc (macOS) only process groups are ended: at the end of a call (the group kill in
`run_process`) and by the guard when the orchestrator dies (it tracks the contained
children's groups). A daemon that left the group keeps running there, and `kill_owned`
finds nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ralph import procguard
from ralph.procguard import OWNER_ENV, carries, proc_stat, read_environ

__all__ = ["OWNER_ENV", "Contained", "kill_owned", "owner_id"]

log = logging.getLogger("ralph.proc")

_PR_SET_CHILD_SUBREAPER = 36
_ZOMBIE = (b"Z", b"X")
_POLL_S = 0.005
"""How often a sweep looks again while what it killed is still dying."""
_KILL_WAIT_S = 5.0
"""Longest a sweep waits for what it killed to die before reporting it and moving on."""

_GUARD_STARTS = 5
"""A guard that keeps dying is not started a sixth time (one warning each time)."""

_Targets = dict[int, tuple[int, int]]
"""pid -> (pgid, session) of the processes a sweep ends."""


@dataclass
class _State:
    """This process's containment: created lazily, forgotten in a forked child."""

    owner: str
    seq: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    pid: int = field(default_factory=os.getpid)
    procfs: bool = False
    subreaper: bool = False
    tree: bool = False
    """The subreaper is set and /proc/PID/task/TID/children can be read: sweeps walk our
    children instead of scanning every process."""
    armed: bool = False
    guard_pid: int | None = None
    write_fd: int | None = None
    watch: select.poll | None = None
    """Polls the pipe's write end: POLLERR once the guard (the read end) is gone."""
    guard_starts: int = 0
    spawned: set[int] = field(default_factory=set)
    """Children we started ourselves (contained leaders): never reaped or killed by a sweep,
    whatever they carry: asyncio waits for them."""
    adopted: set[int] = field(default_factory=set)
    """Orphans reparented to us, seen alive with one of our markers: ours to reap."""
    groups: set[int] = field(default_factory=set)
    """Process groups of the contained children running now (the guard's list)."""


class _Module:
    """The module's mutable globals (replaced wholesale in a forked child)."""

    lock = threading.Lock()
    state: _State | None = None


def owner_id() -> str:
    """This orchestrator's owner id: every contained child's marker starts with it.

    Record it (e.g. in the run's state) so that a later process can end what this one left
    if it dies and its guard did not (`kill_owned`).
    """
    return _current().owner


def kill_owned(owner_or_marker: str, *, timeout_s: float = 5.0) -> list[int]:
    """End every process carrying `owner_or_marker`: an owner id (`owner_id()` of a dead
    orchestrator: all it ran contained) or one child's marker (`OWNER:SEQ`). SIGKILL to each
    and its group, rescanning until none is running (zombies do not count) or `timeout_s`
    has passed; returns the pids found. Never signals this process.

    A full scan of /proc (about 20 us per process): for crash recovery, not per call.
    Without /proc (macOS) nothing can be found and the result is empty.
    """
    found = procguard.end_owned(owner_or_marker, timeout_s=timeout_s)
    state = _Module.state
    if state is not None and state.pid == os.getpid():
        _reap_known(state, set(found))
    return found


class Contained:
    """One contained child: its marker and environment, and the sweep when it ends.

    `Contained()` arms containment on first use (subreaper, guard). Then: spawn with `env()`,
    call `started(pid)` once it runs (pid == pgid == sid: it leads its own session), and once
    the child and its group are gone, `await sweep()` and `finished()`.
    """

    def __init__(self) -> None:
        self._state = _armed()
        self.marker = f"{self._state.owner}:{next(self._state.seq)}"
        self.pid: int | None = None

    def env(self, base: Mapping[str, str] | None) -> dict[str, str]:
        """`base` (None: os.environ) with this child's marker added to any outer ones."""
        env = dict(os.environ if base is None else base)
        outer = env.get(OWNER_ENV)
        env[OWNER_ENV] = f"{outer},{self.marker}" if outer else self.marker
        return env

    def started(self, pid: int) -> None:
        self.pid = pid
        state = self._state
        if state.pid != os.getpid():
            return
        state.spawned.add(pid)
        state.groups.add(pid)
        _tell(state, f"+{pid}\n")

    def finished(self) -> None:
        pid, state = self.pid, self._state
        if pid is None or state.pid != os.getpid():
            return
        state.spawned.discard(pid)
        state.groups.discard(pid)
        _tell(state, f"-{pid}\n")

    async def sweep(self) -> bool:
        """End what the child left: every running process carrying its marker, in its
        session or below one of those, with SIGKILL (to each and its group), and wait until
        they are gone, reaping the ones reparented to us. True if cancelled meanwhile (the
        sweep still finishes). Costs one read of our children when nothing is left."""
        if self.pid is None or not self._state.armed:
            return False
        interrupted = False
        killed: set[int] = set()
        sessions: set[int] = set()  # the sessions and groups of what we killed
        deadline = time.monotonic() + _KILL_WAIT_S
        while True:
            try:
                targets = self._find(killed, sessions)
            except Exception:  # a surprise in /proc must not stop the caller's cleanup
                log.exception("cannot look for what child %d left", self.pid)
                break
            if not targets:
                break
            if time.monotonic() >= deadline:
                log.warning("processes left by child %d still running after SIGKILL: %s",
                            self.pid, sorted(targets))
                break
            for pid, (pgid, sid) in targets.items():
                procguard.signal_process(pid, signal.SIGKILL)
                procguard.signal_group(pgid, signal.SIGKILL)
                sessions.update((pgid, sid))
            killed.update(targets)
            try:
                await asyncio.sleep(_POLL_S)
            except asyncio.CancelledError:
                interrupted = True
        if killed:
            log.debug("ended %d process(es) left by child %d", len(killed), self.pid)
        return interrupted

    def _find(self, killed: set[int], sessions: set[int]) -> _Targets:
        """The running processes the sweep must end now; reaps our adopted zombies."""
        assert self.pid is not None
        state, session = self._state, self.pid
        needle = self.marker.encode()
        targets: _Targets = {}
        # The killed ones first: once none of them runs, every orphan they left has been
        # reparented (a process becomes a zombie only after giving its children away), so
        # the read of our children below sees it.
        for pid in killed:
            stat = proc_stat(pid)
            if stat is not None and stat[0] not in _ZOMBIE:
                targets[pid] = stat[2], stat[3]
                if state.tree:
                    _add_subtree(pid, targets)
        if not state.procfs:
            return targets
        if not state.tree:
            return _scan_all(state, needle, session, targets)
        owner = state.owner.encode() + b":"
        my_sid = os.getsid(0)
        for child in _children(os.getpid()):
            if child in state.spawned or child in targets:
                continue
            stat = proc_stat(child)
            if stat is None:
                continue
            status, _, pgrp, sid = stat
            if status in _ZOMBIE:
                # Ours to reap, as certainly not forked by us: what we killed, what carried
                # our marker, the guard, a process in a session it does not lead and that is
                # not ours, and the leader of a session or group that held what we killed.
                if (child in killed or child in state.adopted or child == state.guard_pid
                        or sid not in (child, my_sid) or child in sessions):
                    _reap(state, child)
                continue
            if child == state.guard_pid:
                continue
            environ = read_environ(child)
            if environ is not None and carries(environ, owner, exact=False):
                state.adopted.add(child)
            if session in (sid, pgrp) or (
                    environ is not None and carries(environ, needle, exact=True)):
                targets[child] = pgrp, sid
                _add_subtree(child, targets)
        return targets


def _armed() -> _State:
    """The current state with a live guard (restarted if it died) and the subreaper set."""
    with _Module.lock:
        state = _current_locked()
        if state.guard_starts < _GUARD_STARTS and (state.watch is None or state.watch.poll(0)):
            if state.guard_pid is not None:
                log.warning("the guard process %d is gone; starting another", state.guard_pid)
            # Not as a subreaper, so that the guard is orphaned to init: not our child. (A
            # restart clears the flag for those ~3 ms: an orphan made meanwhile is missed by
            # the end-of-call sweep, not by the guard.)
            if state.subreaper:
                _set_subreaper(False)
            _start_guard(state)
            if state.subreaper:
                _set_subreaper(True)
        if not state.armed:
            state.procfs = procguard.have_proc()
            state.subreaper = state.procfs and _set_subreaper(True)
            if state.procfs and not state.subreaper:
                log.warning("cannot become a child subreaper; leftovers are found by "
                            "scanning /proc")
            me = os.getpid()
            state.tree = state.subreaper and Path(f"/proc/{me}/task/{me}/children").exists()
            state.armed = True
        return state


def _current() -> _State:
    with _Module.lock:
        return _current_locked()


def _current_locked() -> _State:
    state = _Module.state
    if state is None or state.pid != os.getpid():
        state = _Module.state = _State(owner=f"{os.getpid()}-{os.urandom(4).hex()}")
    return state


def _set_subreaper(on: bool) -> bool:
    """prctl(PR_SET_CHILD_SUBREAPER); True if it worked."""
    if sys.platform != "linux":
        return False
    try:
        import ctypes  # noqa: PLC0415 - only where and when containment is used

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _start_guard(state: _State) -> None:
    """Start the guard, detached, with a fresh pipe, and tell it the groups running now.

    `sh` starts it in the background and exits at once (we wait for that, ~3 ms, once), so
    the guard is orphaned (to init, or to a subreaper above us).
    """
    if state.write_fd is not None:
        with contextlib.suppress(OSError):
            os.close(state.write_fd)
    state.write_fd = state.watch = state.guard_pid = None
    state.guard_starts += 1
    script = Path(procguard.__file__)
    if not sys.executable or not script.is_file():
        log.warning("no guard process (no interpreter or no %s): children of a killed "
                    "orchestrator will outlive it", script)
        return
    read_fd, write_fd = os.pipe()  # both close-on-exec: no child inherits them
    # The read end is the shell's stdin and, by an explicit redirection, the guard's (a
    # background job's stdin would otherwise be /dev/null); nothing else of ours is open in
    # the guard. (Through fd 3: dash takes no fd number above 9.)
    command = 'exec 3<&0; "$@" <&3 3<&- >/dev/null 2>&1 & echo $!'
    try:
        shell = subprocess.run(
            ["/bin/sh", "-c", command, "sh", sys.executable, "-I", "-S", str(script),
             state.owner],
            stdin=read_fd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            cwd="/", start_new_session=True, timeout=30, check=True)
        guard_pid = int(shell.stdout)
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        os.close(write_fd)
        log.warning("cannot start the guard process (%s): children of a killed "
                    "orchestrator will outlive it", exc)
        return
    finally:
        os.close(read_fd)
    os.set_blocking(write_fd, False)
    watch = select.poll()
    watch.register(write_fd, 0)  # POLLERR and POLLHUP are always reported
    state.write_fd, state.watch, state.guard_pid = write_fd, watch, guard_pid
    if state.groups:
        _tell(state, "".join(f"+{pgid}\n" for pgid in state.groups))


def _tell(state: _State, message: str) -> None:
    """Send the guard a line; never blocks (a stuck guard loses it; the marker scan remains)."""
    if state.write_fd is None:
        return
    with contextlib.suppress(OSError):
        os.write(state.write_fd, message.encode())


def _children(pid: int) -> list[int]:
    """The children of `pid` (of all its threads: a child belongs to the thread that forked
    it; orphans are adopted by the first live thread)."""
    try:
        with os.scandir(f"/proc/{pid}/task") as scan:
            tasks = [entry.name for entry in scan]
    except OSError:
        return []
    found: list[int] = []
    for tid in tasks:
        try:
            fd = os.open(f"/proc/{pid}/task/{tid}/children", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            found.extend(int(word) for word in os.read(fd, 1 << 16).split())
        except OSError:
            pass
        finally:
            os.close(fd)
    return found


def _add_subtree(pid: int, targets: _Targets) -> None:
    """Add the running descendants of `pid` to `targets`: what a leftover started is left."""
    stack = _children(pid)
    while stack:
        child = stack.pop()
        stat = proc_stat(child)
        if stat is None or child in targets:
            continue
        if stat[0] not in _ZOMBIE:
            targets[child] = stat[2], stat[3]
        stack.extend(_children(child))


def _scan_all(state: _State, needle: bytes, session: int, targets: _Targets) -> _Targets:
    """The fallback without the subreaper's tree: one pass over every process."""
    me = os.getpid()
    for name in procguard.pids():
        pid = int(name)
        if pid == me or pid in state.spawned or pid in targets:
            continue
        stat = proc_stat(pid)
        if stat is None or stat[0] in _ZOMBIE:
            continue
        environ = None
        if session not in (stat[2], stat[3]):
            environ = read_environ(pid)
            if environ is None or not carries(environ, needle, exact=True):
                continue
        targets[pid] = stat[2], stat[3]
    return targets


def _reap(state: _State, pid: int) -> None:
    """Collect one zombie child of ours that nobody else waits for."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    state.adopted.discard(pid)


def _reap_known(state: _State, pids: set[int]) -> None:
    """Reap those of `pids` that are zombie children of ours and certainly adopted (a child
    the caller forked itself keeps its status for the caller's wait)."""
    me, my_sid = os.getpid(), os.getsid(0)
    for pid in pids - state.spawned:
        stat = proc_stat(pid)
        if (stat is not None and stat[0] in _ZOMBIE and stat[1] == me
                and (pid in state.adopted or stat[3] not in (pid, my_sid))):
            _reap(state, pid)


def _forget_after_fork() -> None:
    """In a forked child: drop the parent's containment (its guard, its pipe's write end,
    which would otherwise keep the guard from seeing the parent die)."""
    _Module.lock = threading.Lock()
    state, _Module.state = _Module.state, None
    if state is None:
        return
    if state.write_fd is not None:
        with contextlib.suppress(OSError):
            os.close(state.write_fd)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)

"""Owned child processes: every program Ralph starts is supervised here (Principle 4).

Agents, gates and git all run through `run_process`, so the rules hold everywhere:

- The child gets its own session and process group (`start_new_session=True`, pgid == pid),
  so that one signal to the group reaches everything it started, and a Ctrl-C meant for Ralph's
  terminal does not reach it behind our back.
- Every call has a deadline (`timeout_s`, which callers must pass, even if only `None`). Timeout
  and cancellation end the group the same way: SIGTERM, `grace_s` to exit, then SIGKILL.
- When the leader exits by itself, whatever it left running in its group (background children)
  is killed with SIGKILL, so nothing outlives the call. A program that double-forks into a new
  session of its own has left the group and escapes this, unless the call is *contained*.
- `contain=True` (agents, gates, judges, reviewers: not git, which must stay cheap) also ends
  what left the group, and what a SIGKILLed orchestrator left (`ralph.containment`): the child
  and all its descendants carry a marker in their environment (`RALPH_OWNER`); on Linux the
  orchestrator becomes a child subreaper, so that every orphan is reparented to it, and when
  the call ends, every process still carrying the child's marker (or in its session, or below
  one of those) is killed with SIGKILL, with its group, and reaped; a guard process per
  orchestrator ends everything marked when the orchestrator dies, even by SIGKILL. Costs about
  0.15 ms per call (more only when something is left to kill), and ~10 ms once. Without /proc
  (macOS) containment is the group kill only, at the end of the call and by the guard: a
  daemon that left the group survives there.
- Output is streamed, never accumulated (Principle 5): each chunk goes to the caller's sink and
  to the log file as it arrives, and the result keeps only a bounded tail. Log writes happen in a
  worker thread so that a slow disk never stalls the event loop; when the writer falls behind,
  the pipes are paused and the child blocks on its own writes instead of our memory growing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, Literal

from ralph.containment import OWNER_ENV, Contained, kill_owned, owner_id
from ralph.errors import RalphError

__all__ = [
    "OWNER_ENV",
    "OutputSink",
    "ProcessError",
    "ProcessResult",
    "cancelled_result",
    "group_alive",
    "kill_group",
    "kill_owned",
    "owner_id",
    "run_process",
    "run_shell",
]

log = logging.getLogger("ralph.proc")

StreamName = Literal["stdout", "stderr"]
OutputSink = Callable[[StreamName, bytes], None]
"""Called in the event loop with each chunk as it arrives; must be quick and must not block."""

_LOG_HIGH_WATER = 1 << 20
"""Bytes queued for the log writer at which the pipes are paused."""
_POLL_S = 0.02
"""How often the group is checked while it has its grace period after SIGTERM."""
_KILL_WAIT_S = 5.0
"""Longest wait for SIGKILLed processes to disappear before reporting them and moving on."""
_MIN_DRAIN_S = 1.0
"""Least time given to the pipes to reach EOF once the group is dead (see `_settle`)."""
_RESULT_ATTR = "_ralph_process_result"


class ProcessError(RalphError):
    """A child could not be started (no such program, not executable, no working directory),
    or its output could not be logged."""


@dataclass(frozen=True)
class ProcessResult:
    """What happened to one child. Small and bounded whatever the child printed."""

    argv: list[str]
    cwd: str
    exit_code: int | None
    """None when we ended the child (timeout or cancellation); otherwise its exit status, or
    the negative signal number when a signal not sent by us killed it (asyncio's convention)."""
    started_at: str
    """UTC ISO-8601 with milliseconds and a `Z`, as every Ralph timestamp."""
    finished_at: str
    duration_s: float
    timed_out: bool
    cancelled: bool
    pid: int
    """Also the process group id: the child leads its own group."""
    output_bytes: int
    """Total bytes seen on stdout and stderr together."""
    tail: bytes
    """The last `tail_bytes` of stdout and stderr interleaved in arrival order."""


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> bool:
    """Send `sig` to every process in group `pgid`; True if it reached at least one.

    A group that no longer exists (or is not ours to signal) is not an error: killing is how
    callers clean up, and cleaning up twice must be harmless. Our own group is never
    signalled (False): a pgid recorded by an earlier run may have been recycled for Ralph
    itself. Ids 0 and 1 are refused (ValueError): `killpg` would hit Ralph's group or init's.
    """
    if pgid <= 1:
        raise ValueError(f"refusing to signal process group {pgid}")
    if pgid == os.getpgrp():
        log.warning("not signalling process group %d: it is Ralph's own", pgid)
        return False
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def process_runs(pid: int) -> bool:
    """`pid` is a running process (a zombie does not count)."""
    if pid <= 0:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b") ", 1)[1][:1] != b"Z"
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def group_alive(pgid: int) -> bool:
    """True while some process of group `pgid` is still running.

    Zombies do not count: in containers whose init never reaps orphans, the killed members of
    a group stay zombies forever, and waiting for them to vanish would never end. On systems
    without /proc any member the kernel still knows about counts.
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with os.scandir("/proc") as scan:
            entries = [entry.name for entry in scan if entry.name.isdigit()]
    except OSError:
        return True
    for entry in entries:
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # Fields after the command name: state, ppid, pgrp, ...
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


def cancelled_result(exc: BaseException) -> ProcessResult | None:
    """The result of the child that a cancelled `run_process` ended, if `exc` carries one.

    `run_process` re-raises the CancelledError it received, so it cannot return its result;
    it attaches it to that exception instead. A caller that records stops can catch the
    CancelledError in the awaiting task, read the result (tail, duration) here, and re-raise.
    """
    result = getattr(exc, _RESULT_ATTR, None)
    return result if isinstance(result, ProcessResult) else None


async def run_shell(
    command: str,
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    stdin_data: bytes | None = None,
    timeout_s: float | None,
    on_output: OutputSink | None = None,
    log_path: Path | None = None,
    tail_bytes: int = 65536,
    grace_s: float = 3.0,
    on_start: Callable[[int], None] | None = None,
    contain: bool = False,
) -> ProcessResult:
    """`run_process(["/bin/sh", "-c", command], ...)`: gates are written as shell commands."""
    return await run_process(
        ["/bin/sh", "-c", command], cwd=cwd, env=env, stdin_data=stdin_data,
        timeout_s=timeout_s, on_output=on_output, log_path=log_path, tail_bytes=tail_bytes,
        grace_s=grace_s, on_start=on_start, contain=contain,
    )


async def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    stdin_data: bytes | None = None,
    timeout_s: float | None,
    on_output: OutputSink | None = None,
    log_path: Path | None = None,
    tail_bytes: int = 65536,
    grace_s: float = 3.0,
    on_start: Callable[[int], None] | None = None,
    contain: bool = False,
) -> ProcessResult:
    """Run `argv` in `cwd` as an owned child and return what happened once nothing is left.

    `on_start(pid)` is called once the child runs: its pid is also its process group id, which
    a caller can record so that a later process can end the group if this one dies.

    `env` is merged over `os.environ` (None: inherit it as is). `stdin_data` is written to the
    child's stdin, which is then closed (None: stdin is /dev/null); a child that exits without
    reading it is fine. Output goes to `on_output` and is appended to `log_path` (parent
    directories created) chunk by chunk. A non-zero exit is a result, not an error.

    `contain=True` ends, besides the group, everything the child started that left it (a
    `setsid` or double-forked daemon, `nohup ... &`), also if the orchestrator is killed; the
    child's environment then has `RALPH_OWNER` (see the module docstring).

    Raises ProcessError when the program cannot be started or the log cannot be written (the
    child is then ended first), whatever `on_output` raises (likewise), and re-raises
    CancelledError after ending the group and reaping the child (`cancelled_result` reads
    the result from it).
    """
    args = list(argv)
    if not args:
        raise ValueError("argv is empty")
    if timeout_s is not None and timeout_s <= 0:
        raise ValueError(f"timeout_s must be positive or None, not {timeout_s}")
    if grace_s < 0 or tail_bytes < 0:
        raise ValueError("grace_s and tail_bytes must not be negative")
    merged_env = None if env is None else {**os.environ, **env}
    contained = Contained() if contain else None
    if contained is not None:
        merged_env = contained.env(merged_env)
    output = _Output(on_output, _open_log(log_path) if log_path is not None else None,
                     log_path, tail_bytes)
    started_at = _utc_now()
    start = time.monotonic()
    transport, protocol, cancel_at_start = await _start(args, cwd, merged_env, stdin_data,
                                                        output)
    pid = transport.get_pid()
    if contained is not None:
        contained.started(pid)
    if on_start is not None:
        on_start(pid)
    if stdin_data is not None:
        _feed_stdin(transport, stdin_data)
    output.start_writer()

    if cancel_at_start is None:
        timed_out, cancel = await _wait_exit(protocol, output, timeout_s)
    else:  # stopped while it was being started: it is ended below, as on any stop
        timed_out, cancel = False, cancel_at_start
    # From here on the cleanup runs to its end; a further cancellation only hurries it.
    killed = not protocol.exited.done()
    interrupted = await _end_child(pid, protocol, grace_s, contained)
    transport.close()
    interrupted |= await output.finish()

    returncode = transport.get_returncode()
    result = ProcessResult(
        argv=args, cwd=str(cwd), exit_code=None if killed else returncode,
        started_at=started_at, finished_at=_utc_now(),
        duration_s=time.monotonic() - start, timed_out=timed_out,
        cancelled=cancel is not None or interrupted, pid=pid,
        output_bytes=output.total, tail=bytes(output.tail),
    )
    if cancel is not None or interrupted:
        error = cancel if cancel is not None else asyncio.CancelledError()
        setattr(error, _RESULT_ATTR, result)
        raise error
    if output.failure is not None:
        raise output.failure
    return result


async def _start(args: list[str], cwd: Path, env: Mapping[str, str] | None,
                 stdin_data: bytes | None, output: _Output
                 ) -> tuple[asyncio.SubprocessTransport, _ChildProtocol,
                            asyncio.CancelledError | None]:
    """Start the child in its own session; the transport, the protocol, and the
    cancellation received meanwhile, if any (the child runs: the caller ends it)."""
    loop = asyncio.get_running_loop()
    spawn = loop.create_task(loop.subprocess_exec(
        lambda: _ChildProtocol(output), *args,
        stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        cwd=cwd, env=env, start_new_session=True,
    ))
    cancel = await _finished(spawn)
    exc = spawn.exception()
    if exc is not None:
        output.close_log()
        if cancel is not None:
            raise cancel
        if isinstance(exc, OSError):
            raise ProcessError(_spawn_message(args[0], cwd, exc)) from exc
        raise exc
    transport, protocol = spawn.result()
    return transport, protocol, cancel


async def _finished(spawn: asyncio.Task[tuple[asyncio.SubprocessTransport, _ChildProtocol]]
                    ) -> asyncio.CancelledError | None:
    """Wait for the child's start to finish, even through a cancellation (returned, for the
    caller to honour once the child is ended its own way).

    asyncio's own handling of a start cut short kills only the leader (not its group, nor
    what left it), then waits for it, and under load was seen to wait forever: a stop that
    comes while a gate is being started must end the gate like any other stop."""
    cancel: asyncio.CancelledError | None = None
    while not spawn.done():
        try:
            await asyncio.shield(spawn)
        except asyncio.CancelledError as exc:
            if spawn.cancelled():
                raise
            cancel = cancel or exc
        except Exception:  # the start's own failure: read from the task by the caller
            pass
    return cancel


async def _wait_exit(protocol: _ChildProtocol, output: _Output,
                     timeout_s: float | None) -> tuple[bool, asyncio.CancelledError | None]:
    """Wait for the leader to exit, the deadline, a cancellation or an output failure.

    Returns (timed out, the CancelledError received): both are handled by the caller's
    cleanup, which must run before anything propagates.
    """
    try:
        async with asyncio.timeout(timeout_s):
            await asyncio.wait({protocol.exited, output.failed},
                               return_when=asyncio.FIRST_COMPLETED)
    except TimeoutError:
        return True, None
    except asyncio.CancelledError as exc:
        return False, exc
    return False, None


async def _end_child(pid: int, protocol: _ChildProtocol, grace_s: float,
                     contained: Contained | None) -> bool:
    """End the child's group (and, if contained, what left it), reap the leader and let the
    pipes drain; True if cancelled meanwhile (the cleanup still runs to its end)."""
    if not protocol.exited.done():
        interrupted = await _terminate(pid, protocol.exited, grace_s)
    else:
        # The leader exited by itself: whatever it left behind in its group goes now.
        kill_group(pid, signal.SIGKILL)
        interrupted = False
    interrupted |= await _wait_group_gone(pid)
    if contained is not None:
        # Before the drain: a daemon that kept our pipes open is gone with them.
        interrupted |= await contained.sweep()
        contained.finished()
    return await _settle(protocol.eof, max(grace_s, _MIN_DRAIN_S)) or interrupted


async def _terminate(pid: int, exited: asyncio.Future[None], grace_s: float) -> bool:
    """End group `pid`: SIGTERM, up to `grace_s` for it to go, SIGKILL, then reap the leader.

    The grace period ends early once the leader has exited and no other member is running.
    Returns True if the task was cancelled meanwhile: that skips the rest of the grace period
    (straight to SIGKILL) but never the reaping, so no child outlives the call.
    """
    interrupted = False
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace_s
    kill_group(pid, signal.SIGTERM)
    try:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout_at(deadline):
                await asyncio.shield(exited)
        while group_alive(pid) and loop.time() < deadline:
            await asyncio.sleep(_POLL_S)
    except asyncio.CancelledError:
        interrupted = True
    kill_group(pid, signal.SIGKILL)
    return await _uninterrupted(exited) or interrupted


async def _wait_group_gone(pgid: int) -> bool:
    """Wait until the SIGKILLed members of `pgid` are really gone; True if cancelled.

    SIGKILL is delivered asynchronously: for a moment after `killpg` the members still run.
    Callers are promised that nothing outlives the call, so we watch for that moment to end,
    for at most `_KILL_WAIT_S` (a process stuck in the kernel cannot be hurried).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _KILL_WAIT_S
    try:
        while group_alive(pgid):
            if loop.time() >= deadline:
                log.warning("process group %d still has members after SIGKILL", pgid)
                return False
            await asyncio.sleep(_POLL_S / 4)
    except asyncio.CancelledError:
        return True
    return False


async def _settle(eof: asyncio.Future[None], drain_s: float) -> bool:
    """Wait for stdout and stderr to reach EOF after the group is gone; True if cancelled.

    Once the group is dead only its last buffered bytes remain, so EOF comes at once, unless a
    process that escaped the group (a new session) still holds the pipes: then we stop reading
    after `drain_s` rather than wait for it, and closing our ends is all we can do.
    """
    try:
        async with asyncio.timeout(drain_s):
            await asyncio.shield(eof)
    except TimeoutError:
        log.debug("output pipes still open after the process group ended; closing them")
    except asyncio.CancelledError:
        return True
    return False


async def _uninterrupted(future: asyncio.Future[None]) -> bool:
    """Await `future` to the end even through cancellations; True if there were any."""
    interrupted = False
    while not future.done():
        try:
            await asyncio.shield(future)
        except asyncio.CancelledError:
            interrupted = True
    return interrupted


def _feed_stdin(transport: asyncio.SubprocessTransport, data: bytes) -> None:
    """Hand `data` to the child's stdin and close it behind the data.

    The pipe transport writes in the background as the child reads, concurrently with our
    reading of its output, so a child that never reads cannot deadlock us; if it exits
    without reading, the broken pipe only ends the writing (asyncio keeps it quiet).
    """
    pipe = transport.get_pipe_transport(0)
    if not isinstance(pipe, asyncio.WriteTransport):
        return
    if data:
        pipe.write(data)
    pipe.close()


class _ChildProtocol(asyncio.SubprocessProtocol):
    """Turns asyncio's callbacks into two futures: the leader exited, and output hit EOF.

    asyncio's own `Process.wait()` only returns once the pipes are closed too, so a grandchild
    holding them would hide the leader's exit; we need that exit to clean the group up.
    """

    def __init__(self, output: _Output) -> None:
        loop = asyncio.get_running_loop()
        self.exited: asyncio.Future[None] = loop.create_future()
        self.eof: asyncio.Future[None] = loop.create_future()
        self._output = output
        self._open = {1, 2}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if isinstance(transport, asyncio.SubprocessTransport):
            self._output.transport = transport

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self._output.feed("stdout" if fd == 1 else "stderr", data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self._open.discard(fd)
        if not self._open and not self.eof.done():
            self.eof.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


class _Output:
    """Where the child's bytes go: the caller's sink, the bounded tail and the log writer.

    `feed` runs inside the event loop's pipe callbacks, so it never blocks and never buffers
    without bound: chunks for the log wait in a queue that pauses the pipes once it holds
    `_LOG_HIGH_WATER` bytes, until the writer thread has taken them.
    """

    def __init__(self, sink: OutputSink | None, log_file: BinaryIO | None,
                 log_path: Path | None, tail_bytes: int) -> None:
        self.transport: asyncio.SubprocessTransport | None = None
        self.total = 0
        self.tail = bytearray()
        self.failure: BaseException | None = None
        self.failed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sink = sink
        self._log = log_file
        self._log_path = log_path
        self._tail_bytes = tail_bytes
        self._queue: deque[bytes] = deque()
        self._queued = 0
        self._paused = False
        self._closing = False
        self._wake = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None

    def feed(self, stream: StreamName, data: bytes) -> None:
        self.total += len(data)
        self._keep_tail(data)
        if self.failure is not None:
            return
        if self._sink is not None:
            try:
                self._sink(stream, data)
            except Exception as exc:
                self._fail(exc)
                return
        if self._log is not None:
            self._queue.append(data)
            self._queued += len(data)
            self._wake.set()
            if self._queued >= _LOG_HIGH_WATER and not self._paused:
                self._set_paused(True)

    def _keep_tail(self, data: bytes) -> None:
        limit = self._tail_bytes
        if limit == 0:
            return
        if len(data) >= limit:
            self.tail[:] = data[-limit:]
            return
        self.tail += data
        excess = len(self.tail) - limit
        if excess > 0:
            del self.tail[:excess]

    def _fail(self, exc: BaseException) -> None:
        """Remember the first failure; the supervisor ends the child and raises it."""
        if self.failure is None:
            self.failure = exc
            self.failed.set_result(None)
        self._queue.clear()
        self._queued = 0
        if self._paused:
            self._set_paused(False)

    def _set_paused(self, paused: bool) -> None:
        self._paused = paused
        if self.transport is None:
            return
        for fd in (1, 2):
            pipe = self.transport.get_pipe_transport(fd)
            if isinstance(pipe, asyncio.ReadTransport):
                if paused:
                    pipe.pause_reading()
                else:
                    pipe.resume_reading()

    def start_writer(self) -> None:
        if self._log is not None:
            self._writer = asyncio.get_running_loop().create_task(self._write_loop())

    async def _write_loop(self) -> None:
        """Move queued chunks to the log file in a worker thread, in arrival order."""
        assert self._log is not None
        while True:
            if not self._queue:
                if self._closing or self.failure is not None:
                    return
                self._wake.clear()
                await self._wake.wait()
                continue
            batch = b"".join(self._queue)
            self._queue.clear()
            self._queued = 0
            if self._paused:
                self._set_paused(False)
            try:
                await asyncio.to_thread(_write_fully, self._log, batch)
            except OSError as exc:
                self._fail(ProcessError(f"cannot write {self._log_path}: {exc.strerror or exc}"))
                return

    async def finish(self) -> bool:
        """Let the writer write what is queued, then close the log; True if cancelled meanwhile."""
        interrupted = False
        if self._writer is not None:
            self._closing = True
            self._wake.set()
            while not self._writer.done():
                try:
                    await asyncio.shield(self._writer)
                except asyncio.CancelledError:
                    interrupted = True
        self.close_log()
        return interrupted

    def close_log(self) -> None:
        if self._log is None:
            return
        try:
            self._log.close()
        except OSError as exc:
            if self.failure is None:
                self.failure = ProcessError(
                    f"cannot write {self._log_path}: {exc.strerror or exc}")
        self._log = None


def _write_fully(log_file: BinaryIO, data: bytes) -> None:
    """An unbuffered write may take only part of the data: write the rest too."""
    view = memoryview(data)
    while view:
        written = log_file.write(view)
        view = view[written or 0:]
        if not written:
            raise OSError("the log file accepted no bytes")


def _open_log(path: Path) -> BinaryIO:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Unbuffered: what the child printed is in the file as soon as it is read, so that a
        # log can be followed live (`tail -f`) and a crash loses nothing that was read.
        return path.open("ab", buffering=0)
    except OSError as exc:
        raise ProcessError(f"cannot open log {path}: {exc.strerror or exc}") from exc


def _spawn_message(program: str, cwd: Path, exc: OSError) -> str:
    """One line saying why `program` did not start, in the words a shell would use."""
    reason = exc.strerror or str(exc)
    if exc.filename is not None and os.fspath(exc.filename) == os.fspath(cwd):
        return f"cannot run {program}: working directory {cwd}: {reason}"
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {program}"
    return f"cannot run {program}: {reason}"


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")

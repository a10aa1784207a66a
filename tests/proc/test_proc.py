"""ralph.proc: owned children, streamed and bounded output, group kills on every way out."""

from __future__ import annotations

import asyncio
import os
import re
import resource
import signal
import stat
import tracemalloc
from pathlib import Path

import pytest

from ralph.errors import RalphError
from ralph.proc import (
    ProcessError,
    ProcessResult,
    cancelled_result,
    group_alive,
    kill_group,
    run_process,
    run_shell,
)
from tests.proc.helpers import group_members, pids_from, py, running

TS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


class Recorder:
    """An output sink remembering every chunk in arrival order."""

    def __init__(self) -> None:
        self.chunks: list[tuple[str, bytes]] = []
        self.ready = asyncio.Event()

    def __call__(self, stream: str, data: bytes) -> None:
        self.chunks.append((stream, data))
        if b"ready" in data:
            self.ready.set()

    def joined(self, stream: str | None = None) -> bytes:
        return b"".join(d for s, d in self.chunks if stream is None or s == stream)


# -- output -----------------------------------------------------------------------------------


async def test_output_streamed_to_sink_and_log_in_order(tmp_path: Path) -> None:
    rec = Recorder()
    log_path = tmp_path / "logs" / "deep" / "run.log"
    result = await run_process(py("""
        import sys
        for i in range(2000):
            sys.stdout.write(f"out {i}\\n"); sys.stdout.flush()
            sys.stderr.write(f"err {i}\\n"); sys.stderr.flush()
    """), cwd=tmp_path, timeout_s=60, on_output=rec, log_path=log_path)
    assert result.exit_code == 0
    assert not result.timed_out and not result.cancelled
    expected_out = "".join(f"out {i}\n" for i in range(2000)).encode()
    expected_err = "".join(f"err {i}\n" for i in range(2000)).encode()
    assert rec.joined("stdout") == expected_out
    assert rec.joined("stderr") == expected_err
    logged = log_path.read_bytes()
    # The log holds the chunks exactly as the sink saw them, in the same order.
    assert logged == rec.joined()
    lines = logged.decode().splitlines()
    assert [x for x in lines if x.startswith("out")] == [f"out {i}" for i in range(2000)]
    assert [x for x in lines if x.startswith("err")] == [f"err {i}" for i in range(2000)]
    assert result.output_bytes == len(expected_out) + len(expected_err)


async def test_log_is_appended_not_replaced(tmp_path: Path) -> None:
    log_path = tmp_path / "run.log"
    await run_shell("echo first", cwd=tmp_path, timeout_s=60, log_path=log_path)
    await run_shell("echo second", cwd=tmp_path, timeout_s=60, log_path=log_path)
    assert log_path.read_bytes() == b"first\nsecond\n"


async def test_result_fields(tmp_path: Path) -> None:
    result = await run_shell("printf abc; printf de >&2; exit 7", cwd=tmp_path, timeout_s=60)
    assert isinstance(result, ProcessResult)
    assert result.argv == ["/bin/sh", "-c", "printf abc; printf de >&2; exit 7"]
    assert result.cwd == str(tmp_path)
    assert result.exit_code == 7
    assert TS.fullmatch(result.started_at) and TS.fullmatch(result.finished_at)
    assert result.started_at <= result.finished_at
    assert result.duration_s >= 0
    assert result.pid > 1
    assert result.output_bytes == 5
    assert sorted(result.tail) == sorted(b"abcde")


async def test_exit_codes(tmp_path: Path) -> None:
    assert (await run_process(["true"], cwd=tmp_path, timeout_s=60)).exit_code == 0
    assert (await run_process(["false"], cwd=tmp_path, timeout_s=60)).exit_code == 1
    assert (await run_shell("exit 42", cwd=tmp_path, timeout_s=60)).exit_code == 42
    # Killed by a signal we did not send: asyncio's negative signal number.
    killed = await run_shell("kill -9 $$", cwd=tmp_path, timeout_s=60)
    assert killed.exit_code == -signal.SIGKILL
    assert not killed.timed_out


async def test_fifty_megabytes_keep_memory_bounded(tmp_path: Path) -> None:
    total = 800 * (65536 + 1)
    seen = 0

    def count(_stream: str, data: bytes) -> None:
        nonlocal seen
        seen += len(data)

    log_path = tmp_path / "big.log"
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    tracemalloc.start()
    try:
        result = await run_process(py("""
            import sys
            line = b"x" * 65535 + b"|\\n"
            for _ in range(800):
                sys.stdout.buffer.write(line)
            sys.stdout.buffer.write(b"THE END")
        """), cwd=tmp_path, timeout_s=120, on_output=count, log_path=log_path,
            tail_bytes=4096)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert result.exit_code == 0
    assert result.output_bytes == total + 7 == seen
    assert log_path.stat().st_size == total + 7
    assert len(result.tail) == 4096
    assert result.tail.endswith(b"|\nTHE END")
    assert peak < 16 << 20, f"peak Python allocations {peak} bytes"
    assert rss_after - rss_before < 32 << 10, "the process grew by tens of megabytes"


async def test_ten_megabyte_line_without_newline(tmp_path: Path) -> None:
    rec_bytes = 0
    last = b""

    def sink(_stream: str, data: bytes) -> None:
        nonlocal rec_bytes, last
        rec_bytes += len(data)
        last = data

    tracemalloc.start()
    try:
        result = await run_process(py("""
            import sys
            sys.stdout.buffer.write(b"y" * 10_000_000 + b"z")
        """), cwd=tmp_path, timeout_s=120, on_output=sink)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.exit_code == 0
    assert result.output_bytes == rec_bytes == 10_000_001
    assert len(result.tail) == 65536
    assert result.tail == b"y" * 65535 + b"z"
    assert last.endswith(b"z")
    assert peak < 8 << 20, f"peak Python allocations {peak} bytes"


async def test_tail_zero_keeps_nothing(tmp_path: Path) -> None:
    result = await run_shell("echo hello", cwd=tmp_path, timeout_s=60, tail_bytes=0)
    assert result.tail == b""
    assert result.output_bytes == 6


# -- stdin ------------------------------------------------------------------------------------


async def test_stdin_is_delivered_then_closed(tmp_path: Path) -> None:
    data = b"".join(f"line {i}\n".encode() for i in range(50_000))
    rec = Recorder()
    result = await run_process(["cat"], cwd=tmp_path, stdin_data=data, timeout_s=60,
                               on_output=rec)
    assert result.exit_code == 0
    assert rec.joined("stdout") == data


async def test_no_stdin_means_dev_null(tmp_path: Path) -> None:
    # cat would wait forever on an inherited terminal or pipe; /dev/null ends it at once.
    result = await run_process(["cat"], cwd=tmp_path, timeout_s=60)
    assert result.exit_code == 0
    assert result.output_bytes == 0


async def test_child_that_never_reads_a_megabyte_of_stdin(tmp_path: Path) -> None:
    data = b"z" * (1 << 20)
    waited = await run_shell("sleep 0.2; echo done", cwd=tmp_path, stdin_data=data,
                             timeout_s=60)
    assert waited.exit_code == 0 and waited.tail == b"done\n"
    at_once = await run_process(["true"], cwd=tmp_path, stdin_data=data, timeout_s=60)
    assert at_once.exit_code == 0
    partial = await run_process(["head", "-c", "5"], cwd=tmp_path, stdin_data=data,
                                timeout_s=60)
    assert partial.exit_code == 0 and partial.tail == b"zzzzz"


# -- timeout ----------------------------------------------------------------------------------


async def test_timeout_kills_group_that_ignores_sigterm(tmp_path: Path) -> None:
    rec = Recorder()
    result = await run_shell(
        "trap '' TERM; sleep 100 & sleep 100 & echo ready; wait",
        cwd=tmp_path, timeout_s=1, grace_s=0.5, on_output=rec)
    assert result.timed_out
    assert result.exit_code is None
    assert not result.cancelled
    assert rec.joined() == b"ready\n"
    assert group_members(result.pid) == []
    assert not group_alive(result.pid)


async def test_timeout_sends_sigterm_first(tmp_path: Path) -> None:
    result = await run_shell(
        "trap 'echo got-term; exit 0' TERM; echo ready; sleep 100 & wait",
        cwd=tmp_path, timeout_s=1, grace_s=30)
    assert result.timed_out
    assert result.exit_code is None
    assert b"got-term" in result.tail
    # The leader left at SIGTERM: no need to sit out the 30 s grace period.
    assert result.duration_s < 25
    assert group_members(result.pid) == []


# -- cancellation -----------------------------------------------------------------------------


async def test_cancel_kills_group_and_reraises(tmp_path: Path) -> None:
    rec = Recorder()
    task = asyncio.create_task(run_shell(
        "trap '' TERM; sleep 100 & a=$!; sleep 100 & echo ready $$ $a $!; wait",
        cwd=tmp_path, timeout_s=None, grace_s=0.3, on_output=rec))
    async with asyncio.timeout(60):
        await rec.ready.wait()
    pgid, *children = pids_from(rec.joined())
    assert len(children) == 2 and all(running(pid) for pid in children)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()
    assert group_members(pgid) == []
    assert not any(running(pid) for pid in children)


async def test_cancelled_result_inside_the_awaiting_task(tmp_path: Path) -> None:
    rec = Recorder()
    seen: list[ProcessResult | None] = []

    async def runner() -> None:
        try:
            await run_shell("trap '' TERM; sleep 100 & echo ready; wait",
                            cwd=tmp_path, timeout_s=None, grace_s=0.3, on_output=rec)
        except asyncio.CancelledError as exc:
            seen.append(cancelled_result(exc))
            raise

    task = asyncio.create_task(runner())
    async with asyncio.timeout(60):
        await rec.ready.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(seen) == 1
    result = seen[0]
    assert result is not None
    assert result.cancelled and not result.timed_out
    assert result.exit_code is None
    assert result.tail == b"ready\n"
    assert group_members(result.pid) == []
    assert cancelled_result(asyncio.CancelledError()) is None


async def test_second_cancel_during_grace_still_reaps(tmp_path: Path) -> None:
    rec = Recorder()
    task = asyncio.create_task(run_shell(
        "trap '' TERM; echo ready $$; sleep 100 & wait",
        cwd=tmp_path, timeout_s=None, grace_s=60, on_output=rec))
    async with asyncio.timeout(60):
        await rec.ready.wait()
    pgid = pids_from(rec.joined())[0]
    task.cancel()
    await asyncio.sleep(0.2)  # now inside the 60 s grace period
    assert not task.done()
    task.cancel()  # a second Ctrl-C: straight to SIGKILL
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(30):
            await task
    assert group_members(pgid) == []


async def test_caller_timeout_around_run_process(tmp_path: Path) -> None:
    rec = Recorder()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(1):
            await run_shell("echo ready $$; sleep 100", cwd=tmp_path, timeout_s=None,
                            on_output=rec)
    pgid = pids_from(rec.joined())[0]
    assert group_members(pgid) == []


# -- leftovers --------------------------------------------------------------------------------


async def test_background_children_killed_after_normal_exit(tmp_path: Path) -> None:
    result = await run_shell("sleep 100 & echo $!; sleep 100 & echo $!; echo bye",
                             cwd=tmp_path, timeout_s=60)
    assert result.exit_code == 0 and not result.timed_out
    children = pids_from(result.tail)
    assert len(children) == 2
    assert group_members(result.pid) == []
    assert not any(running(pid) for pid in children)


async def test_grandchild_holding_pipes_does_not_hang(tmp_path: Path) -> None:
    # The background sleep keeps stdout open after sh exits; the group kill closes it.
    result = await run_shell("(sleep 100; echo never) & echo leader-done", cwd=tmp_path,
                             timeout_s=60)
    assert result.exit_code == 0
    assert result.tail == b"leader-done\n"
    assert group_members(result.pid) == []


async def test_escaped_session_holding_pipes_does_not_hang(tmp_path: Path) -> None:
    """A child that leaves the group (setsid) escapes the kill, but cannot hold us up."""
    result = await run_process(py("""
        import os, sys, time
        if os.fork() == 0:
            os.setsid()
            print(os.getpid(), flush=True)
            time.sleep(60)
            os._exit(0)
        time.sleep(0.3)
    """), cwd=tmp_path, timeout_s=60, grace_s=0.2)
    escaped = pids_from(result.tail)
    try:
        assert result.exit_code == 0
        assert len(escaped) == 1
        assert running(escaped[0])  # documented: a new session escapes
    finally:
        for pid in escaped:
            os.kill(pid, signal.SIGKILL)


# -- errors -----------------------------------------------------------------------------------


async def test_program_not_found(tmp_path: Path) -> None:
    with pytest.raises(ProcessError) as caught:
        await run_process(["no-such-program-ralph"], cwd=tmp_path, timeout_s=60)
    assert str(caught.value) == "command not found: no-such-program-ralph"
    assert isinstance(caught.value, RalphError)


async def test_program_not_executable(tmp_path: Path) -> None:
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(stat.S_IRUSR | stat.S_IWUSR)
    with pytest.raises(ProcessError) as caught:
        await run_process([str(script)], cwd=tmp_path, timeout_s=60)
    assert str(caught.value) == f"cannot run {script}: Permission denied"


async def test_missing_working_directory(tmp_path: Path) -> None:
    with pytest.raises(ProcessError, match="working directory"):
        await run_process(["true"], cwd=tmp_path / "absent", timeout_s=60)


async def test_failing_sink_ends_the_child(tmp_path: Path) -> None:
    class Boom(Exception):
        pass

    def sink(_stream: str, data: bytes) -> None:
        raise Boom("sink broke")

    with pytest.raises(Boom):
        await run_shell("echo one; sleep 100", cwd=tmp_path, timeout_s=60, on_output=sink,
                        grace_s=0.2)


async def test_unwritable_log_is_a_process_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ProcessError, match="cannot open log"):
        await run_shell("echo hi", cwd=tmp_path, timeout_s=60,
                        log_path=blocker / "sub" / "run.log")


async def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="argv"):
        await run_process([], cwd=Path("/"), timeout_s=1)
    with pytest.raises(ValueError, match="timeout_s"):
        await run_process(["true"], cwd=Path("/"), timeout_s=0)


# -- environment ------------------------------------------------------------------------------


async def test_env_is_merged_over_environ(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RALPH_TEST_INHERITED", "from-parent")
    monkeypatch.setenv("RALPH_TEST_OVERRIDDEN", "old")
    command = 'echo "$RALPH_TEST_INHERITED $RALPH_TEST_OVERRIDDEN $RALPH_TEST_NEW"'
    merged = await run_shell(command, cwd=tmp_path, timeout_s=60,
                             env={"RALPH_TEST_OVERRIDDEN": "new", "RALPH_TEST_NEW": "added"})
    assert merged.tail == b"from-parent new added\n"
    inherited = await run_shell(command, cwd=tmp_path, timeout_s=60)
    assert inherited.tail == b"from-parent old \n"


async def test_child_leads_its_own_group(tmp_path: Path) -> None:
    result = await run_process(py("""
        import os
        print(os.getpgrp(), os.getsid(0), os.getpid())
    """), cwd=tmp_path, timeout_s=60)
    pgrp, sid, pid = pids_from(result.tail)
    assert pgrp == sid == pid == result.pid
    assert pgrp != os.getpgrp()


# -- group helpers ----------------------------------------------------------------------------


def test_kill_group_never_signals_our_own_group() -> None:
    # A pgid recorded by an earlier run may be recycled for us: no signal, no error.
    assert not kill_group(os.getpgrp(), 0)  # signal 0: harmless even if the guard broke
    with pytest.raises(ValueError, match="refusing"):
        kill_group(0)
    with pytest.raises(ValueError, match="refusing"):
        kill_group(1)


async def test_kill_group_and_group_alive(tmp_path: Path) -> None:
    rec = Recorder()
    task = asyncio.create_task(run_shell("echo ready $$; sleep 100", cwd=tmp_path,
                                         timeout_s=60, on_output=rec))
    async with asyncio.timeout(60):
        await rec.ready.wait()
    pgid = pids_from(rec.joined())[0]
    assert group_alive(pgid)
    assert kill_group(pgid, signal.SIGKILL)
    result = await task
    assert result.exit_code == -signal.SIGKILL
    assert not group_alive(pgid)
    # A group that is gone (its only member reaped): nothing to signal, and no error.
    gone = await run_process(["true"], cwd=tmp_path, timeout_s=60)
    assert not kill_group(gone.pid)
    assert not group_alive(gone.pid)


@pytest.mark.parametrize("ticks", [0, 1, 2, 3, 5])
@pytest.mark.parametrize("contain", [False, True])
async def test_a_cancellation_while_the_child_starts_ends_it_like_any_other(
        tmp_path: Path, ticks: int, contain: bool) -> None:
    """A stop that comes while the child is being started (a gate just launched): the child
    and what it started are ended, and the call ends at once, with the CancelledError."""
    marker = tmp_path / "pids"
    started: list[int] = []
    task = asyncio.create_task(run_shell(
        f"sleep 60 & echo $! > {marker}; echo $$ >> {marker}; wait", cwd=tmp_path,
        timeout_s=None, contain=contain, grace_s=0.2, on_start=started.append))
    for _ in range(ticks):
        await asyncio.sleep(0)
    task.cancel()
    async with asyncio.timeout(20):
        with pytest.raises(asyncio.CancelledError):
            await task
    assert not started or group_members(started[0]) == []  # 0 ticks: it never began
    for pid in pids_from(marker.read_bytes()) if marker.exists() else []:
        assert not running(pid)

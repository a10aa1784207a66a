"""Helpers for CLI tests: running `ralph` in-process and as a child, and checking its output."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

RALPH = [sys.executable, "-m", "ralph"]
# A command with SIGINT at its default even when the tests run with it ignored (a suite
# started in the background by a shell inherits SIGINT ignored, and so would the command):
# for tests that interrupt it.
WITH_SIGINT = [sys.executable, "-c", "import os, signal, sys; "
               "signal.signal(signal.SIGINT, signal.SIG_DFL); "
               "os.execv(sys.argv[1], sys.argv[1:])"]
TIMEOUT = 60
FRAME_KEYS = ["id", "seq", "ts", "topic", "stream", "meta", "hash"]
NOTE_KEYS = ["id", "seq", "ts", "session", "type", "iteration", "text", "resolves"]
_ID = re.compile(r"[0-9a-z]{25}")
_TS = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")
_HASH = re.compile(r"sha256-[A-Za-z0-9+/]{43}=")


@dataclass(frozen=True)
class Result:
    """What one `ralph` command did: exit code, stdout and stderr."""

    code: int
    out: str
    err: str
    raw: bytes = b""  # stdout as bytes (child processes only)

    def frames(self) -> list[dict[str, Any]]:
        """stdout as JSON lines, each checked to be a well-formed frame."""
        return [check_frame(frame) for frame in json_lines(self.out)]

    def json(self) -> Any:
        return json.loads(self.out)


class Cli(Protocol):
    """The `cli` fixture: `ralph ARGS...` run in this process through `ralph.cli.main.run`."""

    def __call__(self, *args: str, stdin: bytes = b"") -> Result: ...


def json_lines(text: str) -> list[dict[str, Any]]:
    """Every line of `text` parsed as one JSON object (a blank or partial line fails)."""
    values = [json.loads(line) for line in text.splitlines()]
    assert all(isinstance(value, dict) for value in values), text
    return values


def sri(data: bytes) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(data).digest()).decode()


def check_frame(frame: Any, *, topic: str | None = None, stream: str | None = None,
                meta: dict[str, Any] | None = None, content: bytes | None = None,
                no_content: bool = False) -> dict[str, Any]:
    """Assert that `frame` has the shape of a frame (and the given fields); return it."""
    assert isinstance(frame, dict), frame
    assert list(frame) == FRAME_KEYS, frame
    assert isinstance(frame["id"], str), frame
    assert len(frame["id"]) == 25
    assert _ID.fullmatch(frame["id"]), frame
    assert type(frame["seq"]) is int, frame
    assert frame["seq"] >= 1
    assert isinstance(frame["ts"], str), frame
    assert frame["ts"].endswith("Z")
    assert _TS.fullmatch(frame["ts"]), frame
    assert isinstance(frame["topic"], str), frame
    assert isinstance(frame["stream"], str), frame
    assert isinstance(frame["meta"], dict), frame
    assert frame["hash"] is None or _HASH.fullmatch(frame["hash"]), frame
    if topic is not None:
        assert frame["topic"] == topic
    if stream is not None:
        assert frame["stream"] == stream
    if meta is not None:
        assert frame["meta"] == meta
    if content is not None:
        assert frame["hash"] == sri(content)
    if no_content:
        assert frame["hash"] is None
    return frame


def assert_error(result: Result, *words: str) -> str:
    """A failed command: nonzero exit, nothing on stdout, exactly one `error:` line naming
    the problem (every word of `words`, case-insensitively), and no traceback."""
    assert result.code != 0, result
    assert result.out == "", result
    assert "Traceback" not in result.err, result.err
    lines = result.err.splitlines()
    assert len(lines) == 1, result.err
    line = lines[0]
    assert line.startswith("error: "), line
    for word in words:
        assert word.lower() in line.lower(), (word, line)
    return line


def run_ralph(*args: str, input: bytes | None = None, env: dict[str, str] | None = None,
              cwd: Path | None = None, timeout: float = TIMEOUT) -> Result:
    """`python -m ralph ARGS...` in a child process; stdin is /dev/null unless `input`."""
    stdin: dict[str, Any] = {"stdin": subprocess.DEVNULL} if input is None else {"input": input}
    proc = subprocess.run([*RALPH, *args], capture_output=True, env=env, cwd=cwd,
                          timeout=timeout, start_new_session=True, check=False, **stdin)
    return Result(proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode(),
                  proc.stdout)


class Follower:
    """`ralph store cat --follow ARGS...` in a child process with its own process group.

    A thread reads its stdout line by line, so the test can wait for each line with a
    timeout; `stop()` signals the group and waits for the process.
    """

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen([*WITH_SIGINT, *RALPH, "store", "cat", "--follow", *args],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, start_new_session=True)
        self._lines: queue.Queue[bytes] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._done = False
        self.stderr = ""

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(b"")  # end of output

    def next_frame(self, timeout: float = TIMEOUT) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"the follower printed nothing for {timeout} s") from None
        assert line, f"the follower stopped early (exit {self.proc.poll()})"
        assert line.endswith(b"\n"), line
        return check_frame(json.loads(line))

    def frames(self, n: int) -> list[dict[str, Any]]:
        return [self.next_frame() for _ in range(n)]

    def no_more_output(self) -> bool:
        """After the process ended: whether it printed nothing beyond what was read."""
        self._reader.join(timeout=TIMEOUT)
        return self._lines.get(timeout=TIMEOUT) == b""

    def wait(self, timeout: float = TIMEOUT) -> int:
        """Wait for the process to exit on its own."""
        code = self.proc.wait(timeout=timeout)
        self._finish()
        return code

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Signal the process group, wait for it (SIGKILL if it does not go) and return the code."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
        try:
            code = self.proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            code = self.proc.wait(timeout=TIMEOUT)
        self._finish()
        return code

    def _finish(self) -> None:
        self._done = True
        self._reader.join(timeout=TIMEOUT)
        assert self.proc.stderr is not None
        if not self.proc.stderr.closed:
            self.stderr = self.proc.stderr.read().decode()
            self.proc.stderr.close()
        assert self.proc.stdout is not None
        self.proc.stdout.close()

    def __enter__(self) -> Follower:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if not self._done:
            self.stop(signal.SIGKILL)

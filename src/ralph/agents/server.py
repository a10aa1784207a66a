"""A long-running agent server for the length of a run: `opencode serve`.

Started once per run in its own process group, contained (`ralph.containment`: its
environment carries a marker), health-checked before use, and ended when the run ends, also
on Ctrl-C or an error in the loop: the whole group, then whatever it started that left the
group. Should the orchestrator itself be killed, its guard process ends the server and all
it started; the next start also ends its recorded process group.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import time
from collections.abc import Mapping
from pathlib import Path

from ralph.agents.base import AgentError
from ralph.containment import Contained
from ralph.proc import group_alive, kill_group

_HEALTH_TIMEOUT_S = 60.0
_GRACE_S = 3.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def port_taken(port: int) -> bool:
    """Something listens on 127.0.0.1:`port` (a server started there would fail, or worse,
    the health check would find the other one answering)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is free
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


class AgentServer:
    """`argv` is the server's command line; `{port}` in it is replaced by the chosen port.
    `fallback`: the command line to try once if the first one exits without answering (an
    `opencode web` that this opencode does not have: then `opencode serve`)."""

    def __init__(self, name: str, argv: list[str], *, cwd: Path, env: Mapping[str, str],
                 port: int, log_path: Path, wait_s: float = _HEALTH_TIMEOUT_S,
                 fallback: list[str] | None = None) -> None:
        self.name = name
        self.fixed_port = port != 0
        self.port = port or free_port()
        self.argv = [a.replace("{port}", str(self.port)) for a in argv]
        self.fallback = ([a.replace("{port}", str(self.port)) for a in fallback]
                         if fallback else None)
        self.wait_s = wait_s
        self.cwd = cwd
        self.env = {**os.environ, **env}
        self.log_path = log_path
        self.process: asyncio.subprocess.Process | None = None
        self._contained: Contained | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        """The server's process has not exited (it may still fail to answer)."""
        return self.process is not None and self.process.returncode is None

    @property
    def exit_code(self) -> int | None:
        """How its process ended (negative: the signal), None while it runs."""
        return None if self.process is None else self.process.returncode

    @property
    def pgid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    async def start(self) -> str:
        """Start the server and wait until it answers HTTP; its URL. A port given that is
        taken already is an AgentError at once."""
        if self.fixed_port and port_taken(self.port):
            raise AgentError(f"agent '{self.name}': port {self.port} is already in use on "
                             "127.0.0.1: stop what listens there, or choose another port")
        try:
            await self._start_once()
        except _ExitedEarly:
            if self.fallback is None:
                raise
            self.argv, self.fallback = self.fallback, None
            await self._start_once()
        return self.url

    async def _start_once(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        contained = Contained()
        with self.log_path.open("ab") as log:
            try:
                self.process = await asyncio.create_subprocess_exec(
                    *self.argv, cwd=self.cwd, env=contained.env(self.env),
                    stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log,
                    start_new_session=True)
            except OSError as exc:
                raise AgentError(f"agent '{self.name}': cannot start {self.argv[0]}: "
                                 f"{exc.strerror or exc}") from None
        contained.started(self.process.pid)
        self._contained = contained
        try:
            await self._wait_healthy()
        except BaseException:
            await self.stop()
            raise

    async def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.wait_s
        assert self.process is not None
        patience = 0.5  # per attempt, doubled up to 5 s: see _answers
        while time.monotonic() < deadline:
            if self.process.returncode is not None:
                raise _ExitedEarly(f"agent '{self.name}': its server "
                                   f"(`{' '.join(self.argv[:2])}`) exited with "
                                   f"{self.process.returncode} before answering "
                                   f"(see {self.log_path})")
            if await self._answers(patience):
                return
            patience = min(patience * 2, 5.0)
            await asyncio.sleep(0.1)
        raise AgentError(f"agent '{self.name}': its server did not answer on {self.url} "
                         f"within {self.wait_s:g} s (see {self.log_path})")

    async def _answers(self, patience: float) -> bool:
        """Any HTTP response to GET / within `patience` seconds counts: the server is
        listening and speaking HTTP. opencode never answers a request that came in the
        moment it began to accept connections, so a first attempt is not waited on long:
        each attempt is a new connection, with more patience than the last."""
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", self.port), 2)
        except (OSError, TimeoutError):
            return False
        try:
            writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            await writer.drain()
            line = await asyncio.wait_for(reader.readline(), patience)
            return line.startswith(b"HTTP/")
        except (OSError, TimeoutError):
            return False
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def stop(self) -> None:
        """End the server's whole process group (SIGTERM, a grace period, then SIGKILL), then
        whatever it started that left the group (SIGKILL)."""
        process = self.process
        if process is None:
            return
        pgid = process.pid
        kill_group(pgid, signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(process.wait()), _GRACE_S)
        kill_group(pgid, signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(process.wait()), 10)
        deadline = time.monotonic() + 5
        while group_alive(pgid) and time.monotonic() < deadline:
            kill_group(pgid, signal.SIGKILL)
            await asyncio.sleep(0.05)
        contained, self._contained = self._contained, None
        if contained is not None:
            await contained.sweep()
            contained.finished()
        self.process = None


class _ExitedEarly(AgentError):
    """The server's process ended before it answered."""

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


class AgentServer:
    """`argv` is the server's command line; `{port}` in it is replaced by the chosen port."""

    def __init__(self, name: str, argv: list[str], *, cwd: Path, env: Mapping[str, str],
                 port: int, log_path: Path) -> None:
        self.name = name
        self.port = port or free_port()
        self.argv = [a.replace("{port}", str(self.port)) for a in argv]
        self.cwd = cwd
        self.env = {**os.environ, **env}
        self.log_path = log_path
        self.process: asyncio.subprocess.Process | None = None
        self._contained: Contained | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pgid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    async def start(self) -> str:
        """Start the server and wait until it answers HTTP; its URL."""
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
        return self.url

    async def _wait_healthy(self) -> None:
        deadline = time.monotonic() + _HEALTH_TIMEOUT_S
        assert self.process is not None
        while time.monotonic() < deadline:
            if self.process.returncode is not None:
                raise AgentError(f"agent '{self.name}': its server exited with "
                                 f"{self.process.returncode} before answering "
                                 f"(see {self.log_path})")
            if await self._answers():
                return
            await asyncio.sleep(0.1)
        raise AgentError(f"agent '{self.name}': its server did not answer on {self.url} "
                         f"within {_HEALTH_TIMEOUT_S:.0f} s (see {self.log_path})")

    async def _answers(self) -> bool:
        """Any HTTP response to GET / counts: the server is listening and speaking HTTP."""
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", self.port), 2)
        except (OSError, TimeoutError):
            return False
        try:
            writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            await writer.drain()
            line = await asyncio.wait_for(reader.readline(), 5)
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

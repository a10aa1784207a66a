"""What the control plane's methods share: the per-workspace request order, and the one
way a company-service call becomes an answer (a refusal is -32000 with its message and
`data`; a file that cannot be read or written, -32000 naming it)."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from ralph.company.layout import CompanyError, is_workspace
from ralph.company.workspace import WorkspaceError
from ralph.rpc import APPLICATION_ERROR, RpcError

T = TypeVar("T")
FAILED = (APPLICATION_ERROR, "Application error")


def failed(message: str, **data: Any) -> RpcError:
    """An application error: -32000, its message, and `data` (what it is about)."""
    return RpcError(APPLICATION_ERROR, message, data)


class InOrder:
    """One lock per workspace, taken by each request about it as it starts: the requests
    of one workspace run one after the other, in the order they arrived (a task runs up to
    its first wait in the order it was made, and a lock serves its waiters in turn)."""

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}

    def of(self, workspace_dir: str) -> asyncio.Lock:
        key = os.path.normpath(workspace_dir)
        return self._locks.setdefault(key, asyncio.Lock())


class Plane:
    """The state of one control-plane server, shared by its method modules."""

    def __init__(self) -> None:
        self.in_order = InOrder()
        self.workspaces: set[str] = set()  # every workspace a request named (normalised)
        # The live sessions of a workspace (session.list's rows) for the monitor; the
        # sessions group replaces this when it registers.
        self.session_rows: Callable[[str], list[dict[str, Any]]] = lambda _workspace: []
        # Sends a notification to the client (set by the server once it is connected).
        self.notify: Callable[[str, dict[str, Any]], Awaitable[None]] | None = None
        self._closers: list[Callable[[], Awaitable[None]]] = []
        self._workspace_hooks: list[Callable[[Path], Awaitable[None]]] = []

    def on_workspace(self, hook: Callable[[Path], Awaitable[None]]) -> None:
        """Call `hook(root)` when a request first names a workspace (before it runs)."""
        self._workspace_hooks.append(hook)

    async def know(self, workspace_dir: str) -> None:
        """Remember a workspace a request names (one that is a workspace), telling the
        hooks the first time."""
        key = os.path.normpath(workspace_dir)
        if key in self.workspaces or not is_workspace(Path(key)):
            return
        self.workspaces.add(key)
        for hook in self._workspace_hooks:
            await hook(Path(key))

    def on_close(self, closer: Callable[[], Awaitable[None]]) -> None:
        """Run `closer` when the server ends (sessions, watchers)."""
        self._closers.append(closer)

    async def close(self) -> None:
        for closer in reversed(self._closers):
            await closer()
        self._closers.clear()

    async def call(self, workspace_dir: str, action: Callable[..., T], *args: Any,
                   **kwargs: Any) -> T:
        """`action(Path(workspace_dir), *args)` in a worker thread, after the requests about
        the same workspace that arrived before this one; its refusals as -32000."""
        await self.know(workspace_dir)
        try:
            async with self.in_order.of(workspace_dir):
                return await self.off_loop(action, Path(workspace_dir), *args,
                                           context={"workspace_dir": workspace_dir}, **kwargs)
        finally:
            await self.know(workspace_dir)  # (one workspace.init just made)

    @staticmethod
    async def off_loop(action: Callable[..., T], *args: Any,
                       context: dict[str, Any] | None = None, **kwargs: Any) -> T:
        """`action(*args)` in a worker thread; its refusals as -32000 (with `context`)."""
        try:
            return await asyncio.to_thread(action, *args, **kwargs)
        except CompanyError as exc:
            raise failed(str(exc), **{**(context or {}), **exc.data}) from None
        except WorkspaceError as exc:
            raise failed(str(exc), **(context or {})) from None
        except sqlite3.Error as exc:  # the index: locked past the busy timeout, read-only, full
            raise failed(f"Index database error: {exc}", **(context or {})) from None
        except OSError as exc:
            where = exc.filename or ""
            raise failed(f"{where}: {exc.strerror or exc}" if where else str(exc),
                         **(context or {})) from None

"""The remote API's methods (docs/protocols/remote.md): each a translation from the document's
names and fields to the services. This version: the lifecycle (`initialize`, `initialized`,
`shutdown`) and `status/get`."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ralph import __version__
from ralph.agents import adapter_for
from ralph.agents.program import check_program
from ralph.config import BUILTIN_AGENTS, Config
from ralph.remote.clients import Hub
from ralph.rpc import Registry

PROTOCOL_VERSION = "1.0"
SERVER_NAME = "ralph"
MAX_FILE_BYTES = 10 * 1024 * 1024
AgentState = Literal["idle", "running", "waiting", "stopped", "error"]


@dataclass
class RemoteState:
    """What the methods answer from: the project, the clients, the server's life."""

    root: Path
    config: Config
    hub: Hub
    started: float = field(default_factory=time.monotonic)
    shutdown: asyncio.Event = field(default_factory=asyncio.Event)
    session_id: str | None = None  # the agent session this server started last
    agent_session_id: str = ""  # its CLI's conversation id, once known
    agent_type: str | None = None

    @property
    def uptime_seconds(self) -> int:
        return int(time.monotonic() - self.started)


class _Params(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class InitializeParams(_Params):
    protocolVersion: str | None = None
    clientInfo: dict[str, Any] | None = None
    capabilities: dict[str, Any] | None = None


class ServerInfo(BaseModel):
    name: str
    version: str


class InitializeResult(BaseModel):
    protocolVersion: str
    serverInfo: ServerInfo
    capabilities: dict[str, Any]


class ShutdownResult(BaseModel):
    success: bool


class StatusResult(BaseModel):
    """`status/get`: every field of the document, snake_case. `agent_session_id` is the
    agent CLI's own conversation id ("" until one is known: the document's clients decode it
    as a string that is never null)."""

    session_id: str | None
    agent_session_id: str
    agent_state: AgentState
    agent_type: str | None
    connected_clients: int
    repo_path: str
    repo_name: str
    uptime_seconds: int
    version: str
    watcher_enabled: bool
    git_enabled: bool


def supported_agents(config: Config) -> list[str]:
    """The agents configured (or built in) whose programs are found here."""
    names = list(dict.fromkeys([*config.agents, *BUILTIN_AGENTS]))
    found = []
    for name in names:
        agent = config.agent(name)
        adapter = adapter_for(agent.adapter)
        argv = list(agent.argv) or adapter.default_argv(agent.model)
        if argv and check_program(argv[0], adapter.install_hint).problem is None:
            found.append(name)
    return found


def capabilities(state: RemoteState) -> dict[str, Any]:
    """What this server does: only what works (the document's other keys, false)."""
    return {
        "agent": {"run": False, "stop": False, "respond": False, "sessions": False,
                  "sessionWatch": False},
        "git": {"status": False, "diff": False, "stage": False, "unstage": False,
                "discard": False, "commit": False, "push": False, "pull": False,
                "branches": False, "checkout": False},
        "file": {"get": False, "list": False, "maxFileSize": MAX_FILE_BYTES},
        "repository": {"index": False, "search": False, "tree": False},
        "notifications": ["event/heartbeat"],
        "supportedAgents": supported_agents(state.config),
    }


def status(state: RemoteState) -> StatusResult:
    """The server's status (also `GET /api/status`)."""
    return StatusResult(
        session_id=state.session_id, agent_session_id=state.agent_session_id,
        agent_state="idle", agent_type=state.agent_type or state.config.loop.default_agent,
        connected_clients=len(state.hub), repo_path=str(state.root),
        repo_name=state.root.name, uptime_seconds=state.uptime_seconds,
        version=__version__, watcher_enabled=False,
        git_enabled=(state.root / ".git").exists())


def build_registry(state: RemoteState) -> Registry:
    registry = Registry(title="Ralph remote API", version=__version__,
                        description="ralph serve: JSON-RPC 2.0 over WebSocket at /ws")

    @registry.method("initialize", params=InitializeParams, result=InitializeResult,
                     summary="Negotiate the protocol; the server's capabilities.")
    async def initialize(params: InitializeParams) -> InitializeResult:
        return InitializeResult(protocolVersion=PROTOCOL_VERSION,
                                serverInfo=ServerInfo(name=SERVER_NAME, version=__version__),
                                capabilities=capabilities(state))

    @registry.method("initialized", params=_Params,
                     summary="The client is initialized (a notification).")
    async def initialized(params: _Params) -> None:
        return None

    @registry.method("shutdown", result=ShutdownResult,
                     summary="Shut the server down gracefully (after this answer).")
    async def shutdown() -> ShutdownResult:
        asyncio.get_running_loop().call_later(0.05, state.shutdown.set)
        return ShutdownResult(success=True)

    @registry.method("status/get", result=StatusResult, summary="The server's status.")
    async def status_get() -> StatusResult:
        return status(state)

    return registry

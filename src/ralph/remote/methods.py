"""The remote API's methods (docs/protocols/remote.md): each a translation from the document's
names and fields to the services. Here: the lifecycle (`initialize`, `initialized`,
`shutdown`) and `status/get`; the agent methods are in ralph.remote.agent_methods."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ralph import __version__
from ralph.config import BUILTIN_AGENTS, Config
from ralph.loop import LoopService
from ralph.remote import agent_methods, loop_methods, repo_methods, session_watch
from ralph.remote.agent_methods import AgentSeat, AgentState, program_problem
from ralph.remote.clients import CURRENT, Hub
from ralph.remote.event_models import EVENT_MODELS
from ralph.rpc import Registry
from ralph.scale.view import RemoteRuns

PROTOCOL_VERSION = "1.0"
SERVER_NAME = "ralph"
MAX_FILE_BYTES = 10 * 1024 * 1024


@dataclass
class RemoteState:
    """What the methods answer from: the project, the clients, the server's life."""

    root: Path
    config: Config
    hub: Hub
    seat: AgentSeat
    loop: LoopService
    loop_steps: set[asyncio.Task[Any]] = field(default_factory=set)  # steps running
    # GET /api/remote-runs/{run_id} (an extension): runs by id, from $RALPH_TEMPORAL and
    # $RALPH_STORE (default: the loop's store only, no Temporal)
    remote_runs: RemoteRuns | None = None
    watcher_enabled: bool = False  # the project's files are watched (event/file_changed)
    started: float = field(default_factory=time.monotonic)
    shutdown: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def uptime_seconds(self) -> int:
        return int(time.monotonic() - self.started)


class _Params(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class InitializeParams(_Params):
    protocolVersion: str | None = None
    clientInfo: dict[str, Any] | None = None
    capabilities: dict[str, Any] | None = None
    # the `seq` of the last event this client saw before it reconnected: the events it
    # missed are sent before this answer
    since_seq: int | None = Field(default=None, ge=0)


class ServerInfo(BaseModel):
    name: str
    version: str


class InitializeResult(BaseModel):
    protocolVersion: str
    serverInfo: ServerInfo
    capabilities: dict[str, Any]
    # extensions: the store position after which this connection gets every event live
    # (where to resume from, with since_seq, if no event comes before it reconnects), and
    # how many missed events were just sent
    last_seq: int
    replayed: int


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
    return [name for name in names if program_problem(config, name) is None]


def git_enabled(root: Path) -> bool:
    """The project is the top of a git repository (git/status and git/diff work)."""
    return (root / ".git").exists()


def capabilities(state: RemoteState, notifications: list[str]) -> dict[str, Any]:
    """What this server does: only what works (the document's other keys, false; `loop`,
    an extension)."""
    return {
        "agent": {"run": True, "stop": True, "respond": True, "sessions": True,
                  "sessionWatch": True},
        "git": {"status": git_enabled(state.root), "diff": git_enabled(state.root),
                "stage": False, "unstage": False,
                "discard": False, "commit": False, "push": False, "pull": False,
                "branches": False, "checkout": False},
        "file": {"get": True, "list": False, "maxFileSize": MAX_FILE_BYTES},
        "repository": {"index": False, "search": False, "tree": False},
        "loop": {"status": True, "step": True, "run": True, "pause": True, "resume": True,
                 "stop": True, "iterations": True, "tasks": True, "notes": True},
        "notifications": notifications,
        "supportedAgents": supported_agents(state.config),
    }


def status(state: RemoteState) -> StatusResult:
    """The server's status (also `GET /api/status`)."""
    seat = state.seat
    current = seat.current()
    return StatusResult(
        session_id=seat.session_id,
        agent_session_id=(current.agent_session_id or "") if current is not None else "",
        agent_state=seat.state(),
        agent_type=seat.agent_type or state.config.loop.default_agent,
        connected_clients=len(state.hub), repo_path=str(state.root),
        repo_name=state.root.name, uptime_seconds=state.uptime_seconds,
        version=__version__, watcher_enabled=state.watcher_enabled,
        git_enabled=git_enabled(state.root))


def build_registry(state: RemoteState) -> Registry:
    registry = Registry(title="Ralph remote API", version=__version__,
                        description="ralph serve: JSON-RPC 2.0 over WebSocket at /ws")

    @registry.method("initialize", params=InitializeParams, result=InitializeResult,
                     summary="Negotiate the protocol; the server's capabilities.")
    async def initialize(params: InitializeParams) -> InitializeResult:
        client = CURRENT.get()
        replayed = 0
        if client is not None and params.since_seq is not None:
            replayed = await state.hub.catch_up(client, params.since_seq)
        return InitializeResult(protocolVersion=PROTOCOL_VERSION,
                                serverInfo=ServerInfo(name=SERVER_NAME, version=__version__),
                                capabilities=capabilities(state, notifications),
                                last_seq=client.joined_at if client is not None
                                else state.hub.cursor, replayed=replayed)

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

    for name, (model, summary) in EVENT_MODELS.items():
        registry.notification_schema(name, model, summary)
    agent_methods.register(registry, state.seat)
    session_watch.register(registry, state.hub, state.seat.sessions)
    repo_methods.register(registry, state.root)
    loop_methods.register(registry, state.loop, state.loop_steps)
    notifications = [spec.name for spec in registry.notifications]
    return registry

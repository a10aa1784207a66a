"""The remote API's agent methods (`agent/run`, `agent/stop`, `agent/respond`,
`session/list`): translations to the agent sessions service (ralph.sessions), with the
document's error codes."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ralph.agents import adapter_for
from ralph.agents.base import AgentError
from ralph.agents.program import check_program
from ralph.approvals.desk import NotPending
from ralph.config import Config, ConfigError
from ralph.rpc import INVALID_PARAMS, Registry, RpcError
from ralph.sessions import AgentBusy, SessionError, SessionInfo, SessionService, UnknownSession

AGENT_ALREADY_RUNNING = -32001
AGENT_NOT_RUNNING = -32002
AGENT_ERROR = -32003
AGENT_NOT_CONFIGURED = -32004
SESSION_NOT_FOUND = -32012
ERRORS = {
    "run": [(AGENT_ALREADY_RUNNING, "Agent already running"),
            (AGENT_ERROR, "Agent error"), (AGENT_NOT_CONFIGURED, "Agent not configured"),
            (SESSION_NOT_FOUND, "Session not found")],
    "stop": [(AGENT_NOT_RUNNING, "Agent not running")],
    "respond": [(AGENT_NOT_RUNNING, "Agent not running"), (AGENT_ERROR, "Agent error"),
                (SESSION_NOT_FOUND, "Session not found")],
}
AgentState = Literal["idle", "running", "waiting", "stopped", "error"]
# What `agent/respond`'s `response` allows with (anything else denies, and is the reason)
ALLOWING = ("approved", "approve", "allow", "allowed", "yes")
DENYING = ("denied", "deny", "no")


class _Params(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class AgentRunParams(_Params):
    prompt: str = Field(min_length=1)
    mode: Literal["new", "continue"] = "new"
    session_id: str | None = None
    agent_type: str | None = None
    approvals: Literal["auto", "ask", "deny"] = "auto"  # extension


class AgentRunResult(BaseModel):
    status: Literal["started"]
    session_id: str
    agent_type: str


class AgentStopResult(BaseModel):
    status: Literal["stopped"]


class AgentRespondParams(_Params):
    tool_use_id: str = Field(min_length=1)
    response: str
    is_error: bool = False
    session_id: str | None = None  # extension: whose request (default: found by its id)


class AgentRespondResult(BaseModel):
    status: Literal["sent"]
    tool_use_id: str
    decision: Literal["allow", "deny"]  # extension


class SessionListParams(_Params):
    limit: int = Field(default=20, ge=1, le=1000)


class SessionListResult(BaseModel):
    sessions: list[dict[str, Any]]
    total: int


class PendingRequest(BaseModel):
    """A permission request waiting for an answer (`agent/pending`, an extension)."""

    session_id: str
    agent_type: str
    tool_use_id: str
    tool_name: str
    input: Any
    seq: int
    ts: str


class AgentPendingResult(BaseModel):
    requests: list[PendingRequest]


class AgentSeat:
    """The agent session this server started last: the one `agent/stop` and
    `agent/respond` speak of, and `status/get` reports."""

    def __init__(self, sessions: SessionService, config: Config) -> None:
        self.sessions = sessions
        self.config = config
        self.default_agent = config.loop.default_agent
        self.session_id: str | None = None
        self.agent_type: str | None = None

    def current(self) -> SessionInfo | None:
        if self.session_id is None:
            return None
        try:
            return self.sessions.get(self.session_id)
        except UnknownSession:
            return None

    def state(self) -> AgentState:
        """idle, running, waiting (a permission request open), stopped or error."""
        info = self.current()
        if info is None:
            return "idle"
        if not info.ended:
            return "waiting" if self.sessions.pending(info.session_id) else "running"
        if info.status == "completed":
            return "idle"
        return "stopped" if info.status == "stopped" else "error"

    def asking(self, tool_use_id: str) -> str:
        """The running session with the pending request `tool_use_id`: this server's own
        first, then any other (a terminal's `ralph agent run --approvals ask` too)."""
        found = self.sessions.asking(tool_use_id, prefer=self.session_id)
        if found is not None:
            return found
        return self.running().session_id  # not pending there either: answered -32003

    def running(self) -> SessionInfo:
        info = self.current()
        if info is None or info.ended:
            raise RpcError(AGENT_NOT_RUNNING, "Agent not running")
        return info


def program_problem(config: Config, name: str) -> str | None:
    """Why agent `name`'s program cannot start here (None: it can); ConfigError for an
    agent that is neither configured nor built in."""
    agent = config.agent(name)
    adapter = adapter_for(agent.adapter)
    argv = list(agent.argv) or adapter.default_argv(agent.model)
    if not argv:
        return "it has no command line"
    return check_program(argv[0], adapter.install_hint).problem


def decision_of(response: str, is_error: bool) -> tuple[Literal["allow", "deny"], str]:
    """`agent/respond`'s answer: allow for "approved"/"allow" (not an error), else deny,
    with the response as the reason when it is more than a word of refusal."""
    word = response.strip().lower()
    if not is_error and word in ALLOWING:
        return "allow", ""
    return "deny", "" if word in DENYING else response


def session_record(info: SessionInfo, sessions: SessionService) -> dict[str, Any]:
    prompt = sessions.text(info.prompt_hash)
    return {"session_id": info.session_id, "agent_type": info.agent,
            "summary": info.title or (prompt.strip().splitlines()[0][:200]
                                      if prompt.strip() else ""),
            "message_count": 1 + (1 if info.final_text_hash else 0),
            "start_time": info.started_at, "last_updated": info.finished_at or info.started_at,
            "status": info.status, "project_path": info.cwd, "kind": "ralph"}


def register(registry: Registry, seat: AgentSeat) -> None:
    sessions = seat.sessions

    @registry.method("agent/run", params=AgentRunParams, result=AgentRunResult,
                     errors=ERRORS["run"], summary="Start an agent on a prompt.")
    async def agent_run(params: AgentRunParams) -> AgentRunResult:
        if params.mode == "continue" and not params.session_id:
            raise RpcError(INVALID_PARAMS, "Invalid params",
                           {"session_id": "required when mode is continue"})
        running = seat.current()
        if running is not None and not running.ended:
            raise RpcError(AGENT_ALREADY_RUNNING, "Agent already running",
                           {"session_id": running.session_id})
        # Continuing: the agent of the continued session, unless another is named (launch
        # decides, and refuses one that cannot continue it).
        agent = params.agent_type or (None if params.mode == "continue"
                                      else seat.default_agent)
        continue_from = params.session_id if params.mode == "continue" else None
        if agent is not None:
            try:
                problem = program_problem(seat.config, agent)
            except ConfigError as exc:
                problem = str(exc)
            if problem is not None:
                raise RpcError(AGENT_NOT_CONFIGURED, "Agent not configured",
                               {"agent_type": agent, "reason": problem})
        try:
            session_id = await sessions.launch(params.prompt, agent,
                                               continue_from=continue_from,
                                               approvals=params.approvals)
        except UnknownSession:
            raise RpcError(SESSION_NOT_FOUND, "Session not found",
                           {"session_id": continue_from}) from None
        except AgentBusy as exc:
            raise RpcError(AGENT_ALREADY_RUNNING, "Agent already running",
                           {"reason": str(exc)}) from None
        except ConfigError as exc:  # the continued session's agent is no longer configured
            raise RpcError(AGENT_NOT_CONFIGURED, "Agent not configured",
                           {"agent_type": agent, "reason": str(exc)}) from None
        except (AgentError, SessionError) as exc:  # cannot continue, cannot run so, ...
            raise RpcError(AGENT_ERROR, "Agent error",
                           {"agent_type": agent, "reason": str(exc)}) from None
        agent = sessions.get(session_id).agent
        seat.session_id, seat.agent_type = session_id, agent
        return AgentRunResult(status="started", session_id=session_id, agent_type=agent)

    @registry.method("agent/stop", result=AgentStopResult, errors=ERRORS["stop"],
                     summary="Stop the running agent (its whole process tree).")
    async def agent_stop() -> AgentStopResult:
        info = seat.running()
        await sessions.stop(info.session_id, by="remote")
        return AgentStopResult(status="stopped")

    @registry.method("agent/respond", params=AgentRespondParams, result=AgentRespondResult,
                     errors=ERRORS["respond"],
                     summary="Answer the running agent's permission request.")
    async def agent_respond(params: AgentRespondParams) -> AgentRespondResult:
        session_id = params.session_id or seat.asking(params.tool_use_id)
        decision, message = decision_of(params.response, params.is_error)
        try:
            sessions.answer(session_id, params.tool_use_id, decision, message, by="remote")
        except UnknownSession:
            raise RpcError(SESSION_NOT_FOUND, "Session not found",
                           {"session_id": session_id}) from None
        except NotPending as exc:
            raise RpcError(AGENT_ERROR, "Agent error", {"tool_use_id": params.tool_use_id,
                                                        "reason": str(exc)}) from None
        return AgentRespondResult(status="sent", tool_use_id=params.tool_use_id,
                                  decision=decision)

    @registry.method("agent/pending", result=AgentPendingResult,
                     summary="The permission requests waiting for an answer, of every "
                             "running session, oldest first (an extension).")
    async def agent_pending() -> AgentPendingResult:
        found = await asyncio.to_thread(sessions.open_requests)
        return AgentPendingResult(requests=[
            PendingRequest(session_id=info.session_id, agent_type=info.agent,
                           tool_use_id=request.tool_use_id, tool_name=request.tool_name,
                           input=request.input, seq=request.seq, ts=request.ts)
            for info, request in found])

    @registry.method("session/list", params=SessionListParams, result=SessionListResult,
                     summary="Agent sessions, newest first: Ralph's, then the CLIs' own.")
    async def session_list(params: SessionListParams) -> SessionListResult:
        # reading the CLIs' conversations may take a while: not on the event loop
        return await asyncio.to_thread(list_sessions, params.limit)

    def list_sessions(limit: int) -> SessionListResult:
        found = [session_record(info, sessions) for info in sessions.list(limit=limit)]
        native = [{"session_id": c.id, "agent_type": c.adapter, "summary": c.summary,
                   "message_count": c.messages, "start_time": c.first_at,
                   "last_updated": c.last_at, "kind": "native"} for c in sessions.native()]
        total = sum(1 for _ in sessions.store.read(topic="session.started")) + len(native)
        return SessionListResult(sessions=(found + native)[:limit], total=total)

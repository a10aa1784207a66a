"""Sessions that run a Ralph agent (extension): `session.launch` with `agent` and
`prompt_text` runs the agent's CLI through its Ralph adapter (ralph.agents), and the run's
events get, besides `provider.raw`, the adapter's normalised events as Ralph's agent
runner names them: `agent.started`, `agent.output` {kind, content, tool, chars,
log_offset, stream?}, `agent.usage`, `agent.finished` {status, exit_code, session_id,
message, ...}.

The agent is one of Ralph's built-in agents (codex, claude, gemini, opencode), `command`
(the session's `argv` is its command line, the prompt on stdin or in `{prompt}` /
`{prompt_file}`), or one defined in a `ralph.toml` at the workspace's root
(`[agents.<name>]`). A launch's `argv` replaces the agent's command line; without either,
the adapter's default command runs, with its program taken from `.local/machine.yaml`
`provider_bins.<agent>` when that names one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ralph.agents import Adapter, AgentCommand, AgentError, adapter_for
from ralph.agents.runner import output_meta, priced, resolve_program
from ralph.company.layout import CompanyError
from ralph.company.worktrees import read_machine
from ralph.config import ConfigError, ResolvedAgent, load_config
from ralph.proc import ProcessResult

PROMPT_FILE = "prompt.md"  # in the run's directory: `{prompt_file}` names it
Emit = Callable[[str, dict[str, Any]], None]


@dataclass(frozen=True)
class AgentPlan:
    """An agent ready to run on a prompt."""

    agent: ResolvedAgent
    adapter: Adapter
    command: AgentCommand


def plan_agent(root: Path, run: Path, name: str, prompt: str,
               argv: Sequence[str] | None) -> AgentPlan:
    """The agent `name` on `prompt`, its program checked; CompanyError if it cannot run."""
    try:
        config = load_config(root, required=False)
        if name == "command" and name not in config.agents:
            if not argv:
                raise CompanyError("agent 'command' needs argv: the program to run",
                                   agent=name)
            resolved = ResolvedAgent(name=name, adapter="command", argv=tuple(argv), env={},
                                     model=None,
                                     timeout_seconds=config.loop.agent_timeout_seconds)
        else:
            resolved = config.agent(name)
            if argv:
                resolved = replace(resolved, argv=tuple(argv))
        adapter = adapter_for(resolved.adapter)
        base = list(resolved.argv) or adapter.default_argv(resolved.model)
        program = read_machine(root).provider_bins.get(name) if not resolved.argv else None
        if program and base:
            base[0] = program
        command = adapter.build(base, resolved.model, prompt, str(run / PROMPT_FILE))
        resolve_program(command.argv, resolved, adapter.install_hint)
    except (ConfigError, AgentError) as exc:
        raise CompanyError(str(exc), agent=name) from None
    return AgentPlan(resolved, adapter, command)


class AgentEvents:
    """The adapter's reading of the agent's output, as `agent.*` events."""

    def __init__(self, plan: AgentPlan, emit: Emit) -> None:
        self._plan = plan
        self._emit = emit
        self._parser = plan.adapter.parser()

    def started(self) -> None:
        agent = self._plan.agent
        self._emit("agent.started", {"agent": agent.name, "adapter": agent.adapter,
                                     "argv": self._plan.command.shown, "session_id": None})

    def line(self, stream: str, line: str, offset: int) -> None:
        """One line of output (`offset`: where it begins in outputs/<stream>.txt)."""
        for event in self._parser.feed_line(stream, line):
            meta = output_meta(event.kind, event.content, event.tool, len(event.content),
                               offset, delta=event.delta)
            if stream == "stderr":
                meta["stream"] = "stderr"
            self._emit("agent.output", meta)

    def finished(self, result: ProcessResult | None, stopped: bool, error: str | None) -> None:
        """`agent.usage` (if the CLI said) and `agent.finished`, with the adapter's verdict."""
        parser, agent = self._parser, self._plan.agent
        exit_code = result.exit_code if result is not None else None
        verdict = self._plan.adapter.classify(exit_code, parser)
        status = ("cancelled" if stopped else "timeout" if result and result.timed_out
                  else "error" if result is None else verdict.status)
        model = parser.model or agent.model
        usage = priced(parser.usage, model, agent)
        if usage is not None:
            self._emit("agent.usage", {
                "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
                "cached_tokens": usage.cached_tokens, "cost_usd": usage.cost_usd,
                "model": model})
        self._emit("agent.finished", {
            "status": status, "exit_code": exit_code,
            "session_id": verdict.session_id or parser.session_id,
            "reset_at": verdict.reset_at, "message": error or verdict.message,
            "duration_s": round(result.duration_s, 4) if result is not None else None,
            "not_json_lines": parser.not_json,
            "pid": result.pid if result is not None else None})

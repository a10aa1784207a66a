"""`ralph doctor`: can each agent run here? Binary, version, the command Ralph will use."""

from __future__ import annotations

import asyncio
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ralph.agents import ADAPTERS, adapter_for
from ralph.agents.base import AgentError
from ralph.config import BUILTIN_AGENTS, Config
from ralph.proc import ProcessError, run_process

VERSION_TIMEOUT_S = 20.0


@dataclass
class AgentReport:
    agent: str
    adapter: str
    configured: bool  # has an [agents.<name>] section
    default: bool  # loop.default_agent
    argv: list[str]  # the command line Ralph will run ({prompt} placeholders unfilled)
    prompt_via: str  # "stdin", or the placeholder that carries it
    model: str | None
    env: list[str]  # names only: values may be secrets
    binary: str | None
    path: str | None  # where the binary was found on PATH
    version: str | None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


async def diagnose(config: Config, cwd: Path) -> list[AgentReport]:
    """Every configured agent and every known adapter, in that order, each checked once."""
    names = list(dict.fromkeys([*config.agents, *BUILTIN_AGENTS]))
    return list(await asyncio.gather(*(_check(config, name, cwd) for name in names)))


async def _check(config: Config, name: str, cwd: Path) -> AgentReport:
    agent = config.agent(name)
    adapter = adapter_for(agent.adapter)
    problems: list[str] = []
    try:
        command = adapter.build(list(agent.argv), agent.model, "{prompt}", "{prompt_file}")
        argv = command.shown
        via = "stdin" if command.stdin is not None else next(
            (p for p in ("{prompt_file}", "{prompt}") if any(p in a for a in argv)), "stdin")
    except AgentError as exc:
        argv, via = list(agent.argv), "stdin"
        problems.append(str(exc))
    program = argv[0] if argv else None
    path = shutil.which(program) if program else None
    version = None
    if program and path is None:
        hint = f": install it with `{adapter.install_hint}`" if (
            adapter.install_hint and program == adapter.binary) else ""
        problems.append(f"{program} not found on PATH{hint}")
    elif path is not None and adapter.name != "command":
        version = await _version(path, cwd, problems)
    return AgentReport(agent=name, adapter=agent.adapter, configured=name in config.agents,
                       default=name == config.loop.default_agent, argv=argv, prompt_via=via,
                       model=agent.model, env=sorted(agent.env), binary=program, path=path,
                       version=version, problems=problems)


async def _version(path: str, cwd: Path, problems: list[str]) -> str | None:
    try:
        result = await run_process([path, "--version"], cwd=cwd, timeout_s=VERSION_TIMEOUT_S,
                                   tail_bytes=4096)
    except ProcessError as exc:
        problems.append(str(exc))
        return None
    text = result.tail.decode("utf-8", "replace").strip().splitlines()
    if result.timed_out or result.exit_code != 0:
        problems.append(f"`{Path(path).name} --version` failed"
                        + (f": {text[-1]}" if text else ""))
        return None
    return text[-1] if text else None


__all__ = ["ADAPTERS", "AgentReport", "diagnose"]

"""`ralph doctor`: can each agent run here? Binary, version, login, the command Ralph will use.

A program that cannot start (not found, not executable, a format the kernel does not run) is
a problem for every agent. Not being logged in is shown for every CLI, and is a problem (exit
1) only for the default agent, and only when the CLI would certainly find no credentials
(`logged_in` False): an agent the loop does not use by default may well never need them, and
where credentials may sit in a keychain doctor cannot see (`logged_in` None) it says so.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ralph.agents import ADAPTERS, adapter_for
from ralph.agents.base import Adapter, AgentError, Login
from ralph.agents.program import check_program
from ralph.config import BUILTIN_AGENTS, Config, ResolvedAgent
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
    # Credentials: True found, False none (the CLI would find none either), None cannot tell
    # or not applicable (the command adapter). `login`: what was found (names and paths,
    # never values), else the fix, or why it cannot be told.
    logged_in: bool | None = None
    login: str = ""
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
    path = version = None
    if program:
        check = check_program(program, adapter.install_hint if program == adapter.binary
                              else None)
        path = check.path
        if check.problem is not None:
            problems.append(check.problem)
        elif adapter.name != "command":
            version = await _version(path or program, cwd, problems)
    default = name == config.loop.default_agent
    login = _login(adapter, agent, cwd)
    if default and login.logged_in is False:
        problems.append(f"not logged in: {login.found}")
    return AgentReport(agent=name, adapter=agent.adapter, configured=name in config.agents,
                       default=default, argv=argv, prompt_via=via, model=agent.model,
                       env=sorted(agent.env), binary=program, path=path, version=version,
                       logged_in=login.logged_in, login=login.found, problems=problems)


def _login(adapter: Adapter, agent: ResolvedAgent, cwd: Path) -> Login:
    """The CLI's credentials as its process would see them: Ralph's environment with the
    agent's `env` over it (as the runner starts it)."""
    return adapter.login({**os.environ, **agent.env}, cwd, agent.model)


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

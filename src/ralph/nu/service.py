"""Named sessions (`ralph nu`): the loop service run on a session instead of a PRD.

What `ralph nu` adds to the loop is set up here, for every face: the name checked, the spec
and the prompt read, the agent made to run attached to one long-lived server (opencode's
`web`, else `serve`) on the session's port with the session's model, and the plan
(ralph.nu.plan) that makes the session the loop's one task. The loop does the rest: gates,
commits, events, pause and stop, rate limits, and verifying a completion claim.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ralph.agents import adapter_for
from ralph.agents.opencode import OpencodeAdapter
from ralph.agents.server import port_taken
from ralph.config import AgentConfig, Config, load_config
from ralph.loop.iteration import ralph_command
from ralph.loop.models import NO_ITERATION_LIMIT
from ralph.loop.paths import ProjectPaths
from ralph.loop.service import LoopService, check_program
from ralph.notes import check_session
from ralph.nu.errors import NuError
from ralph.nu.options import DEFAULT_MODEL, NuOptions
from ralph.nu.plan import NuPlan, PromptParts
from ralph.scaffold import template

if TYPE_CHECKING:
    from ralph.loop.events import Observer
    from ralph.loop.results import RunOutcome
    from ralph.store import FileStore

@dataclass(frozen=True)
class NuSetup:
    """A session ready to run: its plan, and the loop service that runs it."""

    plan: NuPlan
    service: LoopService
    max_iterations: int
    server_port: int | None  # the agent's server's, when it runs attached to one
    warnings: list[str] = field(default_factory=list)  # for the face to show before it runs

    async def run(self, options: NuOptions) -> RunOutcome:
        return await self.service.run(options.agent, self.max_iterations,
                                      require_clean=options.require_clean,
                                      allow_dirty=options.allow_dirty)


def prepare(root: Path, options: NuOptions, store: FileStore, *,
            observer: Observer | None = None) -> NuSetup:
    """Everything `ralph nu` checks before anything starts, then the loop service for it.

    `store` holds the session (its iterations, notes and claims); the loop's own record
    (runs, events, control from other terminals) stays in the project's store, as for
    `ralph run`, so that `ralph stop`, `pause` and `log` reach a session wherever its
    store is."""
    check_session(options.name)
    if options.iterations < 0:
        raise NuError("iterations must be 0 (until verified complete) or more")
    config = load_config(root)
    text = options.prompt if options.prompt is not None else _template(root, config)
    spec_path = Path(options.spec)
    spec = ""
    if "{spec}" in text:
        full = spec_path if spec_path.is_absolute() else root / spec_path
        try:
            spec = full.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise NuError(f"spec file {options.spec} not found: write the session's spec "
                          "there, or name it with --spec") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise NuError(f"cannot read spec file {options.spec}: {exc}") from None
    config, port, warnings = _session_agent(config, options)
    # What the run would find first, found before anything is printed or started.
    check_program(config.agent(options.agent))
    if port is not None and port_taken(port):
        raise NuError(f"port {port} is already in use on 127.0.0.1: stop what listens there, "
                      "or choose another with --port")
    plan = NuPlan(options.name, store, PromptParts(text, spec, options.spec, ralph_command()))
    project_store = ProjectPaths(root).store
    same = store.path.resolve() == project_store.resolve()
    service = LoopService(root, config=config, store=store if same else None,
                          observer=observer, plan=plan)
    return NuSetup(plan, service, options.iterations or NO_ITERATION_LIMIT, port, warnings)


def _template(root: Path, config: Config) -> str:
    """PROMPT_nu.md (files.nu) if the project has one, else Ralph's built-in template."""
    path = root / config.files.nu
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return template("PROMPT_nu.md")
    except (OSError, UnicodeDecodeError) as exc:
        raise NuError(f"cannot read {config.files.nu}: {exc}") from None


def _session_agent(config: Config, options: NuOptions
                   ) -> tuple[Config, int | None, list[str]]:
    """The configuration with the session's agent set up: opencode runs attached to one
    server (`web`, or `serve` where there is no `web`) on the session's port; the model
    reaches it. The port of that server, if any, and what the user should know."""
    resolved = config.agent(options.agent)  # ConfigError for an unknown agent
    section = config.agents.get(options.agent, AgentConfig())
    update: dict[str, object] = {}
    warnings: list[str] = []
    opencode = isinstance(adapter_for(resolved.adapter), OpencodeAdapter)
    model = options.model
    if model is None and opencode and section.model is None:
        model = DEFAULT_MODEL
    if model is not None:
        update["model"] = model
        # A model reaches an agent's own command line only through the adapter's default
        # one; opencode's flag is known, so a command line of the user's gets it too.
        if opencode and section.argv:
            update["argv"] = with_model(section.argv, model)
        elif section.argv and options.model is not None:
            warnings.append(f"--model does not reach agent '{options.agent}': its command "
                            f"line is its own ([agents.{options.agent}] argv in ralph.toml)")
    if opencode:
        update |= {"server": True, "port": options.port, "server_command": "web"}
    if not update:
        return config, None, warnings
    agents = {**config.agents, options.agent: section.model_copy(update=update)}
    loop = config.loop.model_copy(update={"default_agent": options.agent})
    return (config.model_copy(update={"agents": agents, "loop": loop}),
            options.port if opencode else None, warnings)


def with_model(argv: list[str], model: str) -> list[str]:
    """opencode's command line with `model` as its model: the one it names replaced
    (`--model X`, `-m X`, `--model=X`), else `--model MODEL` added."""
    out = list(argv)
    for index, word in enumerate(out):
        if word in ("--model", "-m") and index + 1 < len(out):
            out[index + 1] = model
            return out
        if word.startswith("--model="):
            out[index] = f"--model={model}"
            return out
    return [*out, "--model", model]


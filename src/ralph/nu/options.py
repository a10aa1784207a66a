"""What `ralph nu` can be asked for, and its defaults (the specification's), without the loop:
the command line declares its options from here."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_SPEC = "./specs/SPEC.md"
DEFAULT_MODEL = "anthropic/claude-sonnet-4-5"  # for opencode, as the specification has it
DEFAULT_PORT = 4096
DEFAULT_AGENT = "opencode"


@dataclass(frozen=True)
class NuOptions:
    """What `ralph nu` was asked for (None: the default)."""

    name: str
    prompt: str | None = None  # replaces the template
    spec: str = DEFAULT_SPEC
    model: str | None = None
    iterations: int = 0  # 0: until the session is verified complete
    port: int = DEFAULT_PORT
    agent: str = DEFAULT_AGENT
    require_clean: bool = False  # the loop's tree policy (see ralph.loop.service.TreePolicy)
    allow_dirty: bool = False

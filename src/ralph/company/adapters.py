"""`adapter.status`: Ralph's agent adapters (codex, claude, gemini, opencode, command) as
AgentCompany adapter statuses, with what each can really do, found by asking the adapter
itself rather than written down beside it: whether it can continue a conversation
(`continue_argv`), whether it can ask before each tool call (`approvals_argv` with `ask`),
whether its output parser reads the CLI's JSON (events, structured output, token usage).

A program is found as the original finds it: `provider_bins[<provider>]` of
`.local/machine.yaml`, else the adapter's program on PATH.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from ralph.agents import ADAPTERS
from ralph.agents.base import Adapter, AgentError, JsonOutputParser
from ralph.agents.program import check_program
from ralph.approvals.policy import ApprovalPolicy, PolicyFile
from ralph.company.files import FileFormatError, read_yaml
from ralph.company.schemas import MachineYaml, schema_issues
from ralph.company.workspace import MACHINE_FILE

# The original's names were <provider>_cli; Ralph's generic command adapter keeps its name.
ORDER = ("codex", "claude", "gemini", "opencode", "command")


def adapter_name(provider: str) -> str:
    return provider if provider == "command" else f"{provider}_cli"


def provider_bins(root: Path) -> dict[str, str]:
    """`provider_bins` of the machine file ({} when it is missing or invalid)."""
    try:
        data = read_yaml(root / MACHINE_FILE)
    except (OSError, ValueError, FileFormatError):
        return {}
    if schema_issues(MachineYaml, data):
        return {}
    return {str(k): str(v) for k, v in (data.get("provider_bins") or {}).items()}


def capabilities(adapter: Adapter) -> dict[str, Any]:
    return {
        "supports_streaming_events": True,  # every adapter reads its CLI's output as it comes
        "supports_resumable_session": _can(lambda: adapter.continue_argv(["agent"], "c1")),
        "supports_structured_output": isinstance(adapter.parser(), JsonOutputParser),
        "supports_token_usage": isinstance(adapter.parser(), JsonOutputParser),
        "supports_patch_export": False,  # the agents edit the work tree; none exports a patch
        "supports_interactive_approval_callbacks": _asks(adapter),
        "supports_worktree_isolation": "recommended",
    }


def _can(action: Any) -> bool:
    try:
        action()
    except AgentError:
        return False
    return True


def _asks(adapter: Adapter) -> bool:
    """Whether the adapter can run with approvals `ask` (a hook or bridge that asks Ralph
    before each tool call)."""
    with tempfile.TemporaryDirectory(prefix="ralph-adapter-") as folder:
        policy = PolicyFile(ApprovalPolicy("ask", (), (), 60.0), Path(folder), "probe",
                            Path(folder)).encode()
        return _can(lambda: adapter.approvals_argv(["agent"], "ask", policy, Path(folder)))


def adapter_statuses(root: Path) -> list[dict[str, Any]]:
    """[{name, provider, mode, available, reason?, capabilities}] for each adapter."""
    bins = provider_bins(root)
    statuses: list[dict[str, Any]] = []
    for provider in ORDER:
        adapter = ADAPTERS[provider]
        status: dict[str, Any] = {"name": adapter_name(provider), "provider": provider,
                                  "mode": "cli", "available": True}
        program = bins.get(provider) or adapter.binary
        if program is not None:
            problem = check_program(program, adapter.install_hint).problem
            if problem is not None:
                status["available"] = False
                status["reason"] = problem
        status["capabilities"] = capabilities(adapter)
        statuses.append(status)
    return statuses

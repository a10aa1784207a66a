"""A fake model server for tests: speaks the OpenAI Responses and Chat Completions, Anthropic
Messages and Gemini APIs on 127.0.0.1, answering from a scripted scenario.

    from ralph.testing.fakellm import fakellm_server

    with fakellm_server({"rules": [...], "default": {"text": "OK"}}) as server:
        ...  # point a CLI at server.url; assert on server.requests

`python -m ralph.testing.fakellm --scenario FILE [--port 0] [--log FILE]` runs it on its own.
The scenario format is described in `ralph.testing.fakellm.scenario`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ralph.testing.fakellm.scenario import (
    ErrorSpec,
    Match,
    Reply,
    Rule,
    Scenario,
    ScenarioError,
    Usage,
)
from ralph.testing.fakellm.server import FakeLLM, LoggedRequest

__all__ = [
    "ErrorSpec",
    "FakeLLM",
    "LoggedRequest",
    "Match",
    "Reply",
    "Rule",
    "Scenario",
    "ScenarioError",
    "Usage",
    "fakellm_server",
]


@contextmanager
def fakellm_server(
    scenario: Scenario | dict[str, Any] | str | Path,
    port: int = 0,
    *,
    log_path: str | Path | None = None,
) -> Iterator[FakeLLM]:
    """A started FakeLLM for the duration of the `with` block (or of a pytest fixture):

        @pytest.fixture
        def llm():
            with fakellm_server(SCENARIO) as server:
                yield server
    """
    server = FakeLLM(scenario, port, log_path=log_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()

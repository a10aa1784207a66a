"""A factory fixture: `llm(scenario)` starts a fake model server that stops after the test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from ralph.testing.fakellm import FakeLLM, Scenario, fakellm_server


@pytest.fixture
def llm() -> Iterator[Callable[..., FakeLLM]]:
    with ExitStack() as stack:

        def start(scenario: Scenario | dict[str, Any] | Path, **kwargs: Any) -> FakeLLM:
            return stack.enter_context(fakellm_server(scenario, **kwargs))

        yield start

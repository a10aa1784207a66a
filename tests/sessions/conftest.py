"""The store of the project each test module's `root` fixture makes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ralph.store import Store


@pytest.fixture
def store(root: Path) -> Iterator[Store]:
    with Store(root / ".ralph" / "store") as opened:
        yield opened

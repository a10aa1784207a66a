"""Fixtures for CLI tests: an in-process `ralph`, a store path, and isolation from the repo."""

from __future__ import annotations

import io
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ralph.cli.main import run
from tests.cli.helpers import Cli, Result


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A forgotten --store lands in tmp_path, never in the repository's .ralph/."""
    monkeypatch.setenv("RALPH_STORE", str(tmp_path / "env-store"))
    monkeypatch.delenv("RALPH_DEBUG", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def cli_store(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def cli(capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Iterator[Cli]:
    """Run `ralph ARGS...` in this process, with `stdin` as its piped input."""
    logger = logging.getLogger("ralph")
    saved = (list(logger.handlers), logger.level, logger.propagate)

    def invoke(*args: str, stdin: bytes = b"") -> Result:
        capfd.readouterr()
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        code = run(list(args))
        out, err = capfd.readouterr()
        return Result(code, out, err)

    yield invoke
    # run() routes the `ralph` logger to the stderr of the moment; undo it for other tests.
    logger.handlers[:] = saved[0]
    logger.setLevel(saved[1])
    logger.propagate = saved[2]

"""Fixtures for the scaffold tests: a project directory in tmp_path and an in-process `ralph`."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ralph.cli.main import run


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


RunCli = Callable[..., Result]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty directory, outside any git repository, that is also the working directory."""
    root = tmp_path / "project"
    root.mkdir()
    assert not any((d / ".git").exists() for d in (root, *root.parents))
    monkeypatch.chdir(root)
    monkeypatch.setenv("RALPH_STORE", str(tmp_path / "env-store"))
    monkeypatch.delenv("RALPH_DEBUG", raising=False)
    return root


@pytest.fixture
def cli(project: Path, capfd: pytest.CaptureFixture[str]) -> Iterator[RunCli]:
    """`ralph ARGS...` in this process, in `project`; returns exit code, stdout, stderr."""
    logger = logging.getLogger("ralph")
    saved = (list(logger.handlers), logger.level, logger.propagate)

    def invoke(*args: str) -> Result:
        capfd.readouterr()
        code = run(list(args))
        out, err = capfd.readouterr()
        return Result(code, out, err)

    yield invoke
    logger.handlers[:] = saved[0]
    logger.setLevel(saved[1])
    logger.propagate = saved[2]

"""Commands that only read never create `.ralph/store` (nor `.ralph/`) where none exists."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.cli.helpers import run_ralph
from tests.loop.conftest import Project, project

__all__ = ["project"]

READERS = [
    ("notes", "list"),
    ("notes", "list", "--json"),
    ("store", "stats"),
    ("store", "cat"),
    ("store", "last", "agent.output", "3"),
    ("store", "errors"),
    ("store", "sync"),
    ("store", "rebuild"),
    ("store", "gc", "--dry-run"),
    ("status",),
    ("status", "--json"),
]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "RALPH_STORE"}


@pytest.mark.parametrize("without", [".ralph/store", ".ralph"])
def test_reading_commands_leave_no_store_behind(project: Project, without: str) -> None:
    shutil.rmtree(project.root / without, ignore_errors=True)
    for args in READERS:
        result = run_ralph(*args, cwd=project.root, env=_env())
        assert result.code == 0, (args, result.err)
        assert not (project.root / without).exists(), args
    stats = json.loads(run_ralph("store", "stats", cwd=project.root, env=_env()).out)
    assert (stats["frames"], stats["last_seq"]) == (0, 0)
    assert run_ralph("notes", "list", cwd=project.root, env=_env()).out == "no notes\n"
    missing = run_ralph("store", "get", "0" * 25, cwd=project.root, env=_env())
    assert missing.code == 1 and "no frame" in missing.err
    assert not (project.root / without).exists()


def test_a_store_named_by_flag_is_not_created_by_reading(tmp_path: Path) -> None:
    store = tmp_path / "nowhere" / "store"
    for args in READERS[:9]:
        assert run_ralph(*args, "--store", str(store), env=_env()).code == 0, args
    assert not (tmp_path / "nowhere").exists()
    added = run_ralph("notes", "add", "first", "--type", "learning", "--store", str(store),
                      env=_env())
    assert added.code == 0, added.err
    listed = run_ralph("notes", "list", "--json", "--store", str(store), env=_env())
    assert [note["text"] for note in json.loads(listed.out)] == ["first"]

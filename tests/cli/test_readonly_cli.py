"""Commands that only read never create `.ralph/store` (nor `.ralph/`) where none exists."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
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


def initialised(root: Path) -> Path:
    """A git repository made a project by `ralph init` (which makes an empty
    `.ralph/store/`); the store's path."""
    root.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=root, check=True, timeout=60,
                   stdin=subprocess.DEVNULL)
    done = run_ralph("init", cwd=root, env=_env())
    assert done.code == 0, done.err
    store = root / ".ralph" / "store"
    assert store.is_dir() and list(store.iterdir()) == []
    return store


def test_reading_commands_leave_the_empty_store_of_init_empty(tmp_path: Path) -> None:
    """An empty store directory reads as no store: looking writes nothing into it (no head,
    no index), so that the first run finds it as `ralph init` left it."""
    store = initialised(tmp_path / "proj")
    for args in [("notes", "list"), ("store", "stats"), ("store", "cat"), ("status",),
                 ("status", "--json"), ("log",)]:
        result = run_ralph(*args, cwd=tmp_path / "proj", env=_env())
        assert result.code == 0, (args, result.err)
        assert list(store.iterdir()) == [], args
    stats = json.loads(run_ralph("store", "stats", cwd=tmp_path / "proj", env=_env()).out)
    assert (stats["frames"], stats["last_seq"]) == (0, 0)

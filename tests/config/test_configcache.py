"""ralph.configcache: `[files]` of a ralph.toml validated before, read without pydantic, and
never an answer for a ralph.toml that was not validated as it is now."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from ralph import configcache
from ralph.config import ConfigError, load_config
from ralph.configcache import CACHE_FILE, CheckedFiles, project_files

TOML = '[files]\nprd = "tasks/PRD.md"\n'


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / ".ralph").mkdir()
    (tmp_path / "ralph.toml").write_text(TOML)
    return tmp_path


def cached(root: Path) -> dict[str, object]:
    record = orjson.loads((root / CACHE_FILE).read_bytes())
    assert isinstance(record, dict)
    return record


def test_a_validated_ralph_toml_is_read_from_the_cache(root: Path) -> None:
    first = project_files(root)  # validated (a miss), and kept
    assert not isinstance(first, CheckedFiles) and first.prd == "tasks/PRD.md"
    assert "tasks/PRD.md" in str(cached(root)["files"])
    assert (root / CACHE_FILE).stat().st_mode & 0o777 == 0o600
    assert (root / CACHE_FILE).with_name(".gitignore").read_text().endswith("*\n")
    assert project_files(root) == CheckedFiles(prd="tasks/PRD.md", progress="progress.md",
                                               agents="AGENTS.md", prompt="PROMPT_build.md")


def test_a_changed_ralph_toml_is_validated_again_even_with_the_same_size_and_mtime(
        root: Path) -> None:
    load_config(root)
    toml = root / "ralph.toml"
    stat = toml.stat()
    toml.write_text(TOML.replace("prd =", "prx ="))  # same size
    os.utime(toml, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with pytest.raises(ConfigError) as from_cache:
        project_files(root)
    with pytest.raises(ConfigError) as direct:
        load_config(root)
    assert str(from_cache.value) == str(direct.value)
    assert "ralph.toml:2: unknown key 'files.prx'" in str(direct.value)


def test_the_cache_holds_a_digest_of_ralph_toml_not_its_secrets(tmp_path: Path) -> None:
    (tmp_path / ".ralph").mkdir()
    (tmp_path / "ralph.toml").write_text(
        '[agents.x]\nargv = ["x"]\n\n[agents.x.env]\nAPI_KEY = "sk-secret-1234"\n')
    load_config(tmp_path)
    assert b"sk-secret" not in (tmp_path / CACHE_FILE).read_bytes()
    assert isinstance(project_files(tmp_path), CheckedFiles)


def test_a_missing_ralph_toml_gets_load_configs_error(tmp_path: Path) -> None:
    (tmp_path / ".ralph").mkdir()
    with pytest.raises(ConfigError, match=r"no ralph\.toml"):
        project_files(tmp_path)


def test_nothing_is_kept_where_ralph_has_no_directory(tmp_path: Path) -> None:
    (tmp_path / "ralph.toml").write_text(TOML)
    assert project_files(tmp_path).prd == "tasks/PRD.md"
    assert not (tmp_path / ".ralph").exists()


@pytest.mark.parametrize("change", ["version", "code", "pydantic", "damaged",
                                    "not-an-object", "bad-files"])
def test_a_record_from_other_code_or_damaged_is_not_trusted(
        root: Path, monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    load_config(root)
    path = root / CACHE_FILE
    record = cached(root)
    if change == "version":
        monkeypatch.setattr(configcache, "__version__", "0.0.0-other")
    elif change in ("code", "pydantic"):  # another ralph/config.py, another pydantic
        record[change] = [1, 2]
        path.write_bytes(orjson.dumps(record))
    elif change == "damaged":
        path.write_bytes(b"{not json")
    elif change == "not-an-object":
        path.write_bytes(b"[]")
    else:
        record["files"] = {"prd": ""}
        path.write_bytes(orjson.dumps(record))
    assert not isinstance(project_files(root), CheckedFiles)  # validated again
    assert isinstance(project_files(root), CheckedFiles)  # and kept again


def test_a_cache_that_cannot_be_written_is_no_error(root: Path) -> None:
    (root / ".ralph" / "cache").write_text("a file where the directory would be")
    assert load_config(root).files.prd == "tasks/PRD.md"
    assert project_files(root).prd == "tasks/PRD.md"


def test_an_unchanged_record_is_not_written_again(root: Path) -> None:
    load_config(root)
    path = root / CACHE_FILE
    os.utime(path, ns=(1, 1))
    load_config(root)
    assert path.stat().st_mtime_ns == 1

"""`ralph status` in folders that are not (yet) Ralph projects: never a traceback."""

from __future__ import annotations

from pathlib import Path

from tests.cli.helpers import Cli, assert_error, run_ralph


def test_a_folder_without_ralph_toml_is_one_error_line(cli: Cli, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    for flags in ([], ["--json"]):
        assert_error(cli("status", *flags, "--root", str(empty)), "no ralph.toml",
                     "ralph init")
    result = run_ralph("status", cwd=empty)
    assert_error(result, "no ralph.toml")
    assert result.code == 1


def test_a_folder_with_ralph_toml_and_no_prd(cli: Cli, tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "ralph.toml").write_text("")
    result = cli("status", "--json", "--root", str(root))
    assert result.code == 0 and result.err == "", result
    body = result.json()
    assert (body["total"], body["next"]) == (0, None)
    assert body["prd_error"] == (f"{root / 'PRD.md'}: no such file: run `ralph init` to "
                                 "create it, or set files.prd in ralph.toml")
    text = cli("status", "--root", str(root))
    assert text.code == 0 and text.err == ""
    assert text.out.splitlines() == ["PRD.md: 0/0 tasks done; loop idle",
                                     f"the PRD cannot be read: {body['prd_error']}"]
    assert sorted(p.name for p in root.iterdir()) == ["ralph.toml"]  # nothing written

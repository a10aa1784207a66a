"""`ralph init` through the CLI entry point: output, exit codes, and the project root it picks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ralph.cli import init_cmd
from ralph.config import load_config
from tests.scaffold.conftest import RunCli

NO_GATE = ("no test command found to propose as a gate: add yours to gates.commands in "
           "ralph.toml, or a ticked box stays the only evidence that a task is done")
NOT_GIT = ("is not in a git repository: run `git init` there (or `ralph init --git-init`) "
           "so the loop can commit its work")


def test_init_prints_one_line_per_path(cli: RunCli, project: Path) -> None:
    result = cli("init")
    assert result.code == 0, result
    lines = result.out.splitlines()
    assert lines[0] == "created ralph.toml"
    assert "created PRD.md" in lines
    assert "created .ralph/store/" in lines
    assert lines[-2] == "created .gitignore"
    assert lines[-1] == NO_GATE
    assert len(lines) == 24
    assert result.err == f"warning: {project} {NOT_GIT}\n"
    assert load_config(project).files.prd == "PRD.md"


def test_init_twice_keeps_everything_and_succeeds(cli: RunCli, project: Path) -> None:
    assert cli("init").code == 0
    (project / "PRD.md").write_text("mine")
    result = cli("init")
    assert result.code == 0
    assert all(line.startswith("kept ") for line in result.out.splitlines()[:-1])
    assert result.out.splitlines()[-1] == NO_GATE
    assert "kept PRD.md" in result.out.splitlines()
    assert (project / "PRD.md").read_text() == "mine"


def test_init_force_reports_updated_files(cli: RunCli, project: Path) -> None:
    assert cli("init").code == 0
    (project / "PRD.md").write_text("mine")
    result = cli("init", "--force")
    assert result.code == 0
    lines = result.out.splitlines()
    assert "updated PRD.md" in lines
    assert "kept .ralph/state.json" in lines
    assert (project / "PRD.md").read_text() != "mine"


def test_init_json_tracker_and_json_output(cli: RunCli, project: Path) -> None:
    result = cli("init", "--tracker", "json", "--json")
    assert result.code == 0, result
    summary = json.loads(result.out)
    assert set(summary) == {"root", "created", "updated", "kept", "git", "git_initialized",
                            "proposed_gate"}
    assert summary["proposed_gate"] is None
    assert summary["root"] == str(project)
    assert "prd.json" in summary["created"]
    assert "PRD.md" not in summary["created"]
    assert summary["kept"] == []
    assert summary["git"] is False
    assert result.err == f"warning: {project} {NOT_GIT}\n"  # stdout stays pure JSON
    assert load_config(project).files.prd == "prd.json"


def test_init_git_init_makes_a_repository(cli: RunCli, project: Path) -> None:
    result = cli("init", "--git-init")
    assert result.code == 0, result
    assert result.out.splitlines()[0] == f"initialized a git repository in {project}"
    assert result.err == ""
    assert (project / ".git").is_dir()
    again = cli("init", "--json")
    assert json.loads(again.out)["git"] is True
    assert again.err == ""


def test_init_scaffolds_in_the_project_root_from_a_subdirectory(cli: RunCli, project: Path,
                                                                monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    (project / ".git").mkdir()
    sub = project / "src" / "pkg"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    result = cli("init", "--json")
    assert result.code == 0, result
    assert json.loads(result.out)["root"] == str(project)
    assert (project / "ralph.toml").is_file()
    assert not (sub / "ralph.toml").exists()
    assert result.err == ""


def test_bad_tracker_is_a_usage_error(cli: RunCli, project: Path) -> None:
    result = cli("init", "--tracker", "yaml")
    assert result.code == 2
    assert result.out == ""
    assert result.err.startswith("error: ")
    assert "yaml" in result.err
    assert len(result.err.splitlines()) == 1
    assert list(project.iterdir()) == []


def test_unwritable_root_is_one_error_line(cli: RunCli, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "file").write_text("x")
    bad_root = tmp_path / "file" / "project"
    monkeypatch.setattr(init_cmd, "find_project_root", lambda: bad_root)
    result = cli("init")
    assert result.code == 1
    assert result.out == ""
    assert result.err == f"error: cannot scaffold in {bad_root}: not a directory\n"


def test_a_file_in_the_way_is_one_error_line(cli: RunCli, project: Path) -> None:
    (project / ".ralph").write_text("")
    result = cli("init")
    assert result.code == 1
    assert result.out == ""
    assert result.err == f"error: cannot create .ralph/ in {project}: a file is in the way\n"
    assert "Traceback" not in result.err


def test_a_kept_invalid_config_is_a_warning(cli: RunCli, project: Path) -> None:
    (project / "ralph.toml").write_text("[loop]\nmax_iteration = 3\n")
    result = cli("init")
    assert result.code == 0
    warnings = result.err.splitlines()
    assert warnings[0].startswith("warning: the existing ralph.toml is invalid: ralph.toml:2: "
                                  "unknown key 'loop.max_iteration'")
    assert "kept ralph.toml" in result.out.splitlines()


def test_help_lists_the_options(cli: RunCli) -> None:
    result = cli("init", "--help")
    assert result.code == 0
    for option in ("--tracker", "--force", "--git-init", "--json"):
        assert option in result.out


# -- the proposed gate


def test_init_names_the_proposed_gate_in_one_line(cli: RunCli, project: Path) -> None:
    (project / "package.json").write_text('{"scripts": {"test": "vitest run"}}')
    (project / "yarn.lock").write_text("")
    result = cli("init")
    assert result.code == 0, result
    assert result.out.splitlines()[-1] == (
        "proposed gate `yarn test` (package.json has a test script, and yarn.lock says the "
        "project uses yarn), commented out in ralph.toml: uncomment gates.commands to enable it")
    assert 'commands = [\n  # "yarn test",\n]\n' in (project / "ralph.toml").read_text()
    assert load_config(project).gates.commands == []
    again = cli("init")  # kept ralph.toml, still without gates
    assert again.out.splitlines()[-1] == (
        "proposed gate `yarn test` (package.json has a test script, and yarn.lock says the "
        "project uses yarn), add it to gates.commands in ralph.toml")


def test_init_says_nothing_about_gates_once_they_are_configured(cli: RunCli,
                                                                project: Path) -> None:
    (project / "go.mod").write_text("module x\n")
    (project / "ralph.toml").write_text('[gates]\ncommands = ["go vet ./..."]\n')
    result = cli("init")
    assert result.code == 0
    assert all(line.startswith("kept ") or line.startswith("created ")
               for line in result.out.splitlines())
    summary = json.loads(cli("init", "--json").out)
    assert summary["proposed_gate"] is None


def test_init_json_carries_the_proposed_gate(cli: RunCli, project: Path) -> None:
    (project / "Makefile").write_text("test:\n\tcargo test\n")
    (project / "Cargo.toml").write_text('[package]\nname = "x"\n')
    result = cli("init", "--json")
    assert result.code == 0, result
    assert json.loads(result.out)["proposed_gate"] == {
        "command": "make test", "reason": "Makefile has a test target",
        "alternatives": [{"command": "cargo test",
                          "reason": "Cargo.toml declares a Rust package"}]}


def test_init_with_a_broken_package_json_warns_and_goes_on(cli: RunCli, project: Path) -> None:
    (project / "package.json").write_text('{"scripts": {"test": "jest"},}')
    result = cli("init")
    assert result.code == 0, result
    assert result.out.splitlines()[-1] == NO_GATE
    warnings = result.err.splitlines()
    assert len(warnings) == 2
    assert warnings[0].startswith("warning: package.json is not valid JSON (")
    assert warnings[0].endswith("): no test command detected from it")
    assert warnings[1] == f"warning: {project} {NOT_GIT}"
    assert load_config(project).gates.commands == []

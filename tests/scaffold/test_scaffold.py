"""ralph.scaffold.scaffold: what `ralph init` writes, what it keeps, and how it fails."""

from __future__ import annotations

import json
import os
import re
import stat
import time
import tomllib
from pathlib import Path

import pytest
from pydantic import BaseModel

from ralph.config import (
    AgentConfig,
    ApprovalsConfig,
    Config,
    FilesConfig,
    GatesConfig,
    GitConfig,
    JudgeConfig,
    LoopConfig,
    ReviewConfig,
    load_config,
    parse_config,
)
from ralph.errors import RalphError
from ralph.scaffold import (
    GITIGNORE_ENTRIES,
    GITIGNORE_HEADER,
    ScaffoldError,
    config_template,
    in_git_repository,
    run_git_init,
    scaffold,
    template,
)
from ralph.testcmd import Detection, ProposedGate, detect_test_commands

PROJECT_FILES = ["ralph.toml", "PROMPT_build.md", "PROMPT_plan.md", "PROMPT_judge.md",
                 "PROMPT_review.md", "PROMPT_planner.md", "PROMPT_executor.md",
                 "PROMPT_reviewer.md", "PROMPT_questioner.md", "PROMPT_nu.md", "PROMPT.md",
                 "AGENTS.md"]
RUNTIME = [".ralph/", ".ralph/state.json", ".ralph/logs/", ".ralph/receipts/",
           ".ralph/context/", ".ralph/attempts/", ".ralph/store/"]
MD_CREATED = [*PROJECT_FILES, "PRD.md", "progress.md", "FEEDBACK.md", *RUNTIME, ".gitignore"]
JSON_CREATED = [*PROJECT_FILES, "prd.json", "progress.md", "FEEDBACK.md", *RUNTIME,
                ".gitignore"]
TASK_LINE = re.compile(r"^- \[( |x|~|-)\] (\d+)\. (.+)$")


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file (bytes) and directory (None) under root, by relative path; but the
    validated ralph.toml kept in .ralph/cache (ralph.configcache), which is no project data."""
    return {p.relative_to(root).as_posix(): (p.read_bytes() if p.is_file() else None)
            for p in sorted(root.rglob("*"))
            if p.relative_to(root).parts[:2] != (".ralph", "cache")}


def md_tasks(text: str) -> list[tuple[str, str, list[str]]]:
    """(id, title, indented bullets) of the checklist under `## Tasks`."""
    section = text.split("\n## Tasks\n", 1)[1]
    tasks: list[tuple[str, str, list[str]]] = []
    for line in section.splitlines():
        match = TASK_LINE.match(line)
        if match:
            tasks.append((match.group(2), match.group(3), []))
        elif line.startswith("  - ") and tasks:
            tasks[-1][2].append(line[4:])
    return tasks


# -- what is created


def test_md_tracker_creates_every_file(project: Path) -> None:
    result = scaffold(project)
    assert result.created == MD_CREATED
    assert (result.updated, result.kept, result.warnings) == ([], [], [])
    assert result.root == project
    assert result.git is False
    assert result.git_initialized is False
    for name in [*PROJECT_FILES[1:], "PRD.md", "progress.md", "FEEDBACK.md"]:
        assert (project / name).read_text() == template(name), name
    assert (project / "ralph.toml").read_text() == config_template("md")
    assert not (project / "prd.json").exists()
    assert json.loads((project / ".ralph/state.json").read_text()) == {"version": 1}
    for sub in ("logs", "receipts", "context", "attempts", "store"):
        assert (project / ".ralph" / sub).is_dir()
        assert list((project / ".ralph" / sub).iterdir()) == []
    assert (project / ".gitignore").read_text().splitlines() == [GITIGNORE_HEADER,
                                                                 *GITIGNORE_ENTRIES]
    assert not list(project.rglob(".*.tmp"))


def test_the_gitignore_covers_the_runtime_parts(project: Path) -> None:
    scaffold(project)
    lines = (project / ".gitignore").read_text().splitlines()
    for entry in (".ralph/state.json", ".ralph/logs/", ".ralph/receipts/", ".ralph/context/",
                  ".ralph/attempts/", ".ralph/store/", ".ralph/*.lock"):
        assert entry in lines


def test_md_prd_has_two_tasks_with_ids_acceptance_and_a_dependency(project: Path) -> None:
    scaffold(project)
    tasks = md_tasks((project / "PRD.md").read_text())
    assert [task[0] for task in tasks] == ["1", "2"]
    first, second = tasks
    assert first[2] and not any(b.startswith("Depends on:") for b in first[2])
    assert "Depends on: 1" in second[2]
    assert [b for b in second[2] if not b.startswith("Depends on:")]  # an acceptance bullet
    text = (project / "PRD.md").read_text()
    assert sum(1 for line in text.splitlines() if line.startswith("- [")) == 2


def test_json_tracker(project: Path) -> None:
    result = scaffold(project, "json")
    assert result.created == JSON_CREATED
    assert not (project / "PRD.md").exists()
    stories = json.loads((project / "prd.json").read_text())["stories"]
    assert [story["id"] for story in stories] == ["1", "2"]
    for story in stories:
        assert set(story) == {"id", "title", "priority", "acceptance", "passes", "depends_on"}
        assert story["passes"] is False
        assert story["acceptance"]
        assert isinstance(story["title"], str)
        assert story["title"]
    assert [story["depends_on"] for story in stories] == [[], ["1"]]
    assert [story["priority"] for story in stories] == [1, 2]
    assert load_config(project).files.prd == "prd.json"


def test_unknown_tracker(project: Path) -> None:
    with pytest.raises(ScaffoldError, match="unknown tracker 'yaml'"):
        scaffold(project, "yaml")  # type: ignore[arg-type]
    assert list(project.iterdir()) == []


# -- ralph.toml


def test_generated_config_parses_back_to_the_defaults(project: Path) -> None:
    scaffold(project)
    config = load_config(project)
    assert config.agents == {"codex": AgentConfig()}
    assert config.model_copy(update={"agents": {}}) == Config()
    assert config.agent("codex").adapter == "codex"


def test_generated_json_config_differs_only_in_the_prd(project: Path) -> None:
    config = parse_config(config_template("json"))
    assert config.files == FilesConfig(prd="prd.json")
    assert config.model_copy(update={"agents": {}, "files": FilesConfig()}) == Config()


def _section(text: str, header: str) -> str:
    """The text of one [header] table, up to the next table header."""
    start = text.index(f"\n[{header}]\n")
    following = re.search(r"^\[", text[start + 2:], re.MULTILINE)
    return text[start:start + 2 + following.start()] if following else text[start:]


@pytest.mark.parametrize(("header", "model"), [
    ("files", FilesConfig), ("loop", LoopConfig), ("gates", GatesConfig),
    ("judge", JudgeConfig), ("review", ReviewConfig), ("git", GitConfig),
    ("approvals", ApprovalsConfig), ("agents.codex", AgentConfig)])
def test_every_key_is_written_with_a_comment_above_it(header: str,
                                                      model: type[BaseModel]) -> None:
    text = config_template()
    section = _section(text, header)
    data = tomllib.loads(text)
    table = data
    for part in header.split("."):
        table = table[part]
    lines = section.splitlines()
    for name, info in model.model_fields.items():
        if info.default is None:
            # TOML has no null: an unset default is shown commented out, with an example
            assert any(line.startswith(f"# {name} = ") for line in lines), name
            assert name not in table
            continue
        assert name in table, f"{header}.{name} missing"
        index = next(i for i, line in enumerate(lines) if line.startswith(f"{name} = "))
        assert lines[index - 1].startswith("# "), f"no comment above {header}.{name}"


def test_the_config_documents_general_and_an_example_command_agent() -> None:
    text = config_template()
    assert "[DOCS]" in _section(text, "files")
    assert '# argv = ["my-agent", "--prompt-file", "{prompt_file}"]' in text
    example = parse_config('[agents.my-agent]\nargv = ["my-agent", "--prompt-file", '
                           '"{prompt_file}"]\n')
    assert example.agent("my-agent").adapter == "command"


# -- prompts


@pytest.mark.parametrize("name", ["PROMPT_build.md", "PROMPT_plan.md", "PROMPT.md"])
def test_working_prompts_state_the_rules(name: str) -> None:
    text = template(name)
    assert "one task only" in text
    assert "anchor" in text
    assert "Run the tests" in text
    assert "tick the task's checkbox" in text or "tick its checkbox" in text
    assert "progress.md" in text
    assert "EXIT_SIGNAL: true" in text
    assert "only\na hint" in text or "only a hint" in text


def test_judge_prompt_asks_for_the_judge_signal() -> None:
    text = template("PROMPT_judge.md")
    assert "JUDGE_SIGNAL: true" in text
    assert "JUDGE_SIGNAL: false" in text
    assert "end your output" in text


def test_review_prompt_asks_for_ship_or_block() -> None:
    text = template("PROMPT_review.md")
    assert "last line" in text
    assert "    SHIP\n" in text
    assert "    BLOCK\n" in text


# -- keeping and forcing


def test_existing_files_are_kept_byte_for_byte(project: Path) -> None:
    (project / "PRD.md").write_bytes(b"# mine\n\n## Tasks\n\n- [x] 9. Done already\n")
    (project / "AGENTS.md").write_bytes(b"\xff not even utf-8")
    (project / ".ralph").mkdir()
    (project / ".ralph/state.json").write_text('{"version": 1, "iteration_count": 4}')
    before = snapshot(project)
    result = scaffold(project)
    assert result.kept == ["AGENTS.md", "PRD.md", ".ralph/", ".ralph/state.json"]
    assert "PRD.md" not in result.created
    assert "ralph.toml" in result.created
    after = snapshot(project)
    for name, content in before.items():
        assert after[name] == content, name


def test_a_second_run_keeps_everything(project: Path) -> None:
    first = scaffold(project)
    before = snapshot(project)
    second = scaffold(project)
    assert second.created == []
    assert second.updated == []
    assert second.kept == first.created
    assert snapshot(project) == before


def test_force_overwrites_the_scaffold_files_but_not_runtime_state(project: Path) -> None:
    scaffold(project)
    (project / "PRD.md").write_text("changed")
    (project / "ralph.toml").write_text("[loop]\nmax_iterations = 1\n")
    (project / ".ralph/state.json").write_text('{"version": 1, "iteration_count": 4}')
    (project / ".ralph/store/head").write_bytes(b"store data")
    (project / ".ralph/logs/000001.log").write_text("log")
    gitignore = (project / ".gitignore").read_bytes()
    result = scaffold(project, force=True)
    assert result.created == []
    assert result.updated == [*PROJECT_FILES, "PRD.md", "progress.md", "FEEDBACK.md"]
    assert result.kept == [".ralph/", ".ralph/state.json", ".ralph/logs/", ".ralph/receipts/",
                           ".ralph/context/", ".ralph/attempts/", ".ralph/store/", ".gitignore"]
    assert (project / "PRD.md").read_text() == template("PRD.md")
    assert load_config(project) == parse_config(config_template())
    assert (project / ".ralph/state.json").read_text() == '{"version": 1, "iteration_count": 4}'
    assert (project / ".ralph/store/head").read_bytes() == b"store data"
    assert (project / ".ralph/logs/000001.log").read_text() == "log"
    assert (project / ".gitignore").read_bytes() == gitignore


def test_force_replaces_a_symlink_without_touching_its_target(project: Path) -> None:
    target = project.parent / "elsewhere.md"
    target.write_text("outside")
    (project / "progress.md").symlink_to(target)
    assert "progress.md" in scaffold(project).kept
    assert scaffold(project, force=True).updated.count("progress.md") == 1
    assert not (project / "progress.md").is_symlink()
    assert (project / "progress.md").read_text() == template("progress.md")
    assert target.read_text() == "outside"
    (project / "FEEDBACK.md").unlink()
    (project / "FEEDBACK.md").symlink_to(project / "missing.md")  # dangling: still exists
    assert "FEEDBACK.md" in scaffold(project).kept
    assert not (project / "missing.md").exists()


def test_json_tracker_next_to_a_kept_config_warns(project: Path) -> None:
    scaffold(project)
    result = scaffold(project, "json")
    assert result.created == ["prd.json"]
    assert result.warnings == ["the existing ralph.toml names 'PRD.md' as the PRD, not "
                               "'prd.json': set files.prd there, or run `ralph init --force`"]


def test_an_invalid_kept_config_warns(project: Path) -> None:
    (project / "ralph.toml").write_text("[loop]\nmax_iteration = 3\n")
    result = scaffold(project)
    assert "ralph.toml" in result.kept
    assert len(result.warnings) == 1
    assert result.warnings[0].startswith("the existing ralph.toml is invalid: ")
    assert "unknown key 'loop.max_iteration'" in result.warnings[0]


# -- .gitignore


def test_gitignore_is_appended_to_without_duplicates(project: Path) -> None:
    original = b"node_modules/\n# keep me\n/.ralph/logs\n.ralph/state.json\n*.pyc"
    (project / ".gitignore").write_bytes(original)
    result = scaffold(project)
    assert ".gitignore" in result.updated
    text = (project / ".gitignore").read_bytes()
    assert text.startswith(original + b"\n\n")
    added = text[len(original):].decode().split()
    lines = text.decode().splitlines()
    assert ".ralph/logs/" not in lines  # `/.ralph/logs` already covers it
    assert lines.count(".ralph/state.json") == 1
    for entry in GITIGNORE_ENTRIES:
        assert sum(1 for line in lines
                   if line.strip("/") == entry.strip("/")) == 1, entry
    assert "node_modules/" in lines
    assert "*.pyc" in lines
    assert ".ralph/receipts/" in added
    again = scaffold(project, force=True)
    assert ".gitignore" in again.kept
    assert (project / ".gitignore").read_bytes() == text


def test_gitignore_missing_one_entry_gets_only_that_one(project: Path) -> None:
    lines = [GITIGNORE_HEADER, *GITIGNORE_ENTRIES]
    lines.remove(".ralph/*.lock")
    (project / ".gitignore").write_text("\n".join(lines) + "\n\n")
    scaffold(project)
    assert (project / ".gitignore").read_text() == "\n".join(lines) + "\n\n.ralph/*.lock\n"


def test_gitignore_keeps_crlf_and_bytes_that_are_not_utf8(project: Path) -> None:
    original = b"build/\r\ncaf\xe9/\r\n"
    (project / ".gitignore").write_bytes(original)
    scaffold(project)
    text = (project / ".gitignore").read_bytes()
    assert text.startswith(original + b"\r\n" + GITIGNORE_HEADER.encode() + b"\r\n")
    assert b"\n" not in text.replace(b"\r\n", b"")


# -- git


def test_outside_git_is_reported(project: Path) -> None:
    assert in_git_repository(project) is False
    assert scaffold(project).git is False


def test_inside_a_git_repository_found_in_a_parent(project: Path) -> None:
    (project / ".git").mkdir()
    sub = project / "pkg"
    sub.mkdir()
    assert in_git_repository(sub) is True
    result = scaffold(sub)
    assert result.git is True
    assert result.git_initialized is False
    (project / ".git").rmdir()
    (project / ".git").write_text("gitdir: /elsewhere\n")  # a worktree
    assert in_git_repository(sub) is True


def test_git_init_runs_git_init(project: Path) -> None:
    result = scaffold(project, git_init=True)
    assert result.git is True
    assert result.git_initialized is True
    assert (project / ".git" / "HEAD").is_file()
    assert result.created == MD_CREATED
    again = scaffold(project, git_init=True)
    assert again.git_initialized is False  # already a repository: git init is not run again


def fake_git(directory: Path, script: str) -> None:
    directory.mkdir()
    git = directory / "git"
    git.write_text("#!/bin/sh\n" + script)
    git.chmod(git.stat().st_mode | stat.S_IXUSR)


def test_git_init_failure_is_one_line_and_writes_nothing(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = project.parent / "bin"
    fake_git(bin_dir, 'echo "hint: something" >&2\necho "fatal: cannot do it" >&2\nexit 128\n')
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(ScaffoldError) as caught:
        scaffold(project, git_init=True)
    assert str(caught.value) == f"git init failed in {project}: fatal: cannot do it"
    assert list(project.iterdir()) == []


def test_git_not_installed(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(project.parent / "empty-bin"))
    with pytest.raises(ScaffoldError, match="git is not installed"):
        run_git_init(project)


def test_git_init_timeout_kills_its_process_group(project: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = project.parent / "bin"
    pid_file = project.parent / "sleeper.pid"
    fake_git(bin_dir, f"sleep 60 &\necho $! > {pid_file}\nwait\n")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    started = time.monotonic()
    with pytest.raises(ScaffoldError, match=r"did not finish within 0\.5 s"):
        run_git_init(project, timeout=0.5)
    assert time.monotonic() - started < 10
    sleeper = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(sleeper) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(sleeper), "the grandchild of git init outlived the timeout"


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


# -- failures


def test_a_root_under_a_regular_file_fails_cleanly(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(ScaffoldError) as caught:
        scaffold(tmp_path / "file" / "project")
    assert isinstance(caught.value, RalphError)
    assert str(caught.value) == f"cannot scaffold in {tmp_path}/file/project: not a directory"
    assert (tmp_path / "file").read_text() == "x"


def test_a_failure_part_way_leaves_only_whole_files(project: Path) -> None:
    (project / ".ralph").write_text("in the way")
    with pytest.raises(ScaffoldError) as caught:
        scaffold(project)
    assert str(caught.value) == f"cannot create .ralph/ in {project}: a file is in the way"
    written = sorted(p.name for p in project.iterdir())
    assert written == sorted([".ralph", *PROJECT_FILES, "PRD.md", "progress.md",
                              "FEEDBACK.md"])
    for name in PROJECT_FILES[1:]:
        assert (project / name).read_text() == template(name)
    assert not list(project.rglob(".*.tmp"))


def test_a_directory_in_place_of_a_file_fails_with_force(project: Path) -> None:
    (project / "FEEDBACK.md").mkdir()
    assert "FEEDBACK.md" in scaffold(project).kept
    with pytest.raises(ScaffoldError, match=r"cannot write FEEDBACK\.md in .*: Is a directory"):
        scaffold(project, force=True)
    assert not list(project.glob(".*.tmp"))


# -- the proposed gate


def _gates_lines(text: str) -> list[str]:
    return _section(text, "gates").strip().splitlines()


def _enable_proposal(text: str) -> str:
    """What the comment asks: uncomment the commands inside `commands = [...]`."""
    lines = text.splitlines(keepends=True)
    index = lines.index("commands = [\n")
    end = lines.index("]\n", index)
    for at in range(index + 1, end):
        assert lines[at].startswith('  # "')
        lines[at] = "  " + lines[at][4:]
    return "".join(lines)


def test_a_detected_test_command_is_proposed_commented_out(project: Path) -> None:
    (project / "pyproject.toml").write_text('[project]\nname = "x"\n'
                                            "[tool.pytest.ini_options]\n")
    result = scaffold(project)
    assert result.proposed_gate == ProposedGate("python3 -m pytest -q",
                                                "pyproject.toml configures pytest")
    assert result.alternatives == []
    assert result.gates_configured is False
    assert result.config_written is True
    assert result.warnings == []
    text = (project / "ralph.toml").read_text()
    assert text == config_template("md", detect_test_commands(project))
    assert load_config(project).gates.commands == []  # proposed, not switched on
    lines = _gates_lines(text)
    index = lines.index("commands = [")
    assert lines[index - 2:index + 3] == [
        "# Proposed by `ralph init`: pyproject.toml configures pytest. To make the test suite "
        "decide",
        "# whether a task is done, uncomment the command below:",
        "commands = [",
        '  # "python3 -m pytest -q",',
        "]"]
    (project / "ralph.toml").write_text(_enable_proposal(text))
    assert load_config(project).gates.commands == ["python3 -m pytest -q"]


def test_the_other_commands_found_are_listed(project: Path) -> None:
    (project / "Makefile").write_text("test:\n\t./check\n")
    (project / "package.json").write_text('{"scripts": {"test": "node --test"}}')
    (project / "pnpm-lock.yaml").write_text("")
    (project / "go.mod").write_text("module x\n")
    result = scaffold(project)
    assert result.proposed_gate == ProposedGate("make test", "Makefile has a test target")
    assert [gate.command for gate in result.alternatives] == ["pnpm test", "go test ./..."]
    text = (project / "ralph.toml").read_text()
    comment = " ".join(line[2:] for line in _gates_lines(text) if line.startswith("# "))
    assert ("Also found: `pnpm test` (package.json has a test script, and pnpm-lock.yaml "
            "says the project uses pnpm); `go test ./...` (go.mod declares a Go module).") \
        in comment
    assert 'commands = [\n  # "make test",\n]\n' in text
    assert max(len(line) for line in text.splitlines()) <= 92
    assert "`go test\n" not in text  # a command is never broken across lines
    assert load_config(project).gates.commands == []
    (project / "ralph.toml").write_text(_enable_proposal(text))
    assert load_config(project).gates.commands == ["make test"]


def test_nothing_detected_says_so_with_an_example(project: Path) -> None:
    result = scaffold(project)
    assert result.proposed_gate is None
    text = (project / "ralph.toml").read_text()
    lines = _gates_lines(text)
    comment = " ".join(line[2:] for line in lines if line.startswith("# "))
    assert "`ralph init` found no test command to propose" in comment
    assert "ticked box is the only evidence" in comment
    index = lines.index("commands = [")
    assert lines[index + 1:index + 4] == ['  # "pytest -q",', '  # "ruff check .",', "]"]
    (project / "ralph.toml").write_text(_enable_proposal(text))
    assert load_config(project).gates.commands == ["pytest -q", "ruff check ."]


@pytest.mark.parametrize("command", ['say "hi" \\ there', "tab\there", "é ✓ 😀"])
def test_the_proposal_line_is_valid_toml_for_any_command(command: str) -> None:
    text = config_template("md", Detection((ProposedGate(command, "a test"),)))
    assert parse_config(text).gates.commands == []
    assert parse_config(_enable_proposal(text)).gates.commands == [command]


def test_force_rewrites_the_config_with_the_proposal(project: Path) -> None:
    scaffold(project)
    (project / "ralph.toml").write_text('[gates]\ncommands = ["true"]\n')
    (project / "go.mod").write_text("module x\n")
    kept = scaffold(project)
    assert kept.gates_configured is True
    assert kept.proposed_gate is None  # gates are configured: nothing to propose
    forced = scaffold(project, force=True)
    assert forced.proposed_gate == ProposedGate("go test ./...", "go.mod declares a Go module")
    assert '  # "go test ./...",\n' in (project / "ralph.toml").read_text()
    assert load_config(project).gates.commands == []


def test_a_kept_config_without_gates_still_gets_the_proposal(project: Path) -> None:
    scaffold(project)
    (project / "Cargo.toml").write_text('[package]\nname = "x"\n')
    result = scaffold(project)
    assert "ralph.toml" in result.kept
    assert result.config_written is False
    assert result.gates_configured is False
    assert result.proposed_gate == ProposedGate("cargo test",
                                                "Cargo.toml declares a Rust package")
    assert "cargo test" not in (project / "ralph.toml").read_text()  # kept as it was


def test_a_broken_project_file_is_a_warning_not_a_failure(project: Path) -> None:
    (project / "pyproject.toml").write_text("[tool.pytest.ini_options\n")
    (project / "package.json").write_text('{"scripts": {"test": "jest"}')
    result = scaffold(project)
    assert result.proposed_gate is None
    assert [w.split(" ")[0] for w in result.warnings] == ["pyproject.toml", "package.json"]
    assert all(w.endswith(": no test command detected from it") for w in result.warnings)
    assert load_config(project).gates.commands == []
    # with gates configured, what could not be read for a proposal does not matter
    (project / "ralph.toml").write_text('[gates]\ncommands = ["true"]\n')
    assert scaffold(project).warnings == []


def test_detection_warnings_come_before_the_kept_config_warnings(project: Path) -> None:
    (project / "ralph.toml").write_text("[loop]\nmax_iteration = 3\n")
    (project / "package.json").write_text("nope")
    warnings = scaffold(project).warnings
    assert [w.split(" ")[0] for w in warnings] == ["package.json", "the"]

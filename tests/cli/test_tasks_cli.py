"""`ralph tasks [--json]`: the tasks as Ralph parsed them, with attempts and blocked reasons
from state.json, and PRD lines that look like tasks but are not read as tasks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ralph.scaffold import scaffold
from tests.cli.helpers import Cli, assert_error, run_ralph

TASK_KEYS = ["id", "title", "status", "kind", "depends_on", "acceptance", "attempts",
             "blocked_reason", "next"]

PRD = """# PRD

## Tasks

- [x] 1. Set up the project
  - the tests run
- [-] 2. Call the API
  - Blocked: no API key
- [-] 3. Deploy
- [ ] 4. [PLAN] Plan the release
  - Depends on: 1
- [ ] 5. Release
  - Depends on: 2, 4
"""

STATE = {"tasks": {
    "1": {"attempts": 2, "failures": 1},
    "2": {"attempts": 3, "failures": 3, "blocked": "state.json's reason"},
    "3": {"attempts": 3, "failures": 3, "blocked": "gates failed 3 times"},
    "5": {"attempts": 1, "blocked": "an old block the user lifted"},
}}


def project(root: Path, prd: str | None = PRD, *, state: dict[str, Any] | None = None,
            prd_name: str = "PRD.md") -> Path:
    root.mkdir(exist_ok=True)
    config = f'[files]\nprd = "{prd_name}"\n' if prd_name != "PRD.md" else ""
    (root / "ralph.toml").write_text(config)
    if prd is not None:
        (root / prd_name).write_text(prd)
    if state is not None:
        (root / ".ralph").mkdir(exist_ok=True)
        (root / ".ralph" / "state.json").write_text(json.dumps(state))
    return root


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file, but the validated ralph.toml kept in .ralph/cache (ralph.configcache)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.relative_to(root).parts[:2] != (".ralph", "cache")}


def test_json_lists_every_task_with_attempts_and_blocked_reasons(cli: Cli,
                                                                  tmp_path: Path) -> None:
    root = project(tmp_path / "p", state=STATE)
    result = cli("tasks", "--json", "--root", str(root))
    assert result.code == 0, result
    assert result.err == ""
    listed = result.json()
    assert list(listed) == ["prd", "tasks", "warnings"]
    assert listed["prd"] == "PRD.md" and listed["warnings"] == []
    tasks = listed["tasks"]
    assert all(list(task) == TASK_KEYS for task in tasks)
    assert tasks[0] == {"id": "1", "title": "Set up the project", "status": "done",
                        "kind": "build", "depends_on": [], "acceptance": ["the tests run"],
                        "attempts": 2, "blocked_reason": None, "next": False}
    # The tracker's reason first, else state.json's; a lifted block is no block.
    assert [(t["id"], t["status"], t["blocked_reason"]) for t in tasks] == [
        ("1", "done", None), ("2", "blocked", "no API key"),
        ("3", "blocked", "gates failed 3 times"), ("4", "open", None), ("5", "open", None)]
    assert [t["attempts"] for t in tasks] == [2, 3, 3, 0, 1]
    assert [t["kind"] for t in tasks] == ["build", "build", "build", "plan", "build"]
    assert tasks[4]["depends_on"] == ["2", "4"]
    assert [t["id"] for t in tasks if t["next"]] == ["4"]


def test_the_table(cli: Cli, tmp_path: Path) -> None:
    root = project(tmp_path / "p", state=STATE)
    result = cli("tasks", "--root", str(root))
    assert result.code == 0, result
    assert result.err == ""
    lines = result.out.splitlines()
    assert lines[0].split() == ["id", "status", "kind", "title", "depends", "on", "attempts"]
    rows = {line.split()[0]: line for line in lines[2:] if line[:1].isdigit()}
    assert list(rows) == ["1", "2", "3", "4", "5"]
    assert rows["1"].split()[1] == "done" and rows["1"].rstrip().endswith("2")
    assert "open (next)" in rows["4"] and "[PLAN] Plan the release" in rows["4"]
    assert "2, 4" in rows["5"]
    assert "blocked: no API key" in result.out
    assert "blocked: gates failed 3 times" in result.out
    assert lines[-1] == "PRD.md: 1/5 tasks done; next: task 4"


def test_summary_when_everything_is_done_and_when_nothing_is_ready(cli: Cli,
                                                                    tmp_path: Path) -> None:
    root = project(tmp_path / "p", "## Tasks\n- [x] 1. A\n- [x] 2. B\n")
    assert cli("tasks", "--root", str(root)).out.splitlines()[-1] == (
        "PRD.md: 2/2 tasks done; every task is done")
    (root / "PRD.md").write_text("## Tasks\n- [-] 1. A\n- [ ] 2. B\n  - Depends on: 1\n")
    result = cli("tasks", "--root", str(root))
    assert result.out.splitlines()[-1] == (
        "PRD.md: 0/2 tasks done; nothing ready (the remaining tasks are blocked or wait on them)")
    assert "blocked: no reason given" in result.out


def test_a_fresh_project_from_ralph_init(cli: Cli, tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    root.mkdir()
    scaffold(root)
    result = cli("tasks", "--json", "--root", str(root))
    assert result.code == 0, result
    assert [(t["id"], t["attempts"], t["next"]) for t in result.json()["tasks"]] == [
        ("1", 0, True), ("2", 0, False)]


def test_lines_that_are_not_tasks_are_warnings(cli: Cli, tmp_path: Path) -> None:
    prd = "## Tasks\n\n- [ ] 1. Real\n2. [ ] Numbered\n\n## Backlog\n\n- [ ] Misplaced\n"
    root = project(tmp_path / "p", prd)
    human = cli("tasks", "--root", str(root))
    assert human.code == 0
    assert human.err.splitlines() == [
        "warning: PRD.md:4: \"2. [ ] Numbered\" is not read as a task: it is a numbered list "
        "item ('2.'), not a bullet; write '- [ ] Title'",
        "warning: PRD.md:8: \"- [ ] Misplaced\" is not read as a task: it is under "
        "'## Backlog', and only the checklist under '## Tasks' is read",
    ]
    assert "warning" not in human.out and "Real" in human.out
    machine = cli("tasks", "--json", "--root", str(root))
    assert machine.code == 0 and machine.err == ""
    assert machine.json()["warnings"] == [
        {"line": 4, "text": "2. [ ] Numbered",
         "reason": "it is a numbered list item ('2.'), not a bullet; write '- [ ] Title'"},
        {"line": 8, "text": "- [ ] Misplaced",
         "reason": "it is under '## Backlog', and only the checklist under '## Tasks' is read"},
    ]


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_a_prd_without_tasks_says_why(cli: Cli, tmp_path: Path, json_flag: list[str]) -> None:
    """A numbered task list reads as no tasks at all: the warnings say which lines."""
    root = project(tmp_path / "p", "# PRD\n\n## Tasks\n\n1. [ ] First\n2. [ ] Second\n")
    result = cli("tasks", *json_flag, "--root", str(root))
    assert result.code == 1 and result.out == ""
    lines = result.err.splitlines()
    assert [line.split('"')[0] for line in lines[:2]] == ["warning: PRD.md:5: ",
                                                          "warning: PRD.md:6: "]
    assert lines[2:] == [f"error: {root / 'PRD.md'} has no tasks: add a checklist under "
                         "'## Tasks'"]


@pytest.mark.parametrize(("prd", "words"), [
    (None, ["PRD.md", "no such file"]),
    ("## Tasks\n- [?] 1. Odd\n", ["PRD.md:2", "unknown task marker"]),
    ("## Tasks\n- [ ] 1. A\n  - Depends on: 9\n", ["depends on", "9"]),
])
def test_an_unreadable_prd_is_one_error_line(cli: Cli, tmp_path: Path, prd: str | None,
                                             words: list[str]) -> None:
    root = project(tmp_path / "p", prd)
    assert_error(cli("tasks", "--root", str(root)), *words)
    assert_error(cli("tasks", "--json", "--root", str(root)), *words)


def test_without_ralph_toml(cli: Cli, tmp_path: Path) -> None:
    assert_error(cli("tasks", "--root", str(tmp_path)), "no ralph.toml", "ralph init")


def test_a_json_tracker(cli: Cli, tmp_path: Path) -> None:
    stories = {"stories": [
        {"id": "a", "title": "First", "priority": 2, "passes": True},
        {"id": "b", "title": "[DOCS] Second", "priority": 1, "depends_on": ["a"],
         "acceptance": ["documented"]},
    ]}
    root = project(tmp_path / "p", json.dumps(stories), prd_name="prd.json",
                   state={"tasks": {"b": {"attempts": 4}}})
    listed = cli("tasks", "--json", "--root", str(root)).json()
    assert listed["prd"] == "prd.json" and listed["warnings"] == []
    assert [(t["id"], t["status"], t["kind"], t["attempts"], t["next"])
            for t in listed["tasks"]] == [("a", "done", "build", 0, False),
                                          ("b", "open", "docs", 4, True)]


def test_nothing_is_written_even_with_a_damaged_state(cli: Cli, tmp_path: Path) -> None:
    root = project(tmp_path / "p")
    (root / ".ralph").mkdir()
    (root / ".ralph" / "state.json").write_text("{not json")
    before = snapshot(root)
    result = cli("tasks", "--json", "--root", str(root))
    assert result.code == 0
    assert [t["attempts"] for t in result.json()["tasks"]] == [0] * 5
    assert "state.json is damaged" in result.err
    assert snapshot(root) == before


def test_control_characters_in_titles_do_not_reach_the_terminal(cli: Cli,
                                                                tmp_path: Path) -> None:
    root = project(tmp_path / "p", "## Tasks\n- [-] 1. Bad \x1b[31mred\n  - Blocked: \x07bell\n")
    result = cli("tasks", "--root", str(root))
    assert result.code == 0
    assert "\x1b" not in result.out and "\x07" not in result.out
    assert "Bad \\x1b[31mred" in result.out and "blocked: \\x07bell" in result.out
    assert cli("tasks", "--json", "--root", str(root)).json()["tasks"][0]["title"] == (
        "Bad \x1b[31mred")


def test_from_a_subdirectory_in_a_child_process(tmp_path: Path) -> None:
    root = project(tmp_path / "p", state=STATE)
    sub = root / "src" / "pkg"
    sub.mkdir(parents=True)
    result = run_ralph("tasks", "--json", cwd=sub)
    assert result.code == 0, result.err
    assert [t["id"] for t in result.json()["tasks"]] == ["1", "2", "3", "4", "5"]
    assert result.err == ""


def test_listed_in_the_help(cli: Cli) -> None:
    assert "tasks" in cli("--help").out
    result = cli("tasks", "--help")
    assert result.code == 0
    assert "--json" in result.out and "--root PATH" in result.out


def test_a_done_task_state_json_no_longer_follows_counts_its_attempt_records(
        cli: Cli, tmp_path: Path) -> None:
    state = {"tasks": {k: v for k, v in STATE["tasks"].items() if k != "1"}}
    root = project(tmp_path / "p", state=state)
    records = root / ".ralph" / "attempts" / "1"
    records.mkdir(parents=True)
    for name in ("1-1.json", "1-2.json", "1-3.json"):
        (records / name).write_text("{}")
    tasks = cli("tasks", "--json", "--root", str(root)).json()["tasks"]
    assert [t["attempts"] for t in tasks] == [3, 3, 3, 0, 1]

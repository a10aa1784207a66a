"""`workspace.init` and `workspace.validate` on workspaces written as AgentCompany writes
them: the layout, the files, and each problem with the original's code, message and path."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ralph.company.files import read_yaml, write_yaml
from ralph.company.ids import is_id
from ralph.company.workspace import (
    REQUIRED_DIRS,
    REQUIRED_FILES,
    Issue,
    WorkspaceError,
    init_workspace,
    validate_workspace,
)
from tests.company.fixtures import populated


def codes(root: Path) -> list[tuple[str, str, str | None]]:
    return [(i.code, i.message, i.path) for i in validate_workspace(root)]


def test_init_makes_the_layout_and_the_three_files(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    init_workspace(root, "Acme")
    assert all((root / d).is_dir() for d in REQUIRED_DIRS)
    company = read_yaml(root / "company/company.yaml")
    assert list(company) == ["schema_version", "type", "id", "name", "created_at"]
    assert company["name"] == "Acme" and is_id(company["id"], "cmp")
    assert (root / "company/company.yaml").read_text().splitlines()[-1] == \
        f"created_at: {company['created_at']}"  # plain, as the original writes it
    assert read_yaml(root / "company/policy.yaml")["visibility_defaults"] == {
        "worker_journal": "private_agent", "worker_milestone_artifact": "team",
        "manager_proposal": "managers", "director_workplan": "org"}
    assert is_id(read_yaml(root / "company/policy.yaml")["id"], "art")
    assert (root / ".local/machine.yaml").read_text() == \
        "schema_version: 1\ntype: machine\nrepo_roots: {}\nprovider_bins: {}\n"
    assert validate_workspace(root) == []


def test_init_refuses_a_directory_that_holds_anything_unless_forced(tmp_path: Path) -> None:
    (tmp_path / ".hidden").write_text("x")
    with pytest.raises(WorkspaceError) as refused:
        init_workspace(tmp_path, shown_as="ws")
    assert str(refused.value) == ("Refusing to initialize in a non-empty directory (ws). "
                                  "Use --force to override.")
    init_workspace(tmp_path, force=True)
    first = read_yaml(tmp_path / "company/company.yaml")["id"]
    init_workspace(tmp_path, force=True)  # the files again, a new company
    assert read_yaml(tmp_path / "company/company.yaml")["id"] != first
    assert (tmp_path / ".hidden").exists()
    with pytest.raises(WorkspaceError, match="is not a directory"):
        init_workspace(tmp_path / ".hidden")


def test_a_directory_that_is_not_a_workspace_lacks_everything(tmp_path: Path) -> None:
    found = validate_workspace(tmp_path / "nothing")
    assert [i.code for i in found] == ["missing_dir"] * 11 + ["missing_file"] * 3
    assert found[0] == Issue("missing_dir", "Missing directory: company", "company")
    assert [i.path for i in found[11:]] == list(REQUIRED_FILES)


def test_a_workspace_with_one_of_each_file_is_valid(tmp_path: Path) -> None:
    populated(tmp_path)
    assert validate_workspace(tmp_path) == []


def test_each_problem_with_the_originals_code_message_and_path(tmp_path: Path) -> None:
    ids = populated(tmp_path)
    project = f"work/projects/{ids['proj']}"
    company = read_yaml(tmp_path / "company/company.yaml")
    write_yaml(tmp_path / "company/company.yaml", {**company, "created_at": "yesterday"})
    (tmp_path / "company/policy.yaml").write_text("a: [\n")
    agent = f"org/agents/{ids['agent']}/agent.yaml"
    write_yaml(tmp_path / agent, {**read_yaml(tmp_path / agent), "team_id": None,
                                  "role": "boss"})
    shutil.rmtree(tmp_path / f"{project}/context_packs/{ids['ctx']}")
    (tmp_path / f"{project}/context_packs/{ids['ctx']}").mkdir()
    (tmp_path / f"{project}/runs/{ids['run']}/events.jsonl").unlink()
    task = tmp_path / f"{project}/tasks/{ids['task']}.md"
    task.write_text(task.read_text().replace("## Milestones", "## Milestone").replace(
        "deliverables:\n- cart.py\n", ""))
    review = f"inbox/reviews/{ids['rev']}.yaml"
    write_yaml(tmp_path / review, {**read_yaml(tmp_path / review), "extra": 1})
    delta = tmp_path / f"{project}/artifacts/{ids['delta']}.md"
    delta.write_text(delta.read_text().replace("patch_file:", "unknown: 1\npatch_file:"))
    (tmp_path / f"inbox/help_requests/{ids['help']}.md").write_text("no front matter")
    (tmp_path / "org/teams/empty").mkdir()
    found = codes(tmp_path)
    assert found == [
        ("schema_invalid", "company/company.yaml: created_at: Invalid input",
         "company/company.yaml"),
        ("parse_error", found[1][1], None),  # (the YAML library's own words)
        ("schema_invalid", f'{review}: : Unrecognized key: "extra"', review),
        ("frontmatter", f"inbox/help_requests/{ids['help']}.md: missing_frontmatter",
         f"inbox/help_requests/{ids['help']}.md"),
        ("missing_file", "Missing file: org/teams/empty/team.yaml",
         "org/teams/empty/team.yaml"),
        ("schema_invalid", f"{agent}: role: Invalid option: expected one of "
                           '"ceo"|"director"|"manager"|"worker"', agent),
        ("schema_invalid", f"{agent}: team_id: Invalid input: expected string, received null",
         agent),
        ("missing_file", f"Missing file: {project}/runs/{ids['run']}/events.jsonl",
         f"{project}/runs/{ids['run']}/events.jsonl"),
        ("missing_heading", f"{project}/tasks/{ids['task']}.md: Missing heading: ## Milestones",
         f"{project}/tasks/{ids['task']}.md"),
        ("contract_incomplete", f"{project}/tasks/{ids['task']}.md: deliverables must be "
                                "non-empty when status is not draft",
         f"{project}/tasks/{ids['task']}.md"),
        ("memory_delta_invalid", f'{project}/artifacts/{ids["delta"]}.md: : Unrecognized '
                                 'key: "unknown"', f"{project}/artifacts/{ids['delta']}.md"),
        ("missing_file", f"Missing file: {project}/context_packs/{ids['ctx']}/manifest.yaml",
         f"{project}/context_packs/{ids['ctx']}/manifest.yaml"),
    ]
    assert found[1][1].startswith("company/policy.yaml: ")


def test_odd_files_give_issues_not_a_crash_and_read_as_the_original_reads_them(
        tmp_path: Path) -> None:
    ids = populated(tmp_path)
    project = f"work/projects/{ids['proj']}"
    company = tmp_path / "company/company.yaml"
    # a tab in a value, `1.0` for an integer (JavaScript has one number type), bad UTF-8
    company.write_bytes(company.read_bytes().replace(b"schema_version: 1", b"schema_version: 1.0")
                        .replace(b"name: AgentCompany", b"name: tab\there \xff"))
    assert validate_workspace(tmp_path) == []
    assert read_yaml(company)["name"] == "tab\there \ufffd"
    # a key twice is a parse error, as in the original
    (tmp_path / "company/policy.yaml").write_text(
        (tmp_path / "company/policy.yaml").read_text() + "type: policy\n")
    # links are neither files nor directories: skipped
    (tmp_path / "inbox/reviews/link.yaml").symlink_to(company)
    (tmp_path / "org/teams/team_link").symlink_to(tmp_path / "org")
    # nesting beyond any parser's depth
    (tmp_path / "inbox/reviews/deep.yaml").write_text("[" * 100_000)
    # a patch path joined as path.join joins it: an absolute one stays in the workspace
    delta = tmp_path / f"{project}/artifacts/{ids['delta']}.md"
    text = delta.read_text()
    patch = text.split("patch_file: ")[1].split("\n")[0]
    delta.write_text(text.replace(patch, "/etc/passwd"))
    found = codes(tmp_path)
    assert [(code, path) for code, _, path in found] == [
        ("parse_error", None),
        ("parse_error", "inbox/reviews/deep.yaml"),
        ("missing_file", "/etc/passwd"),
    ]
    assert "unique" in found[0][1]
    delta.write_text(text.replace(patch, "x" * 300))  # a name too long to look at
    assert [c for c, _, _ in codes(tmp_path)][-1] == "missing_file"


def test_front_matter_edges_as_the_original_reads_them(tmp_path: Path) -> None:
    ids = populated(tmp_path)
    rel = f"inbox/help_requests/{ids['help']}.md"
    path = tmp_path / rel
    good = path.read_text()
    for text, message in (
            ("---\n---", "frontmatter_unclosed"),
            ("---\nid: x\n--- \n", "frontmatter_unclosed"),
            ("\ufeff" + good, "missing_frontmatter"),
            ("---\ra: 1\r---\r", "missing_frontmatter"),
            ("---\n---\n## Question\n## Response\n",
             ": Invalid input: expected object, received null")):
        path.write_text(text, newline="")
        assert codes(tmp_path)[0][1] == f"{rel}: {message}", text
    path.write_text(good.replace("\n", "\r\n"), newline="")  # CRLF reads as LF
    assert validate_workspace(tmp_path) == []


def test_init_with_force_replaces_a_link_not_what_it_points_to(tmp_path: Path) -> None:
    init_workspace(tmp_path / "ws")
    outside = tmp_path / "outside.yaml"
    outside.write_text("mine: true\n")
    (tmp_path / "ws/company/company.yaml").unlink()
    (tmp_path / "ws/company/company.yaml").symlink_to(outside)
    init_workspace(tmp_path / "ws", force=True)
    assert outside.read_text() == "mine: true\n"
    assert not (tmp_path / "ws/company/company.yaml").is_symlink()

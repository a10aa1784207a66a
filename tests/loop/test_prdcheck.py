"""prd_warnings: what a run's start says about PRD lines that look like tasks but are not."""

from __future__ import annotations

from pathlib import Path

from ralph.config import Config, FilesConfig
from ralph.loop.paths import ProjectPaths
from ralph.loop.prdcheck import MAX_SHOWN, prd_warnings


def warnings(root: Path, text: str | None, prd: str = "PRD.md") -> list[str]:
    if text is not None:
        (root / prd).write_text(text)
    return prd_warnings(ProjectPaths(root), Config(files=FilesConfig(prd=prd)))


def test_a_clean_prd_gives_no_warning(tmp_path: Path) -> None:
    assert warnings(tmp_path, "# PRD\n\n## Tasks\n\n- [ ] 1. First\n  - [ ] criterion\n") == []


def test_one_warning_per_line_naming_file_line_text_and_reason(tmp_path: Path) -> None:
    text = "# PRD\n\n## Tasks\n\n- [ ] 1. First\n2. [ ] Second\n\n## Later\n\n- [ ] Third\n"
    assert warnings(tmp_path, text) == [
        "PRD.md:6: \"2. [ ] Second\" is not read as a task: it is a numbered list item ('2.'), "
        "not a bullet; write '- [ ] Title'",
        "PRD.md:10: \"- [ ] Third\" is not read as a task: it is under '## Later', and only "
        "the checklist under '## Tasks' is read",
    ]


def test_many_lines_are_capped_with_a_count_of_the_rest(tmp_path: Path) -> None:
    numbered = "".join(f"{n}. [ ] Task {n}\n" for n in range(1, MAX_SHOWN + 4))
    found = warnings(tmp_path, f"## Tasks\n\n- [ ] 0. Real\n{numbered}")
    assert len(found) == MAX_SHOWN + 1
    assert found[0].startswith('PRD.md:4: "1. [ ] Task 1"')
    assert found[-1] == ("PRD.md: 3 more lines look like tasks but are not read as tasks "
                         "(`ralph tasks` lists them all)")
    one_more = "".join(f"{n}. [ ] Task {n}\n" for n in range(1, MAX_SHOWN + 2))
    assert warnings(tmp_path, f"## Tasks\n\n{one_more}")[-1] == (
        "PRD.md: 1 more line looks like a task but is not read as one (`ralph tasks` lists it)")


def test_the_configured_prd_is_read_and_named(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    found = warnings(tmp_path, "## Tasks\n\n-[ ] Glued\n", prd="docs/plan.md")
    assert found == ["docs/plan.md:3: \"-[ ] Glued\" is not read as a task: no space between "
                     "'-' and the box; write '- [ ] Title'"]


def test_never_raises(tmp_path: Path) -> None:
    assert warnings(tmp_path, None) == []  # no PRD: loading the tasks reports it
    (tmp_path / "PRD.md").mkdir()
    assert warnings(tmp_path, None) == []  # a directory
    (tmp_path / "bad.md").write_bytes(b"## Tasks\n1. [ ] \xff\n")
    assert warnings(tmp_path, None, prd="bad.md") == []  # not UTF-8
    assert warnings(tmp_path, '{"stories": []}', prd="prd.json") == []
    assert warnings(tmp_path, "1. [ ] x\n", prd="tasks.txt") == []  # unknown format

"""project_status when the PRD cannot be read: no task, `next` null, and `prd_error` saying
why on one line, instead of an error (editors poll status in any folder)."""

from __future__ import annotations

import os
from dataclasses import fields
from pathlib import Path

import pytest

from ralph.bridge.models import StatusResult
from ralph.config import Config, FilesConfig
from ralph.loop.models import StatusFields
from ralph.loop.paths import ProjectPaths
from ralph.loop.status import StatusSource, project_status

GOOD = "## Tasks\n\n- [x] 1. A\n- [ ] 2. B\n"


def status_of(root: Path, prd: str = "PRD.md", source: StatusSource | None = None,
              ) -> tuple[int, int, str | None, str | None]:
    config = Config(files=FilesConfig(prd=prd))
    report = project_status(ProjectPaths(root), config.files, source=source)
    return (report.done, report.total, report.next.task_id if report.next else None,
            report.prd_error)


@pytest.mark.parametrize(("name", "text", "error"), [
    ("PRD.md", None, "{p}: no such file: run `ralph init` to create it, or set files.prd in "
                     "ralph.toml"),
    ("PRD.md", "# Just prose\n", "{p} has no tasks: add a checklist under '## Tasks'"),
    ("PRD.md", "## Tasks\n1. [ ] Numbered\n", "{p} has no tasks: add a checklist under "
                                              "'## Tasks'"),
    ("PRD.md", "## Tasks\n- [?] 1. A\n", "{p}:2: unknown task marker '[?]'; use [ ], [x], "
                                         "[~] or [-]"),
    ("prd.json", "{", "{p}:1: invalid JSON"),
    ("tasks.txt", "- [ ] 1. A\n", "{p}: unknown tracker format '.txt'; use a .md, "
                                  ".markdown or .json file"),
])
def test_an_unreadable_prd_is_reported_not_raised(tmp_path: Path, name: str, text: str | None,
                                                  error: str) -> None:
    if text is not None:
        (tmp_path / name).write_text(text)
    done, total, nxt, prd_error = status_of(tmp_path, name)
    assert (done, total, nxt) == (0, 0, None)
    assert prd_error is not None and prd_error.startswith(error.format(p=tmp_path / name))
    assert "\n" not in prd_error


def test_a_readable_prd_has_no_prd_error(tmp_path: Path) -> None:
    (tmp_path / "PRD.md").write_text(GOOD)
    assert status_of(tmp_path) == (1, 2, "2", None)


def test_prd_error_is_not_a_documented_bridge_field() -> None:
    assert "prd_error" not in {field.name for field in fields(StatusFields)}
    assert "prd_error" in {field.name for field in fields(StatusResult)}  # an extension


def test_the_cached_source_follows_the_prd_being_broken_and_fixed(tmp_path: Path) -> None:
    prd = tmp_path / "PRD.md"
    source = StatusSource(ProjectPaths(tmp_path), Config().files)
    assert status_of(tmp_path, source=source)[3] is not None  # missing
    prd.write_text(GOOD)
    assert status_of(tmp_path, source=source) == (1, 2, "2", None)
    prd.write_text("## Tasks\n- [?] 1. Broken marker\n")
    os.utime(prd, ns=(1, 1))  # a new signature whatever the clock's granularity
    first = status_of(tmp_path, source=source)
    assert first[:3] == (0, 0, None) and first[3] is not None and "[?]" in first[3]
    assert status_of(tmp_path, source=source) == first  # the error is cached with the file
    prd.write_text(GOOD)
    os.utime(prd, ns=(2, 2))
    assert status_of(tmp_path, source=source) == (1, 2, "2", None)

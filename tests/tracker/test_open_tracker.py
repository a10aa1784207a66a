"""open_tracker chooses the format by suffix, and refuses what it cannot open."""

from __future__ import annotations

from pathlib import Path

import pytest

from ralph.tracker import JsonTracker, MarkdownTracker, TrackerError, open_tracker
from tests.tracker.helpers import write


@pytest.mark.parametrize(
    ("name", "kind", "fmt"),
    [
        ("PRD.md", MarkdownTracker, "md"),
        ("plan.markdown", MarkdownTracker, "md"),
        ("NOTES.MD", MarkdownTracker, "md"),
        ("prd.json", JsonTracker, "json"),
        ("PRD.JSON", JsonTracker, "json"),
    ],
)
def test_by_suffix(tmp_path: Path, name: str, kind: type, fmt: str) -> None:
    path = write(tmp_path / name, "")
    tracker = open_tracker(path)
    assert isinstance(tracker, kind)
    assert tracker.format == fmt
    assert tracker.path == path


def test_markdown_and_json_load_the_same_tasks(tmp_path: Path) -> None:
    md = open_tracker(write(tmp_path / "PRD.md", "## Tasks\n- [x] 1. One\n- [ ] 2. Two\n"))
    js = open_tracker(
        write(
            tmp_path / "prd.json",
            '{"stories": [{"id": 1, "title": "One", "passes": true}, {"id": "2", "title": "Two"}]}',
        )
    )
    assert md.load() == js.load()


def test_unknown_suffix(tmp_path: Path) -> None:
    path = write(tmp_path / "PRD.txt", "")
    with pytest.raises(TrackerError) as info:
        open_tracker(path)
    assert str(info.value) == (
        f"{path}: unknown tracker format '.txt'; use a .md, .markdown or .json file"
    )


def test_no_suffix(tmp_path: Path) -> None:
    with pytest.raises(TrackerError, match="unknown tracker format ''"):
        open_tracker(tmp_path / "PRD")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TrackerError) as info:
        open_tracker(tmp_path / "PRD.md")
    assert str(info.value) == f"{tmp_path / 'PRD.md'}: no such file"


def test_a_directory(tmp_path: Path) -> None:
    (tmp_path / "x.json").mkdir()
    with pytest.raises(TrackerError) as info:
        open_tracker(tmp_path / "x.json")
    assert str(info.value) == f"{tmp_path / 'x.json'}: is not a file"


def test_a_file_removed_after_opening(tmp_path: Path) -> None:
    path = write(tmp_path / "PRD.md", "## Tasks\n- [ ] a\n")
    tracker = open_tracker(path)
    path.unlink()
    with pytest.raises(TrackerError) as info:
        tracker.load()
    assert str(info.value) == f"{path}: no such file"
    with pytest.raises(TrackerError):
        tracker.set_status("a", "done")
    assert not path.exists()

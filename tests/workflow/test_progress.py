"""progress.md: markers read strictly, labels tolerated, one line moved atomically."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ralph.workflow.errors import WorkflowError
from ralph.workflow.progress import Marker, parse_progress, read_progress, set_marker, status_line

REFERENCE = """\
# Progress Tracking

## Planning Progress
- [x] plan-init (Completed)
- [ ] plan-qa-brainstorm (Not Started)

## Implementation Progress
- [x] task-1 (Completed)
- [P] task-2 (Review Pending)
- [/] task-3 (In Progress)
- [ ] task-4 (Not Started)
"""


def test_the_reference_format():
    progress = parse_progress(REFERENCE)
    assert progress.markers == {
        "plan-init": Marker.COMPLETED, "plan-qa-brainstorm": Marker.NOT_STARTED,
        "task-1": Marker.COMPLETED, "task-2": Marker.REVIEW_PENDING,
        "task-3": Marker.IN_PROGRESS, "task-4": Marker.NOT_STARTED}
    entry = progress.get("task-2")
    assert entry is not None
    assert (entry.label, entry.line) == ("Review Pending", 9)
    assert progress.with_marker(Marker.NOT_STARTED) == ["plan-qa-brainstorm", "task-4"]


def test_labels_missing_reworded_or_followed_by_notes():
    text = ("## Legend\n- [ ] Not Started\n- [/] In-Progress\n\n## Tasks\n"
            "- [/] task-1\n"
            "  * [P] task-2.1 (ready for review, see report) - 10:42\n"
            "- [F] task-3 (Failed: gates failed (pytest))\n"
            "```\n- [?] task-9 (quoted)\n```\n"
            "- [x] task-4: done early\n"
            "Some prose - [ ] not a line\n")
    progress = parse_progress(text)
    assert [(e.task_id, e.marker, e.label) for e in progress.entries] == [
        ("task-1", Marker.IN_PROGRESS, None),
        ("task-2.1", Marker.REVIEW_PENDING, "ready for review, see report"),
        ("task-3", Marker.FAILED, "Failed: gates failed (pytest)"),
        ("task-4", Marker.COMPLETED, None),
    ]


@pytest.mark.parametrize("marker", ["X", "p", "", "~", "xx", " x", "done", "✓"])
def test_an_unknown_marker_is_an_error_naming_the_line(marker: str):
    text = f"# Progress\n- [x] task-1 (Completed)\n- [{marker}] task-2 (Done)\n"
    with pytest.raises(WorkflowError) as raised:
        parse_progress(text, "progress.md")
    assert str(raised.value) == (f"progress.md:3: unknown marker [{marker}] for task-2 "
                                 "(expected one of [ ] [/] [P] [x] [F])")


def test_a_task_listed_twice_is_an_error():
    with pytest.raises(WorkflowError) as raised:
        parse_progress("- [ ] task-1\n- [x] task-2\n- [x] task-1\n", "progress.md")
    assert str(raised.value) == "progress.md:3: duplicate task id task-1 (first on line 1)"


def test_status_lines():
    assert status_line("task-1", Marker.COMPLETED) == "- [x] task-1 (Completed)"
    assert status_line("task-1", Marker.FAILED, "3 attempts,\n gates failing") == (
        "- [F] task-1 (Failed: 3 attempts, gates failing)")


def _write(path: Path, text: str) -> Path:
    path.write_bytes(text.encode())
    return path


def test_set_marker_changes_that_line_only(tmp_path: Path):
    path = _write(tmp_path / "progress.md", REFERENCE + "\nNotes: keep   this\n")
    old = set_marker(path, "task-2", Marker.COMPLETED, expect=[Marker.REVIEW_PENDING])
    assert old is Marker.REVIEW_PENDING
    expected = REFERENCE.replace("- [P] task-2 (Review Pending)", "- [x] task-2 (Completed)")
    assert path.read_text() == expected + "\nNotes: keep   this\n"


def test_set_marker_keeps_indent_bullet_and_line_endings(tmp_path: Path):
    text = "# P\r\n  * [/] task-1 (working on it) extra\r\n- [ ] task-2\r\n"
    path = _write(tmp_path / "progress.md", text)
    set_marker(path, "task-1", Marker.NOT_STARTED)
    assert path.read_bytes() == b"# P\r\n  * [ ] task-1 (Not Started)\r\n- [ ] task-2\r\n"


def test_set_marker_failed_with_its_reason(tmp_path: Path):
    path = _write(tmp_path / "progress.md", "- [ ] task-1 (Not Started)")
    set_marker(path, "task-1", Marker.FAILED, reason="3 attempts failed review")
    assert path.read_text() == "- [F] task-1 (Failed: 3 attempts failed review)"
    assert read_progress(path).markers == {"task-1": Marker.FAILED}


def test_set_marker_from_an_unexpected_marker_writes_nothing(tmp_path: Path):
    path = _write(tmp_path / "progress.md", REFERENCE)
    with pytest.raises(WorkflowError) as raised:
        set_marker(path, "task-3", Marker.COMPLETED, expect=[Marker.REVIEW_PENDING])
    assert str(raised.value) == f"{path}:10: task-3 is [/], expected [P] before it becomes [x]"
    assert path.read_text() == REFERENCE


def test_set_marker_refuses_a_missing_task_or_an_invalid_file(tmp_path: Path):
    path = _write(tmp_path / "progress.md", REFERENCE)
    with pytest.raises(WorkflowError, match=r"progress\.md: no status line for task-9$"):
        set_marker(path, "task-9", Marker.COMPLETED)
    bad = _write(tmp_path / "bad.md", "- [ ] task-1\n- [?] task-2\n")
    with pytest.raises(WorkflowError, match=r"bad\.md:2: unknown marker \[\?\]"):
        set_marker(bad, "task-1", Marker.IN_PROGRESS)
    assert bad.read_text() == "- [ ] task-1\n- [?] task-2\n"
    with pytest.raises(WorkflowError, match="cannot read"):
        set_marker(tmp_path / "missing.md", "task-1", Marker.IN_PROGRESS)


def test_set_marker_replaces_the_file_atomically(tmp_path: Path):
    # Atomic: the file is replaced by a rename (a new inode), never rewritten in place, and
    # no temp file is left beside it; a reader holding the old file still sees it whole.
    path = _write(tmp_path / "progress.md", REFERENCE)
    with path.open() as reader:
        inode = os.stat(path).st_ino
        set_marker(path, "task-4", Marker.IN_PROGRESS)
        assert reader.read() == REFERENCE
    assert os.stat(path).st_ino != inode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["progress.md"]
    assert parse_progress(path.read_text()).markers["task-4"] is Marker.IN_PROGRESS


@pytest.mark.parametrize("brk", ["\x0b", "\x0c", "\x1c", "\x85", "\u2028", "\u2029"])
def test_only_newline_ends_a_line(tmp_path: Path, brk: str) -> None:
    path = tmp_path / "progress.md"
    text = (f"# Progress{brk}notes\r\n- [ ] task-1 (Not Started)\r\n"
            f"Note: a{brk}b\n- [P] task-2 (Review Pending)\n")
    path.write_bytes(text.encode("utf-8"))
    assert [(entry.task_id, entry.line) for entry in read_progress(path).entries] == [
        ("task-1", 2), ("task-2", 4)]
    assert set_marker(path, "task-2", Marker.COMPLETED) is Marker.REVIEW_PENDING
    assert path.read_bytes().decode("utf-8") == text.replace(
        "- [P] task-2 (Review Pending)", "- [x] task-2 (Completed)")
    set_marker(path, "task-1", Marker.IN_PROGRESS)
    assert path.read_bytes().decode("utf-8").startswith(
        f"# Progress{brk}notes\r\n- [/] task-1 (In Progress)\r\nNote: a{brk}b\n")


def test_a_file_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    path = tmp_path / "progress.md"
    path.write_bytes(b"# Progress\n- [ ] task-1 (caf\xe9)\n")
    for action in (lambda: read_progress(path),
                   lambda: set_marker(path, "task-1", Marker.IN_PROGRESS)):
        with pytest.raises(WorkflowError) as caught:
            action()
        assert str(caught.value) == f"{path} is not UTF-8 text (byte 28)"
    assert path.read_bytes() == b"# Progress\n- [ ] task-1 (caf\xe9)\n"


def test_headings_in_fences_and_a_legend_with_a_colon() -> None:
    text = ("## Legend:\n- [?] task-9 (whatever the legend shows)\n"
            "## Implementation Progress\n```markdown\n## Legend\n```\n"
            "- [x] task-1 (Completed)\n"
            "```\n## Notes\n- [?] task-8 (an example in a fence)\n```\n"
            "- [ ] task-2 (Not Started)\n")
    assert parse_progress(text).markers == {"task-1": Marker.COMPLETED,
                                           "task-2": Marker.NOT_STARTED}

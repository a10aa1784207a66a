"""A tracker keeps its last parse: an unchanged file is not read again, a file changed within
the clock's resolution is still seen to change, and a partial parse equals a full one."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest

from ralph.tracker import JsonTracker, MarkdownTracker, Snapshot, TrackerError, open_tracker
from ralph.tracker.errors import TrackerError as Error
from ralph.tracker.mdincremental import reparse_prd
from ralph.tracker.mdparse import ParsedPrd, parse_prd
from ralph.tracker.ready import next_ready

PRD = "# P\n\n## Tasks\n\n- [ ] 1. One\n  - works\n- [ ] 2. Two\n  - Depends on: 1\n"
OLD_NS = 1_600_000_000_123_456_789  # an mtime long past: out of any racy window


def _age(path: Path, mtime_ns: int = OLD_NS) -> None:
    os.utime(path, ns=(mtime_ns, mtime_ns))


def _rewrite_in_place(path: Path, text: str) -> None:
    """Same inode, same size expected by the caller, mtime put back by the caller."""
    with path.open("r+", encoding="utf-8") as handle:
        handle.write(text)
        handle.truncate()


def test_an_unchanged_file_is_neither_read_nor_parsed_again(tmp_path: Path) -> None:
    prd = tmp_path / "PRD.md"
    prd.write_text(PRD)
    _age(prd)
    tracker = MarkdownTracker(prd)
    first = tracker.snapshot()
    assert tracker.snapshot() is first and tracker.load() == list(first)
    assert tracker.file.reads == 1 and tracker.parses == 1


def test_a_change_of_size_is_seen(tmp_path: Path) -> None:
    prd = tmp_path / "PRD.md"
    prd.write_text(PRD)
    _age(prd)
    tracker = MarkdownTracker(prd)
    tracker.snapshot()
    prd.write_text(PRD.replace("- [ ] 1. One", "- [x] 1. One!"))
    _age(prd)  # even with the old mtime: the size differs
    assert tracker.snapshot().is_done("1")
    assert tracker.parses == 2


def test_a_same_size_change_within_the_clocks_resolution_is_seen(tmp_path: Path) -> None:
    prd = tmp_path / "PRD.md"
    prd.write_text(PRD)
    stamp = time.time_ns()
    _age(prd, stamp)
    tracker = MarkdownTracker(prd)
    assert not tracker.snapshot().is_done("1")
    inode = prd.stat().st_ino
    _rewrite_in_place(prd, PRD.replace("- [ ] 1.", "- [x] 1."))
    _age(prd, stamp)  # the same inode, size and mtime: only the content tells
    assert prd.stat().st_ino == inode and prd.stat().st_size == len(PRD)
    assert tracker.snapshot().is_done("1")


def test_a_version_older_than_the_resolution_is_trusted_on_its_signature(
        tmp_path: Path) -> None:
    prd = tmp_path / "PRD.md"
    prd.write_text(PRD)
    _age(prd)
    tracker = MarkdownTracker(prd)
    tracker.snapshot()
    for _ in range(3):
        tracker.snapshot()
    assert tracker.file.reads == 1  # the signature vouches: no read at all


def test_a_recent_version_is_compared_but_not_parsed_again(tmp_path: Path) -> None:
    prd = tmp_path / "PRD.md"
    prd.write_text(PRD)
    tracker = MarkdownTracker(prd)
    first = tracker.snapshot()
    assert tracker.snapshot() is first
    assert tracker.parses == 1  # read again (racy), found the same: not parsed


def test_set_status_keeps_the_parse_it_wrote(tmp_path: Path) -> None:
    prd = tmp_path / "PRD.md"
    prd.write_text(PRD)
    tracker = MarkdownTracker(prd)
    tracker.snapshot()
    tracker.set_status("1", "blocked", "no key")
    parses = tracker.parses
    snapshot = tracker.snapshot()
    assert tracker.parses == parses  # what it wrote is what it parsed
    assert snapshot.get("1") is not None and snapshot.blocked()[0].blocked_reason == "no key"
    assert parse_prd(prd, prd.read_text()).snapshot.tasks == snapshot.tasks


def test_a_broken_file_reports_the_same_error_until_fixed(tmp_path: Path) -> None:
    prd = tmp_path / "PRD.md"
    prd.write_text(PRD)
    tracker = MarkdownTracker(prd)
    tracker.snapshot()
    prd.write_text(PRD.replace("[ ] 1.", "[?] 1."))
    for _ in range(2):
        with pytest.raises(Error, match=r"PRD.md:5: unknown task marker '\[\?\]'"):
            tracker.snapshot()
    prd.write_text(PRD.replace("[ ] 1.", "[x] 1."))
    assert tracker.snapshot().is_done("1")


def test_a_deleted_file_is_an_error_not_the_cached_tasks(tmp_path: Path) -> None:
    prd = tmp_path / "PRD.md"
    prd.write_text(PRD)
    tracker = open_tracker(prd)
    tracker.snapshot()
    prd.unlink()
    with pytest.raises(TrackerError, match="no such file"):
        tracker.snapshot()


def test_the_json_tracker_keeps_its_parse_too(tmp_path: Path) -> None:
    prd = tmp_path / "prd.json"
    prd.write_text('{"stories": [{"id": "US-1", "title": "One", "passes": false}]}\n')
    _age(prd)
    tracker = JsonTracker(prd)
    first = tracker.snapshot()
    assert tracker.snapshot() is first and tracker.parses == 1 and tracker.file.reads == 1
    tracker.set_status("US-1", "done")
    assert tracker.snapshot().is_done("US-1") and tracker.parses == 2


# -- the partial parse against the whole one -------------------------------------------------

PIECES = ["- [ ] 1. Task one\n", "\u00a0```\n", "  - it works\n", "- [x] 2. Two\n",
          "  - Depends on: 1\n",
          "\n", "- [-] 3. Three\n", "  - Blocked: why\n", "### Phase\n", "text para\n",
          "    continued\n", "* [~] T-4: four\n", "  - [ ] nested\n", "```\n",
          "- [ ] 9. in fence\n", "## Other\n", "## Tasks\n", "- [ ] 5. five\r\n",
          "  - crlf\r\n", "- [?] 6. bad\n", "- [ ] 7. seven", "\t- [ ] 8. tabbed\n",
          "1. [ ] numbered\n", "- [ ] 1. dup\n", "  continued title\n", "- [ ] 10. Ten\n"]
EDITS = [" ", "x", "- ", "\n", "  ", "Blocked: z", "", "\r"]


def _outcome(parse: ParsedPrd | None, error: str | None) -> object:
    if parse is None:
        return error
    return (parse.body, parse.lines, parse.newline, parse.section, parse.blocks,
            parse.snapshot.tasks, parse.snapshot.marks, dict(parse.snapshot.positions))


def _both(path: Path, old: ParsedPrd, text: str) -> tuple[object, object]:
    results = []
    for parse in (lambda: parse_prd(path, text), lambda: reparse_prd(path, old, text)):
        try:
            results.append(_outcome(parse(), None))
        except TrackerError as exc:
            results.append(_outcome(None, str(exc)))
    return results[0], results[1]


def _edited(rng: random.Random, text: str) -> str:
    lines = text.splitlines(keepends=True)
    for _ in range(rng.randint(1, 3)):
        at = rng.randint(0, max(len(lines) - 1, 0))
        op = rng.random()
        if op < 0.3 and lines:
            mark = rng.choice(["[ ]", "[x]"])
            lines[at] = lines[at].replace(mark, "[x]" if mark == "[ ]" else "[ ]", 1)
        elif op < 0.55:
            lines.insert(at, rng.choice(PIECES))
        elif op < 0.75 and lines:
            del lines[at]
        elif lines:
            col = rng.randint(0, len(lines[at]))
            lines[at] = lines[at][:col] + rng.choice(EDITS) + lines[at][col + 1:]
    return "".join(lines)


def test_a_partial_parse_equals_a_whole_one_after_random_edits() -> None:
    rng = random.Random(20261127)
    path = Path("PRD.md")
    compared = 0
    while compared < 3000:
        text = "# T\n\n## Tasks\n\n" + "".join(rng.choice(PIECES)
                                              for _ in range(rng.randint(0, 14)))
        try:
            old = parse_prd(path, text)
        except TrackerError:
            continue
        new = _edited(rng, text)
        whole, partial = _both(path, old, new)
        assert whole == partial, (text, new)
        compared += 1


def test_a_tick_in_a_long_prd_reuses_every_other_task() -> None:
    path = Path("PRD.md")
    text = "# P\n\n## Tasks\n\n" + "".join(f"- [ ] {n}. Task {n}\n  - ok\n"
                                              for n in range(1, 2001))
    old = parse_prd(path, text)
    new = reparse_prd(path, old, text.replace("- [ ] 1000. ", "- [x] 1000. "))
    assert new.snapshot.is_done("1000") and new.snapshot.done == 1
    same = sum(a is b for a, b in zip(old.blocks, new.blocks, strict=True))
    # Only the ticked task was parsed again, and the one above it (a change on a task's own
    # line may join that line to the task above).
    assert same == 1998
    assert new.snapshot.positions is old.snapshot.positions


# -- the snapshot's quick answers against the general rule -----------------------------------

def test_the_snapshots_next_task_and_done_since_agree_with_the_general_rule() -> None:
    rng = random.Random(7)
    for _ in range(400):
        count = rng.randint(1, 12)
        lines = []
        for n in range(1, count + 1):
            mark = rng.choice(" x~-")
            deps = rng.sample(range(1, n), k=min(n - 1, rng.randint(0, 2))) if n > 1 else []
            lines.append(f"- [{mark}] {n}. Task {n}\n")
            if deps:
                lines.append(f"  - Depends on: {', '.join(map(str, deps))}\n")
        parsed = parse_prd(Path("PRD.md"), "## Tasks\n\n" + "".join(lines))
        snapshot = parsed.snapshot
        assert snapshot.next_task() == next_ready(snapshot.tasks)
        assert Snapshot(snapshot.tasks).next_task() == next_ready(snapshot.tasks)
        later_text = "".join(line.replace("[ ]", "[x]") if rng.random() < 0.3 else line
                             for line in lines)
        later = reparse_prd(Path("PRD.md"), parsed, "## Tasks\n\n" + later_text).snapshot
        expected = [t for t in later if t.status == "done" and not snapshot.is_done(t.id)]
        assert later.done_since(snapshot) == expected
        assert Snapshot(later.tasks).done_since(snapshot) == expected


def test_a_failed_set_status_leaves_the_json_tracker_seeing_the_file_as_it_is(
        tmp_path: Path) -> None:
    prd = tmp_path / "prd.json"

    def write(text: str) -> None:
        prd.write_text(text)
        _age(prd)

    write('{"stories": [{"id": "US-1", "title": "One", "passes": false},'
          ' {"id": "US-2", "title": "Two", "passes": false}]}\n')
    tracker = JsonTracker(prd)
    tracker.snapshot()
    write('{"stories": [ broken\n')  # first seen by a set_status that fails on it
    for _ in range(2):
        with pytest.raises(TrackerError, match="invalid JSON"):
            tracker.set_status("US-1", "in_progress")
        with pytest.raises(TrackerError, match="invalid JSON"):
            tracker.snapshot()
    write('{"stories": [{"id": "US-2", "title": "Two", "passes": true}]}\n')
    with pytest.raises(TrackerError, match="no story with id 'US-1'"):
        tracker.set_status("US-1", "open")
    assert [(t.id, t.status) for t in tracker.snapshot()] == [("US-2", "done")]


@pytest.mark.parametrize("space", ["\u00a0", "\f", "\v"])
def test_a_fence_after_odd_whitespace_still_parses_the_whole_file(space: str) -> None:
    """`fence_closed` strips any whitespace, so such a line closes a fence: an edit of it
    changes what the rest of the file is."""
    path = Path("PRD.md")
    old_text = f"## Tasks\n\n```\n- [ ] 9. in the example\n{space}```\n- [ ] 1. One\n"
    old = parse_prd(path, old_text)
    new_text = old_text.replace(f"{space}```", f"{space}x``")
    assert _both(path, old, new_text)[0] == _both(path, old, new_text)[1]

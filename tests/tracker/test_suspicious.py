"""Lines that look like tasks but are not read as tasks: what is reported, why, and that no
line the parser reads as a task is ever reported."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ralph.tracker import MarkdownTracker, SuspiciousLine, TrackerError, suspicious_lines
from ralph.tracker.mdparse import parse_prd
from ralph.tracker.suspicious import find_suspicious
from tests.tracker.helpers import write


def reported(text: str) -> dict[int, str]:
    """Line number -> reason of every suspicious line of `text`."""
    return {found.line: found.reason for found in find_suspicious(text)}


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("1. [ ] Title", ["numbered list item ('1.')", "write '- [ ] Title'"]),
        ("12) [x] Title", ["numbered list item ('12)')", "write '- [x] Title'"]),
        ("-[ ] Title", ["no space between '-' and the box"]),
        ("*[x] Title", ["no space between '*' and the box", "'- [x] Title'"]),
        ("- [] Title", ["the box is empty ('[]')"]),
        ("- [  ] Title", ["the box is '[  ]', not '[ ]'"]),
        ("- [ x] Title", ["the box is '[ x]', not '[x]'"]),
        ("- [~ ] Title", ["the box is '[~ ]', not '[~]'", "'- [~] Title'"]),
        ("- [ ]Title", ["no space between the box and the title"]),
        ("[ ] Title", ["the box has no bullet before it"]),
        ("[x] Title", ["the box has no bullet before it", "'- [x] Title'"]),
        ("> - [ ] Title", ["block quote"]),
        ("-\u00a0[ ] Title", ["U+00A0", "no-break space", "between '-' and the box"]),
        ("- [ ]\u00a0Title", ["U+00A0", "after the box"]),
        ("- [\u00a0 ] Title", ["the box is '[U+00A0 ]', not '[ ]'"]),
        ("\u00a0- [ ] Title", ["indentation", "U+00A0"]),
    ],
)
def test_near_misses_in_the_task_list(line: str, words: list[str]) -> None:
    text = f"# PRD\n\n## Tasks\n\n- [ ] 1. A real task\n{line}\n"
    found = find_suspicious(text)
    assert [(f.line, f.text) for f in found] == [(6, line)]
    for word in words:
        assert word in found[0].reason, (word, found[0].reason)


@pytest.mark.parametrize(
    ("heading", "words"),
    [
        ("## Backlog", ["it is under '## Backlog'", "only the checklist under '## Tasks'"]),
        ("# Appendix", ["it is under '# Appendix'"]),
        ("### Tasks", ["under '### Tasks'", "level-2 heading '## Tasks'"]),
        ("# Tasks", ["under '# Tasks'", "level-2 heading '## Tasks'"]),
    ],
)
def test_checklists_under_another_heading(heading: str, words: list[str]) -> None:
    text = f"{heading}\n\n- [ ] Later\n* [x] Done\n+ [~] Going\n\n## Tasks\n\n- [ ] 1. Real\n"
    found = find_suspicious(text)
    assert [f.line for f in found] == [3, 4, 5]
    for f in found:
        for word in words:
            assert word in f.reason, (word, f.reason)


def test_a_checklist_before_any_heading_and_a_file_without_a_task_list() -> None:
    assert reported("- [ ] Early\n\n## Tasks\n\n- [ ] 1. Real\n") == {
        1: "it is before any heading, and only the checklist under '## Tasks' is read"}
    assert reported("# PRD\n\n## Todo\n\n- [ ] One\n1. [ ] Two\n") == {
        5: "the file has no '## Tasks' heading, and only the checklist under it is read",
        6: "it is a numbered list item ('1.'), not a bullet; the file has no '## Tasks' "
           "heading, and only the checklist under it is read; write '- [ ] Title'",
    }


def test_a_numbered_task_list_is_reported_line_by_line() -> None:
    """The mistake that leaves a PRD with no task at all."""
    text = "# PRD\n\n## Tasks\n\n1. [ ] First\n2. [ ] Second\n   - criterion\n3. [x] Third\n"
    assert list(reported(text)) == [5, 6, 8]


def test_what_is_not_reported() -> None:
    text = (
        "# PRD\n\n"
        "Each task is a checkbox line: `[ ]` open, `[x]` done.\n"  # prose mentioning boxes
        "See [the docs](https://example.com) and [x](y).\n"
        "- [link](https://example.com)\n"
        "- [?] an unknown marker outside the task list\n"
        "> [!NOTE] an alert\n"
        "```\n- [ ] an example in a fence\n1. [ ] another\n```\n"
        "~~~~markdown\n[ ] in a tilde fence\n~~~~\n"
        "<!-- a comment\n- [ ] commented out\n1. [ ] this too -->\n"
        "<!-- - [ ] one-line comment -->\n"
        "\n## Tasks\n\n"
        "- [ ] 1. Real\n"
        "  - [ ] a nested checklist is acceptance criteria\n"
        "  1. [ ] so is a numbered one\n"
        "  - [] and an odd one\n"
        "\n"
        "    [ ] indented text of the task after a blank line\n"
        "- [x] 2. Done\n"
        "### Phase 2\n"
        "- [ ] 3. A subheading does not end the task list\n"
    )
    assert reported(text) == {}


def test_a_list_after_the_task_list() -> None:
    text = "## Tasks\n\n- [ ] 1. Real\n\n## Done\n\n- [x] Archived\n"
    assert reported(text) == {
        7: "it is under '## Done', and only the checklist under '## Tasks' is read"}


def test_criteria_of_a_misplaced_task_are_not_reported_again() -> None:
    text = "## Tasks\n\n- [ ] 1. Real\n\n## Later\n\n- [ ] Misplaced\n  - [ ] its criterion\n"
    assert list(reported(text)) == [7]


def test_a_near_miss_does_not_swallow_the_lines_below_it_in_the_task_list() -> None:
    """In `## Tasks` the parser reads what follows a near miss on its own: so does this."""
    text = "## Tasks\n\n1. [ ] Numbered\n   - [] odd criterion\n- [ ] 2. Real\n"
    assert list(reported(text)) == [3, 4]


def test_line_numbers_with_crlf_a_bom_and_lone_cr() -> None:
    text = "\ufeff# PRD\r\n## Tasks\r\n- [ ] 1. Real\r\n1. [ ] Numbered\r\n"
    assert [(f.line, f.text) for f in find_suspicious(text)] == [(4, "1. [ ] Numbered")]
    assert list(reported("## Tasks\r- [ ] 1. A\r-[ ] B\r")) == [3]


def test_a_second_task_list_counts_as_a_task_list() -> None:
    """Two `## Tasks` headings are the parser's error to report; neither list is misplaced."""
    assert reported("## Tasks\n- [ ] 1. A\n## Tasks\n- [ ] 2. B\n") == {}


def test_describe_is_one_line_naming_file_line_text_and_reason() -> None:
    found = SuspiciousLine(3, "  1. [ ] Add login", "a reason")
    assert found.describe("PRD.md") == (
        'PRD.md:3: "1. [ ] Add login" is not read as a task: a reason')
    raw = SuspiciousLine(4, "1. [ ] \x1b[31mred\tx", "under '## \x07'")
    assert raw.describe("PRD.md") == (
        'PRD.md:4: "1. [ ] \\x1b[31mred x" is not read as a task: under \'## \\x07\'')
    long = SuspiciousLine(9, "1. [ ] " + "x" * 100, "why")
    shown = long.describe("PRD.md").split('"')[1]
    assert len(shown) == 60 and shown.endswith("…")


def test_suspicious_lines_of_files(tmp_path: Path) -> None:
    prd = write(tmp_path / "PRD.md", "## Tasks\n\n1. [ ] Numbered\n")
    assert [f.line for f in suspicious_lines(prd)] == [3]
    upper = write(tmp_path / "TODO.MARKDOWN", "## Tasks\n\n1. [ ] Numbered\n")
    assert [f.line for f in suspicious_lines(upper)] == [3]
    stories = write(tmp_path / "prd.json", '{"stories": []}')
    assert suspicious_lines(stories) == []
    assert suspicious_lines(tmp_path / "missing.json") == []
    with pytest.raises(TrackerError, match="no such file"):
        suspicious_lines(tmp_path / "missing.md")
    bad = tmp_path / "bad.md"
    bad.write_bytes(b"## Tasks\n\xff\n")
    with pytest.raises(TrackerError, match="not valid UTF-8"):
        suspicious_lines(bad)


# -- property: a line the parser reads as a task is never reported ----------------------------

LINES = st.sampled_from([
    "", "# PRD", "## Tasks", "## Backlog", "### Phase", "### Tasks", "Some text.",
    "- [ ] Open task", "- [x] Done task", "* [~] Going", "+ [-] Blocked",
    "  - [ ] nested", "    - [x] deeper", "  - criterion", "  1. [ ] nested numbered",
    "1. [ ] Numbered", "-[ ] Glued", "- [] Empty", "- [ ]Glued title", "[ ] Bare",
    "> - [ ] Quoted", "  [ ] indented bare", "```", "~~~", "<!--", "-->", "<!-- x -->",
    "\t- [ ] tabbed", "- [?] Unknown",
])


@settings(max_examples=300, deadline=None)
@given(st.lists(LINES, max_size=25), st.sampled_from(["\n", "\r\n"]))
def test_no_task_line_is_ever_reported(lines: list[str], eol: str) -> None:
    text = eol.join(lines) + eol
    with tempfile.TemporaryDirectory() as tmp:
        path = write(Path(tmp) / "PRD.md", text)
        try:
            parsed = parse_prd(path, text)
        except TrackerError:
            return  # a PRD the parser refuses says why itself
        task_lines = {block.line + 1 for block in parsed.blocks}
        assert len(MarkdownTracker(path).load()) == len(task_lines)
    found = find_suspicious(text)
    assert task_lines.isdisjoint(f.line for f in found), (text, found)
    assert all(f.text == lines[f.line - 1] for f in found)

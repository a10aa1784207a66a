"""Unified diffs made and applied as the JavaScript `diff` library (v8) does: every expected
value here is what its createTwoFilesPatch / applyPatch gave for the same input."""

from __future__ import annotations

import pytest

from ralph.company.patches import PatchError, apply_patch, two_files_patch

HEAD = "=" * 67 + "\n--- a/m.md\t\n+++ b/m.md\t\n"


@pytest.mark.parametrize(("before", "after", "hunks"), [
    ("# M\n\n## Decisions\n\n## Links\n", "# M\n\n## Decisions\n\n- a\n\n## Links\n",
     "@@ -1,5 +1,7 @@\n # M\n \n ## Decisions\n \n+- a\n+\n ## Links\n"),
    # Myers' choice among equal blank lines: the inserted blank line goes after them
    ("# M\n## D\n\n\n\nx\n", "# M\n## D\n\n- a\n\n\n\nx\n",
     "@@ -1,6 +1,8 @@\n # M\n ## D\n \n+- a\n \n \n+\n x\n"),
    # CRLF lines made LF, and a last line without its newline
    ("# M\r\n## D\r\n\r\ntail", "# M\n## D\n\n- a\n\ntail",
     "@@ -1,4 +1,6 @@\n-# M\r\n-## D\r\n-\r\n+# M\n+## D\n+\n+- a\n+\n tail\n"
     "\\ No newline at end of file\n"),
    # two hunks, 4 lines of context each
    ("a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\n", "a\nX\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nY\nl\nm\n",
     "@@ -1,5 +1,6 @@\n a\n+X\n b\n c\n d\n e\n@@ -8,6 +9,7 @@\n h\n i\n j\n k\n+Y\n l\n m\n"),
])
def test_patches_are_written_as_the_library_writes_them(before: str, after: str,
                                                        hunks: str) -> None:
    patch = two_files_patch("a/m.md", "b/m.md", before, after)
    assert patch == HEAD + hunks
    assert apply_patch(before, patch) == after


def test_end_of_file_newline_changes() -> None:
    patch = two_files_patch("a/m", "b/m", "a\nb", "a\nb\nc\n")
    assert patch == ("===================================================================\n"
                     "--- a/m\t\n+++ b/m\t\n@@ -1,2 +1,3 @@\n a\n-b\n"
                     "\\ No newline at end of file\n+b\n+c\n")
    assert apply_patch("a\nb", patch) == "a\nb\nc\n"
    assert apply_patch("a\nb\n", patch) is None  # the newline it adds is already there


def test_apply_finds_moved_text_converts_line_ends_and_refuses_other_text() -> None:
    patch = two_files_patch("a/m.md", "b/m.md", "# M\n## D\n\nx\n", "# M\n## D\n\n- a\n\nx\n")
    assert apply_patch("# M\r\n## D\r\n\r\nx\r\n", patch) == "# M\r\n## D\r\n\r\n- a\r\n\r\nx\r\n"
    assert apply_patch("new\nlines\n# M\n## D\n\nx\n", patch) == \
        "new\nlines\n# M\n## D\n\n- a\n\nx\n"
    assert apply_patch("# M\n## E\n\nx\n", patch) is None
    assert apply_patch("x\n", "") == "x\n"  # no hunk, nothing to do


@pytest.mark.parametrize(("patch", "message"), [
    ("@@ -1 +1 @@\n-x\n+y\njunk\n", 'Unknown line 4 "junk"'),
    ("--- a\n+++ b\n@@ -1,2 +1 @@\n-x\n+y\n", "Hunk at line 3 contained invalid line "),
    ("--- a\n+++ b\n@@ -1 +1 @@\n-x\n--- c\n+++ d\n@@ -1 +1 @@\n-x\n+y\n",
     "Removed line count did not match for hunk at line 3"),
    ("--- a\n+++ b\n@@ -1 +1 @@\n-x\n+y\n--- c\n+++ d\n@@ -1 +1 @@\n-x\n+y\n",
     "applyPatch only works with a single input."),
])
def test_what_is_not_a_patch_of_one_file(patch: str, message: str) -> None:
    with pytest.raises(PatchError) as failed:
        apply_patch("x", patch)
    assert str(failed.value) == message

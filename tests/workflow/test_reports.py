"""Task reports: PART 1, the last PART 2 and its last Status line."""

from __future__ import annotations

from ralph.workflow.reports import Verdict, parse_report

EXECUTOR_PART = """\
# Task Report: task-1
---
## PART 1: IMPLEMENTATION REPORT
*(Created by Ralph-Executor)*
### Objective Recap
Parse the input.
### Success Criteria Status
- ✅ Criterion 1: Met - tests pass
### Summary of Changes
**Status**: Qualified
---
## PART 2: REVIEW REPORT
*(To be appended by Ralph-Reviewer)*
"""

REVIEW = """
---
## PART 2: REVIEW REPORT
*(Appended by Ralph-Reviewer)*
### Review Summary
Fine.
### Recommendation
**Status**: Qualified | Failed
**Reasoning**: template first
```
**Status**: Failed
```
**Status**: {status}
**Reasoning**: all criteria met
"""


def test_executor_report_with_its_placeholder():
    report = parse_report(EXECUTOR_PART)
    assert report.has_part1
    assert report.part2_count == 1
    # The placeholder has no Status: no verdict yet (the Status inside PART 1 does not count).
    assert report.status is None
    assert report.head.endswith("**Status**: Qualified")  # the `---` before PART 2 stripped
    assert report.head.startswith("# Task Report: task-1\n---\n## PART 1")


def test_the_last_part2_and_its_last_status_line():
    report = parse_report(EXECUTOR_PART + REVIEW.format(status="✅ Qualified"))
    assert report.part2_count == 2
    assert report.last_part2 is not None
    assert report.last_part2.startswith("## PART 2: REVIEW REPORT\n*(Appended")
    assert report.status_text == "✅ Qualified"
    assert report.status is Verdict.QUALIFIED
    assert report.head == parse_report(EXECUTOR_PART).head


def test_status_variants():
    for line, verdict in (("**Status**: Failed", Verdict.FAILED),
                          ("- **Status:** failed (criterion 2 not met)", Verdict.FAILED),
                          ("**Status**: QUALIFIED", Verdict.QUALIFIED),
                          ("**Status**: Qualified | Failed", None),
                          ("**Status**: Pending", None),
                          ("**Status**: Not Qualified", Verdict.FAILED),
                          ("**Status**: unqualified", Verdict.FAILED),
                          ("**Status**: ❌ Failed (task not qualified yet)", Verdict.FAILED),
                          ("**Status**: ✅ Qualified (nothing failed)", Verdict.QUALIFIED),
                          ("**Status**: Failed / Qualified", None)):
        report = parse_report(f"## PART 1: IMPLEMENTATION\nx\n## part 2: review\n{line}\n")
        assert report.status is verdict, line


def test_only_level_2_part_headings_naming_the_part_count():
    text = ("## PART 1: IMPLEMENTATION REPORT\n#### Part 2: the CLI\n**Status**: Failed\n"
            "# PART 2: REVIEW\n### PART 2: REVIEW REPORT\n## Part 2 notes\n")
    report = parse_report(text)
    assert (report.has_part1, report.part2_count, report.status) == (True, 0, None)
    assert parse_report("## PART 1 of the work\nx\n").has_part1 is False
    report = parse_report(text + "## Part 2: Review Report\n**Status**: Qualified\n")
    assert (report.part2_count, report.status) == (1, Verdict.QUALIFIED)
    assert report.head == text.rstrip()


def test_line_endings_do_not_change_the_head():
    crlf = EXECUTOR_PART.replace("\n", "\r\n") + REVIEW.format(status="Failed")
    assert parse_report(crlf).head == parse_report(EXECUTOR_PART).head
    assert parse_report(crlf).status is Verdict.FAILED


def test_a_report_without_parts():
    report = parse_report("# Task Report: task-1\nJust notes.\n\n")
    assert (report.has_part1, report.part2_count, report.status) == (False, 0, None)
    assert report.head == "# Task Report: task-1\nJust notes."
    assert report.last_part2 is None

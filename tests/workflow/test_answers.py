"""ralph.workflow.answers: the output read from an agent's final answer, and its problems
worded to be quoted back to the agent."""

from __future__ import annotations

import json

import pytest

from ralph.errors import RalphError
from ralph.workflow.answers import (
    InvalidOutput,
    OutputProblem,
    extract_output,
    parse_output,
    validate_output,
)
from ralph.workflow.contracts import ExecutorOutput, PlannerOutput, ReviewerOutput
from ralph.workflow.errors import WorkflowError

EXECUTOR = {"status": "completed", "report_path": "tasks.task-1-report.md",
            "success_criteria_met": True}
FENCE = "```"


def fenced(value: object, lang: str = "json") -> str:
    return f"{FENCE}{lang}\n{json.dumps(value, indent=2)}\n{FENCE}"


# -- extraction


@pytest.mark.parametrize("text", [
    json.dumps(EXECUTOR),
    fenced(EXECUTOR),
    fenced(EXECUTOR, lang=""),
    f"I did the task.\n\n{fenced(EXECUTOR)}\n",
    f"Summary: all good.\n{json.dumps(EXECUTOR)}\nThat is all; see the report.",
    f"  {json.dumps(EXECUTOR, indent=4)}  \n\n",
])
def test_fenced_or_bare_with_text_around(text: str) -> None:
    assert extract_output(text) == EXECUTOR


def test_the_last_of_several_objects() -> None:
    first = {"status": "failed", "report_path": "old.md", "success_criteria_met": False}
    text = (f"An example: {json.dumps(first)}\n\nMy answer:\n{fenced(EXECUTOR)}\n"
            "Bye {name}.")
    assert extract_output(text) == EXECUTOR
    assert extract_output(f"{fenced(EXECUTOR)}\n{json.dumps({'b': 2})}") == {"b": 2}


def test_nested_objects_are_part_of_theirs_not_candidates() -> None:
    value = {"status": "completed", "task_count": {"planning": 1, "implementation": 2,
                                                   "total": 3}}
    assert extract_output(f"answer: {json.dumps(value)} done") == value


def test_braces_in_strings_do_not_confuse_it() -> None:
    value = {"status": "completed", "feedback": "use {name} and } or { freely",
             "issues": ["a \"quoted {\" brace", "}{"]}
    text = f"Prose with a stray {{ and a }} too.\n{fenced(value)}\nTrailing {{x}}."
    assert extract_output(text) == value


def test_prose_braces_and_code_before_the_answer() -> None:
    text = ("The function now returns `{a: 1}` and the template uses ${HOME} and {{x}}.\n"
            "def f():\n    return {'single': 'quotes'}\n\n" + json.dumps(EXECUTOR))
    assert extract_output(text) == EXECUTOR


@pytest.mark.parametrize("text", ["", "Done, all tasks complete.", "[1, 2, 3]",
                                  "Use {name} here.", "```json\n```"])
def test_no_json_object_is_its_own_problem(text: str) -> None:
    with pytest.raises(InvalidOutput) as caught:
        extract_output(text)
    assert caught.value.lines() == ["no JSON object found in the answer: end it with one JSON "
                                    "object that matches the output schema"]


def test_a_broken_object_at_the_end_is_reported_with_its_position() -> None:
    text = ('All done.\n```json\n{\n  "status": "completed",\n  "report_path": "r.md",\n}\n'
            '```')
    with pytest.raises(InvalidOutput) as caught:
        extract_output(text)
    assert caught.value.lines() == [
        "the JSON object at the end of the answer is not valid JSON: Expecting property "
        "name enclosed in double quotes (line 4, column 1 of the object)"]


def test_a_broken_object_is_not_replaced_by_an_object_nested_in_it() -> None:
    # The criteria parse on their own; the answer around them does not (a trailing comma).
    text = ('{"status": "completed", "verdict": "Failed", "criteria_results": ['
            '{"criterion": "a", "met": true}, {"criterion": "b", "met": false}],}')
    with pytest.raises(InvalidOutput, match="not valid JSON"):
        extract_output(text)


def test_a_broken_object_after_a_valid_one_is_reported() -> None:
    with pytest.raises(InvalidOutput, match="not valid JSON"):
        extract_output(f'{json.dumps(EXECUTOR)}\nCorrected:\n{{"status": "completed",')


def test_a_broken_snippet_before_the_answer_is_ignored() -> None:
    # An example with an error of its own, then the answer: the answer is read.
    text = f'Not {{"valid": }} JSON.\n\n{fenced(EXECUTOR)}'
    assert extract_output(text) == EXECUTOR
    # An unclosed `{"` in prose does not swallow a fenced answer after it.
    assert extract_output(f'I wrote {{"key and then\n{fenced(EXECUTOR)}') == EXECUTOR


def test_an_unclosed_snippet_in_prose_before_a_bare_answer_is_ignored() -> None:
    # Its decoding fails before the answer starts: it does not enclose the answer.
    bare = json.dumps(EXECUTOR)
    template = f'I filled the template `{{"criterion": ...` as asked.\n{bare}'
    assert extract_output(template) == EXECUTOR
    log = f'{{"level":"info","msg":"starting\n{bare}\n'
    assert extract_output(log) == EXECUTOR


def test_a_broken_object_still_open_at_the_valid_one_is_reported() -> None:
    text = '{"status": "completed", "context": {"a": 1} oops}'
    with pytest.raises(InvalidOutput, match="not valid JSON: Expecting ',' delimiter"):
        extract_output(text)


def test_an_object_after_the_answer_is_the_one_read() -> None:
    # "Last" is literal: `{}` in a closing remark is read (and then fails validation).
    assert extract_output(f"{fenced(EXECUTOR)}\nI used `{{}}` as the default.") == {}


@pytest.mark.parametrize("text", [
    '{"a":' * 5000,
    '{"a":' * 3000 + "1" + "}" * 3000,  # valid, but deeper than the decoder can go
    '{"a":[' * 5000,
])
def test_deep_nesting_is_a_problem_not_a_crash(text: str) -> None:
    with pytest.raises(InvalidOutput) as caught:
        extract_output(text)
    assert caught.value.lines() == [
        "a JSON object in the answer is nested too deeply to read: end the answer with one "
        "JSON object that matches the output schema"]


def test_braces_that_start_no_object_are_not_decoded() -> None:
    assert extract_output(f'{"{" * 5000}\n{json.dumps(EXECUTOR)}') == EXECUTOR


def test_a_large_answer_is_read_whole() -> None:
    # About 1 MB of prose with snippets, broken ones and fences, then the answer; and an
    # answer whose strings and lists are longer than the decoder's first window.
    para = ('Ran it: {"level":"info","msg":"ok"} and `{name}`, I filled `{"criterion": ...`.\n'
            '```python\nd = {"a": 1}\n```\n')
    text = para * (1_000_000 // len(para)) + fenced(EXECUTOR)
    assert extract_output(text) == EXECUTOR
    long = dict(EXECUTOR, notes="x" * 100_000, items=[{"b": True}] * 5000)
    assert extract_output(f"Done.\n{json.dumps(long)}\n") == long
    with pytest.raises(InvalidOutput, match=r"not valid JSON: Unterminated string"):
        extract_output(f"Done.\n{json.dumps(long)[:60_000]}")
    cut = json.dumps(long)[:-1]
    with pytest.raises(InvalidOutput, match=r"Expecting ',' delimiter \(line 1, column "
                                            f"{len(cut) + 1} of the object\\)"):
        extract_output(f"Done.\n{cut}")


# -- validation


def test_parse_output_returns_the_roles_model() -> None:
    output = parse_output("executor", f"Done.\n{fenced(EXECUTOR)}")
    assert isinstance(output, ExecutorOutput)
    assert (output.status, output.report_path, output.success_criteria_met) == (
        "completed", "tasks.task-1-report.md", True)
    assert isinstance(validate_output("planner", {"status": "completed"}), PlannerOutput)
    review = parse_output("reviewer", '{"status": "completed", "verdict": "Failed"}')
    assert isinstance(review, ReviewerOutput)
    assert review.verdict == "Failed"


def test_every_problem_one_line_with_the_field_and_the_value() -> None:
    answer = json.dumps({"status": "done", "success_criteria_met": "yes",
                         "discovered_tasks": [{"id": "task-9", "description": ""},
                                              {"description": "x"}],
                         "blockers": "none"})
    with pytest.raises(InvalidOutput) as caught:
        parse_output("executor", answer)
    assert caught.value.lines() == [
        "status: should be 'completed', 'failed' or 'blocked' (got \"done\")",
        "report_path: required, but missing",
        "success_criteria_met: should be a valid boolean (got \"yes\")",
        "discovered_tasks[0].description: must not be empty (got \"\")",
        "discovered_tasks[1].id: required, but missing",
        "blockers: should be a valid list (got \"none\")",
    ]
    assert caught.value.role == "executor"
    assert all("\n" not in line for line in caught.value.lines())


def test_objects_counts_and_rules_between_fields() -> None:
    with pytest.raises(InvalidOutput) as caught:
        parse_output("planner", '{"status": "completed", "task_count": 3}')
    assert caught.value.lines() == ["task_count: should be an object (got 3)"]
    with pytest.raises(InvalidOutput) as caught:
        parse_output("questioner", '{"status": "completed", "questions_generated": -2, '
                                   '"priority_breakdown": {"high": 1.5, "medium": 0}}')
    assert caught.value.lines() == [
        "questions_generated: should be greater than or equal to 0 (got -2)",
        "priority_breakdown.high: should be a valid integer (got 1.5)",
        "priority_breakdown.low: required, but missing",
    ]
    with pytest.raises(InvalidOutput) as caught:
        parse_output("reviewer", '{"status": "completed", "verdict": "Qualified", '
                                 '"criteria_results": [{"criterion": "tests pass", '
                                 '"met": false}]}')
    assert caught.value.lines() == ["verdict is Qualified but criterion 'tests pass' is not "
                                    "met: one unmet criterion means Failed"]
    with pytest.raises(InvalidOutput) as caught:
        parse_output("planner", '{"status": "needs_clarification"}')
    assert caught.value.lines() == ["status is needs_clarification but blockers is empty: name "
                                    "what the user must clarify"]


def test_a_long_rejected_value_is_cut_short() -> None:
    with pytest.raises(InvalidOutput) as caught:
        parse_output("reviewer", json.dumps({"status": "x" * 500}))
    line = caught.value.lines()[0]
    assert line.startswith("status: should be 'completed' or 'error' (got \"xxx")
    assert line.endswith("…)")
    assert len(line) < 120


def test_the_error_is_one_line_naming_the_role() -> None:
    with pytest.raises(InvalidOutput) as caught:
        parse_output("questioner", "I found nothing.")
    error = caught.value
    assert isinstance(error, WorkflowError)
    assert isinstance(error, RalphError)
    assert str(error) == ("the questioner's answer does not match its contract: no JSON object "
                          "found in the answer: end it with one JSON object that matches the "
                          "output schema")
    with pytest.raises(InvalidOutput) as caught:
        parse_output("executor", "{}")
    assert str(caught.value) == ("the executor's answer does not match its contract: "
                                 "status: required, but missing; report_path: required, but "
                                 "missing; success_criteria_met: required, but missing")


def test_an_unknown_role_is_the_callers_error() -> None:
    with pytest.raises(WorkflowError, match="unknown role 'judge'") as caught:
        parse_output("judge", "{}")
    assert not isinstance(caught.value, InvalidOutput)


def test_problem_lines() -> None:
    assert str(OutputProblem("blockers[0]", "must not be empty")) == (
        "blockers[0]: must not be empty")
    assert str(OutputProblem("", "no JSON object")) == "no JSON object"
    error = InvalidOutput([OutputProblem("a", "b"), OutputProblem("", "c")])
    assert str(error) == "the answer does not match its contract: a: b; c"
    assert error.role is None

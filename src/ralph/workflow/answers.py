"""A role's output read from its agent's final answer, and validated against the role's contract.

The output is the last JSON object in the answer: in a fenced json block or bare, with prose
before it and after it allowed. What does not validate becomes a list of problems, one line
each (`report_path: required, but missing`), worded to be quoted back to the agent in the one
retry the orchestrator allows (`ralph.workflow.prompts.retry_prompt`).
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, overload

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from ralph.workflow.contracts import (
    AnyOutput,
    ExecutorOutput,
    PlannerOutput,
    QuestionerOutput,
    ReviewerOutput,
    contract,
)
from ralph.workflow.errors import WorkflowError

# An opening brace that starts what is meant to be a JSON object (`{"`, `{ }`), as opposed to
# a brace in prose or code (`{name}`, `${HOME}`): only such a one, when it does not parse, is
# worth reporting.
_LOOKS_LIKE_OBJECT = re.compile(r'\{\s*["}]')
_FENCE_LINE = re.compile(r"^[ \t]*(?:```|~~~)", re.MULTILINE)
_DECODER = json.JSONDecoder()
_WINDOW = 512  # characters first given to the decoder (see _decode)
_CUT_MARGIN = 8  # the longest token a window's end may cut (`false`, `\\uXXXX`) and then some
_SHOWN_INPUT = 60  # characters of a rejected value quoted in its problem


@dataclass(frozen=True)
class OutputProblem:
    """One way an answer breaks its contract: the field (a path such as
    `discovered_tasks[0].id`, empty for the answer as a whole) and what is wrong with it."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


class InvalidOutput(WorkflowError):
    """An answer with no valid output: no JSON object, a broken one, or one that does not
    match the role's output model. `problems` lists each problem found."""

    def __init__(self, problems: Sequence[OutputProblem], role: str | None = None) -> None:
        self.problems: tuple[OutputProblem, ...] = tuple(problems)
        self.role = role
        whose = f"the {role}'s answer" if role else "the answer"
        super().__init__(f"{whose} does not match its contract: "
                         + "; ".join(str(problem) for problem in self.problems))

    def lines(self) -> list[str]:
        """The problems, one line each."""
        return [str(problem) for problem in self.problems]


@dataclass(frozen=True)
class _Broken:
    """A candidate that does not decode: where it starts, the decoder's message, and where
    (in the whole text) decoding failed."""

    start: int
    msg: str
    pos: int


@dataclass(frozen=True)
class _Found:
    start: int
    end: int
    value: dict[str, Any]


def extract_output(text: str) -> dict[str, Any]:
    """The last top-level JSON object in `text` (fenced or bare; text around it is ignored).

    "Last" is literal: an object written after the answer (even `{}` in a closing remark)
    is the one read. Raises InvalidOutput when there is none, when one is nested too deeply
    to decode, or when the last thing that looks like one does not parse: a broken object
    after the last valid one, or one that encloses it (its decoding failed at or after the
    valid object's start, so it was still open there).
    """
    found: list[_Found] = []
    broken: list[_Broken] = []
    # A line starting a code fence ends any JSON object (a string cannot span lines, and a
    # fence outside one is no JSON), so no decoding needs to look past the next fence.
    fences = [match.start() for match in _FENCE_LINE.finditer(text)]
    start = text.find("{")
    while start != -1:
        if not _LOOKS_LIKE_OBJECT.match(text, start):
            start = text.find("{", start + 1)  # `{name}`, `${HOME}`: cannot start an object
            continue
        index = bisect.bisect_right(fences, start)
        limit = fences[index] if index < len(fences) else len(text)
        try:
            decoded = _decode(text, start, limit)
        except RecursionError:
            # The decoder recurses once per level: an object this deep cannot be read at
            # all (and is no output of any contract), so it is the answer's problem.
            raise InvalidOutput([OutputProblem(
                "", "a JSON object in the answer is nested too deeply to read: end the "
                    "answer with one JSON object that matches the output schema")]) from None
        if isinstance(decoded, _Broken):
            broken.append(decoded)
            start = text.find("{", start + 1)
            continue
        value, end = decoded
        # Decoding from "{" yields an object; the next search starts after it, so neither
        # the objects nested in it nor the braces in its strings are taken for others.
        found.append(_Found(start, end, value))
        start = text.find("{", end)
    if not found and not broken:
        raise InvalidOutput([OutputProblem(
            "", "no JSON object found in the answer: end it with one JSON object that "
                "matches the output schema")])
    last = found[-1] if found else None
    for failed in reversed(broken):
        # A broken candidate before the last valid object matters only if the decoder was
        # still inside it at that object's start (then the valid one is a piece of it);
        # one that failed earlier (prose with `{"`, a truncated log line) is no answer.
        if last is None or failed.start > last.start or failed.pos >= last.start:
            raise InvalidOutput([OutputProblem(
                "", f"the JSON object at the end of the answer is not valid JSON: "
                    f"{_decode_error(text, failed)}")])
    assert last is not None  # a broken object was reported, or one was found
    return last.value


def _decode(text: str, start: int, limit: int) -> tuple[dict[str, Any], int] | _Broken:
    """The object decoded from `text[start]` (a `{`) and where it ends, or how it fails.

    The decoder is given a window of the text, doubled while the failure may be the window's
    end (an unterminated string, or a failure in its last characters, where a literal, a
    number or an escape may have been cut): a decoder error counts the lines before it in its
    whole input, which over the whole answer and many broken candidates is quadratic."""
    size = _WINDOW
    while True:
        stop = min(limit, start + size)
        window = text[start:stop]
        try:
            value, end = _DECODER.raw_decode(window)
        except json.JSONDecodeError as exc:
            cut = stop < limit and (exc.msg.startswith("Unterminated string")
                                    or exc.pos >= len(window) - _CUT_MARGIN)
            if cut:
                size *= 2
                continue
            return _Broken(start, exc.msg, start + exc.pos)
        return value, start + end


def _decode_error(text: str, failed: _Broken) -> str:
    """The decoder's message with its position counted from the object's first character."""
    start, position = failed.start, failed.pos
    line = text.count("\n", start, position) + 1
    line_start = text.rfind("\n", start, position) + 1 or start
    column = position - max(line_start, start) + 1
    return f"{failed.msg} (line {line}, column {column} of the object)"


@overload
def validate_output(role: Literal["planner"], data: Mapping[str, Any]) -> PlannerOutput: ...
@overload
def validate_output(role: Literal["executor"], data: Mapping[str, Any]) -> ExecutorOutput: ...
@overload
def validate_output(role: Literal["reviewer"], data: Mapping[str, Any]) -> ReviewerOutput: ...
@overload
def validate_output(role: Literal["questioner"],
                    data: Mapping[str, Any]) -> QuestionerOutput: ...
@overload
def validate_output(role: str, data: Mapping[str, Any]) -> AnyOutput: ...


def validate_output(role: str, data: Mapping[str, Any]) -> AnyOutput:
    """`data` (a decoded JSON object) as `role`'s output model.

    Raises InvalidOutput listing every problem; WorkflowError for an unknown role."""
    model = contract(role).output_model
    try:
        output = model.model_validate(dict(data))
    except ValidationError as exc:
        raise InvalidOutput([_problem(error) for error in exc.errors()], role) from None
    assert isinstance(output, AnyOutput)
    return output


@overload
def parse_output(role: Literal["planner"], text: str) -> PlannerOutput: ...
@overload
def parse_output(role: Literal["executor"], text: str) -> ExecutorOutput: ...
@overload
def parse_output(role: Literal["reviewer"], text: str) -> ReviewerOutput: ...
@overload
def parse_output(role: Literal["questioner"], text: str) -> QuestionerOutput: ...
@overload
def parse_output(role: str, text: str) -> AnyOutput: ...


def parse_output(role: str, text: str) -> AnyOutput:
    """`role`'s output read from an agent's final answer `text`: its last JSON object,
    validated. Raises InvalidOutput (with the role) listing the problems."""
    contract(role)  # an unknown role is the caller's error, not the answer's
    try:
        data = extract_output(text)
    except InvalidOutput as exc:
        raise InvalidOutput(exc.problems, role) from None
    return validate_output(role, data)


def _problem(error: ErrorDetails) -> OutputProblem:
    """A pydantic error as one problem line, naming the value it refused."""
    where = _path(error["loc"])
    kind = error["type"]
    if kind == "missing":
        return OutputProblem(where, "required, but missing")
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        message = "should be an object"
    else:
        message = error["msg"].removeprefix("Input ")  # "should be a valid boolean"
    value = error.get("input")
    if where and (value is None or isinstance(value, str | int | float | bool)):
        shown = json.dumps(value, ensure_ascii=False)
        if len(shown) > _SHOWN_INPUT:
            shown = shown[:_SHOWN_INPUT - 1] + "…"
        message += f" (got {shown})"
    return OutputProblem(where, message)


def _path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path

"""A role's output read from its agent's final answer, and validated against the role's contract.

The output is the last JSON object in the answer: in a fenced json block or bare, with prose
before it and after it allowed. What does not validate becomes a list of problems, one line
each (`report_path: required, but missing`), worded to be quoted back to the agent in the one
retry the orchestrator allows (`ralph.workflow.prompts.retry_prompt`).
"""

from __future__ import annotations

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
_DECODER = json.JSONDecoder()
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
class _Found:
    start: int
    end: int
    value: dict[str, Any]


def extract_output(text: str) -> dict[str, Any]:
    """The last top-level JSON object in `text` (fenced or bare; text around it is ignored).

    Raises InvalidOutput when there is none, or when the last thing that looks like one (an
    object of its own, or one that encloses the last valid object) does not parse.
    """
    found: list[_Found] = []
    broken: list[tuple[int, json.JSONDecodeError]] = []
    start = text.find("{")
    while start != -1:
        try:
            value, end = _DECODER.raw_decode(text, start)
        except json.JSONDecodeError as exc:
            if _LOOKS_LIKE_OBJECT.match(text, start):
                broken.append((start, exc))
            start = text.find("{", start + 1)
            continue
        # Decoding from "{" yields an object; the next search starts after it, so neither
        # the objects nested in it nor the braces in its strings are taken for others.
        found.append(_Found(start, end, value))
        start = text.find("{", end)
    if not found and not broken:
        raise InvalidOutput([OutputProblem(
            "", "no JSON object found in the answer: end it with one JSON object that "
                "matches the output schema")])
    last = found[-1] if found else None
    for position, error in reversed(broken):
        if last is None or position > last.start or _encloses(text, position, last.start):
            raise InvalidOutput([OutputProblem(
                "", f"the JSON object at the end of the answer is not valid JSON: "
                    f"{_decode_error(text, position, error)}")])
    assert last is not None  # a broken object was reported, or one was found
    return last.value


def _encloses(text: str, start: int, inner: int) -> bool:
    """Whether the object opened at `start` (which does not parse) still is open at `inner`:
    its braces, outside its strings, are not balanced before that position, and no code fence
    lies between them (a fence ends any object, and prose with a stray `{"` in it is no
    object to report)."""
    if "```" in text[start:inner]:
        return False
    depth = 0
    in_string = escaped = False
    for index in range(start, inner):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return False
    return True


def _decode_error(text: str, start: int, error: json.JSONDecodeError) -> str:
    """The decoder's message with its position counted from the object's first character."""
    line = text.count("\n", start, error.pos) + 1
    line_start = text.rfind("\n", start, error.pos) + 1 or start
    column = error.pos - max(line_start, start) + 1
    return f"{error.msg} (line {line}, column {column} of the object)"


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

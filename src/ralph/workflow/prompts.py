"""The prompt a role is given: its instructions, its input as `KEY: value` lines, its output
schema; and the retry prompt that quotes what was wrong with the previous answer.

A prompt reads:

    <the role's instructions: PROMPT_<role>.md of the project>

    ## Input

    SESSION_PATH: .ralph-sessions/260131-144400/
    TASK_ID: task-1
    ATTEMPT_NUMBER: 1

    <additional context, when the orchestrator gives some (e.g. the gates' results)>

    ## Output

    <how to answer>, then the output's JSON Schema in a json block.

An input value is written as it is; `CONTEXT` (an object) as compact JSON on its one line; a
value of several lines as `KEY: |` followed by its lines, each indented by two spaces.
`read_input` reads the lines back; `input_block` gives the raw `KEY: value` pairs of the
`## Input` section, which is what the fake role agents (`ralph.testing.fake_roles`) read to play
a role from its prompt (so nothing outside that section, such as additional context, can change
their input).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ralph.config import Config
from ralph.scaffold import template
from ralph.workflow.answers import InvalidOutput, OutputProblem
from ralph.workflow.contracts import AnyInput, Role, RoleInput, contract, schema_text
from ralph.workflow.errors import WorkflowError
from ralph.workflow.input_block import BLOCK, INDENT, INPUT_HEADING, OUTPUT_HEADING, input_block

RETRY_HEADING = "## Your previous answer was rejected"


def instructions_file(role: Role | str) -> str:
    """The file holding `role`'s instructions in the project root: `PROMPT_<role>.md`."""
    return f"PROMPT_{contract(role).role}.md"


def default_instructions(role: Role | str) -> str:
    """The instructions `ralph init` scaffolds for `role`."""
    return template(instructions_file(role))


def load_instructions(root: Path, role: Role | str, config: Config) -> str:
    """`role`'s instructions (the user may have edited them): the file `config` names for it
    (`[workflow.roles.<role>] prompt`, relative to `root`), by default `PROMPT_<role>.md`.

    Raises WorkflowError when the file is missing (with how to get it) or unreadable."""
    found = contract(role).role
    name = config.role_prompt(found)
    configured = name != instructions_file(found)
    try:
        return (root / name).read_text(encoding="utf-8")
    except FileNotFoundError:
        remedy = (f"create it, or change [workflow.roles.{found}] prompt in ralph.toml"
                  if configured else "run `ralph init` to scaffold the role prompts")
        raise WorkflowError(f"{name} is missing in {root}: {remedy}") from None
    except UnicodeDecodeError:
        raise WorkflowError(f"{name} in {root} is not UTF-8 text") from None
    except OSError as exc:
        raise WorkflowError(f"cannot read {name} in {root}: {exc.strerror or exc}") from None


def input_lines(role_input: RoleInput) -> str:
    """The input as `KEY: value` lines, in the contract's order, without a final newline."""
    lines: list[str] = []
    for key, value in role_input.prompt_fields().items():
        text = (json.dumps(value, ensure_ascii=False, separators=(",", ":"))
                if isinstance(value, dict) else str(value))
        # Any character that ends a line for str.splitlines (not only \n and \r: also
        # \x0b \x0c \x1c-\x1e \x85 \u2028 \u2029) makes it a block, so that no reader that
        # breaks lines there takes the rest for another KEY line; the block's lines are split
        # at \n only, which is where input_block splits them, so the value reads back as it was.
        if len(f"{text}.".splitlines()) > 1 or text.strip() == BLOCK:
            lines.append(f"{key}: {BLOCK}")
            lines.extend(INDENT + line for line in text.split("\n"))
        else:
            lines.append(f"{key}: {text}")
    return "\n".join(lines)


def build_prompt(role: Role | str, role_input: RoleInput, instructions: str, *,
                 additional_context: str | None = None) -> str:
    """The prompt for `role`: `instructions` (the text of its PROMPT_<role>.md), the input
    as `KEY: value` lines (then `additional_context` if given), and the output schema with
    the instruction to end the answer with one JSON object that matches it.

    Raises WorkflowError when `role_input` is not `role`'s input model."""
    found = contract(role)
    if type(role_input) is not found.input_model:
        raise WorkflowError(f"a {type(role_input).__name__} is not the {found.role}'s input "
                            f"(a {found.input_model.__name__})")
    parts = [instructions.strip(), INPUT_HEADING, input_lines(role_input)]
    if additional_context and additional_context.strip():
        parts.append(additional_context.strip())
    parts += [OUTPUT_HEADING, _output_instruction(found.agent_name, found.version),
              f"```json\n{schema_text(found.role, 'output')}\n```"]
    return "\n\n".join(parts) + "\n"


def _output_instruction(agent_name: str, version: str) -> str:
    return (f"End your answer with one JSON object that matches this JSON Schema (the "
            f"{agent_name} output, contract {version}), in a ```json block or bare. Only the "
            "last JSON object of your answer is read, so write none after it; write the keys "
            "and values exactly as "
            "the schema names them. Ralph checks every claim in it against the session's "
            "files: a claim the files contradict is a contract violation, and the answer is "
            "not used.")


def retry_prompt(role: Role | str, role_input: RoleInput, instructions: str,
                 problems: InvalidOutput | Sequence[OutputProblem | str], *,
                 additional_context: str | None = None) -> str:
    """`build_prompt`'s prompt followed by the problems of the previous answer, quoted one a
    line, and what to do about them (the one retry an invalid answer gets)."""
    lines = (problems.lines() if isinstance(problems, InvalidOutput)
             else [str(problem) for problem in problems])
    if not lines:
        raise WorkflowError("a retry prompt needs the problems of the previous answer")
    quoted = "\n".join(f"> {line}" for line in lines)
    return (build_prompt(role, role_input, instructions, additional_context=additional_context)
            + f"\n{RETRY_HEADING}\n\n"
            "This prompt was given before, and its answer was rejected:\n\n"
            f"{quoted}\n\n"
            "The session's files are as that run left them. Check them, finish what is "
            "missing, and end your answer with one JSON object that matches the schema "
            "above. This is the last try: another invalid answer is a contract violation.\n")


def read_input(role: Role | str, prompt: str) -> AnyInput:
    """The input of `role` read back from a prompt `build_prompt` made (the `KEY: value`
    lines after its `## Input` heading). Raises WorkflowError naming the problem."""
    found = contract(role)
    values: dict[str, Any] = dict(input_block(prompt))
    if "CONTEXT" in values:
        try:
            values["CONTEXT"] = json.loads(values["CONTEXT"])
        except json.JSONDecodeError as exc:
            raise WorkflowError(f"CONTEXT is not JSON: {exc.msg}") from None
    try:
        parsed = found.input_model.model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "input"
        raise WorkflowError(f"the {found.role}'s input in the prompt is invalid: {where}: "
                            f"{first['msg']}") from None
    assert isinstance(parsed, AnyInput)
    return parsed

"""A prompt's `## Input` section: the headings and block-value rules `build_prompt` writes it
with, and `input_block`, which reads its raw `KEY: value` pairs back.

Apart from ralph.workflow.prompts so that a fake role agent (ralph.testing.fake_roles), started
for every role call in the tests, reads its input without importing pydantic and the
contracts: a fifth of a second saved on each call."""

from __future__ import annotations

import re

from ralph.workflow.errors import WorkflowError

INPUT_HEADING = "## Input"
OUTPUT_HEADING = "## Output"
BLOCK = "|"  # `KEY: |`: the value is the two-space-indented lines after it
INDENT = "  "
_KEY_LINE = re.compile(r"(?P<key>[A-Z][A-Z0-9_]*):(?: (?P<value>.*))?")


def input_block(prompt: str) -> dict[str, str]:
    """The `KEY: value` pairs of a prompt's `## Input` section, as written (a block value's
    lines joined), without validating them. Only that section counts: a `KEY:` line in the
    instructions or in the additional context after the section is not input.

    The section is the last `## Input` line before the prompt's last `## Output` line (the
    instructions may quote an example). Lines are split at "\n" only: a value's other
    line-break characters stay in it. Raises WorkflowError when there is no such section."""
    lines = prompt.split("\n")
    end = len(lines)
    if OUTPUT_HEADING in lines:
        end = len(lines) - 1 - lines[::-1].index(OUTPUT_HEADING)
    try:
        start = end - lines[:end][::-1].index(INPUT_HEADING)
    except ValueError:
        raise WorkflowError(f"the prompt has no {INPUT_HEADING!r} section") from None
    values: dict[str, str] = {}
    index = start
    while index < end and not lines[index].strip():
        index += 1
    while index < end:
        match = _KEY_LINE.fullmatch(lines[index])
        if match is None:
            break  # a blank line or the additional context: the input lines are over
        value = match["value"] or ""
        index += 1
        if value == BLOCK:
            block: list[str] = []
            while index < end and lines[index].startswith(INDENT):
                block.append(lines[index][len(INDENT):])
                index += 1
            value = "\n".join(block)
        values[match["key"]] = value
    return values

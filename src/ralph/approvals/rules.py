"""Approval rules: which tool calls are allowed or denied without asking a person.

A rule is a tool name, optionally with a glob of the call's subject in parentheses:
`Read` (every call of Read), `Bash(git status*)` (Bash whose command matches `git status*`),
`mcp__*` (every tool whose name starts so). Tool names match without regard to case, so one
rule covers Claude Code's `Bash` and opencode's `bash`; the subject's glob (fnmatch: `*`,
`?`, `[abc]`) matches case for case. A call's subject is its command, else its path, URL or
search pattern (the first of SUBJECT_KEYS its input has as a string), else its input as
compact JSON. Deny rules are looked at first: a call that matches both is denied.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Literal

import orjson

Decision = Literal["allow", "deny"]
ApprovalMode = Literal["auto", "ask", "deny"]
APPROVAL_MODES: tuple[ApprovalMode, ...] = ("auto", "ask", "deny")

# The input field that says what a call does, by tool family: shell commands, files, URLs,
# searches (Claude Code's and opencode's spellings).
SUBJECT_KEYS = ("command", "cmd", "file_path", "filePath", "notebook_path", "path", "url",
                "pattern", "query")
# Tools that only read: allowed without asking unless ralph.toml says otherwise (Claude
# Code's names; opencode's are the same words in lower case, and names match in any case).
READ_ONLY_TOOLS = ("Read", "Glob", "Grep", "LS", "List", "NotebookRead", "TodoRead",
                   "TodoWrite")

_RULE = re.compile(r"^(?P<tool>[^()\s]+)(?:\((?P<subject>.*)\))?$", re.DOTALL)


class RuleError(ValueError):
    """A rule that cannot be read; the message says how it should look."""


@dataclass(frozen=True)
class Rule:
    text: str
    tool: str  # lower case: names match in any case
    subject: str | None  # a glob of the call's subject; None: any call of the tool

    @classmethod
    def parse(cls, text: str) -> Rule:
        match = _RULE.match(text.strip())
        if match is None:
            raise RuleError(f"{text!r} is not a rule: write a tool name, optionally with a "
                            "glob of its command or path in parentheses (`Read`, "
                            "`Bash(git status*)`)")
        subject = match.group("subject")
        if subject is not None and not subject:
            raise RuleError(f"{text!r}: the parentheses are empty (write `{match['tool']}` "
                            f"for every call, or `{match['tool']}(*)`)")
        return cls(text.strip(), match.group("tool").lower(), subject)

    def matches(self, tool_name: str, subject: str) -> bool:
        if not fnmatchcase(tool_name.lower(), self.tool):
            return False
        return self.subject is None or fnmatchcase(subject, self.subject)


def subject_of(tool_input: Mapping[str, Any] | Any) -> str:
    """What a call does, as its rules' globs see it (see the module's docstring)."""
    if isinstance(tool_input, Mapping):
        for key in SUBJECT_KEYS:
            value = tool_input.get(key)
            if isinstance(value, str):
                return value
            if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                return " ".join(value)  # a command as an argv list
    if isinstance(tool_input, str):
        return tool_input
    return orjson.dumps(tool_input, default=str, option=orjson.OPT_SORT_KEYS).decode()


@dataclass(frozen=True)
class RuleDecision:
    decision: Decision
    rule: str  # the rule's text as written


@dataclass(frozen=True)
class ApprovalRules:
    allow: tuple[Rule, ...] = ()
    deny: tuple[Rule, ...] = ()

    @classmethod
    def parse(cls, allow: Iterable[str], deny: Iterable[str]) -> ApprovalRules:
        return cls(tuple(Rule.parse(text) for text in allow),
                   tuple(Rule.parse(text) for text in deny))

    def decide(self, tool_name: str, tool_input: Any) -> RuleDecision | None:
        """The decision of the first matching rule, deny rules first; None: no rule says."""
        subject = subject_of(tool_input)
        for rules, decision in ((self.deny, "deny"), (self.allow, "allow")):
            for rule in rules:
                if rule.matches(tool_name, subject):
                    return RuleDecision(decision, rule.text)  # type: ignore[arg-type]
        return None

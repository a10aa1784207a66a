"""Approval rules: which tool calls are allowed or denied without asking a person.

A rule is a tool name, optionally with a glob of the call's subject in parentheses:
`Read` (every call of Read), `Bash(git status*)` (Bash whose command matches `git status*`),
`mcp__*` (every tool whose name starts so). Tool names match without regard to case, so one
rule covers Claude Code's `Bash` and opencode's `bash`; the subject's glob (fnmatch: `*`,
`?`, `[abc]`; `*` crosses `/`) matches case for case. A call's subject is its command, else
its path (relative to the session's directory when inside it, normalised), URL or search
pattern, else its input as compact JSON. Deny rules are looked at first: a call that
matches both is denied.

A shell command is matched command by command: it is split at `;`, `&&`, `||`, `|`, `&`
and newlines (outside quotes), each piece with its words single-spaced. An allow rule with
a glob allows a command only if every piece is allowed by some allow rule, and never one
with a command substitution (`$(...)`, backquotes, `<(...)`), a `${...}` or `$[...]`
expansion (which can run one) or a piece with a redirection (`>`, `>|`, `<`, ...) the glob
does not spell: `Bash(git status*)` does not allow `git status; rm -rf ~`. A path outside
the session's directory is allowed only by an absolute glob or a bare tool name. A deny
rule denies a command if it matches the whole or any piece. Whatever the rules, a tool that
does more than read is denied the session's PROTECTED_PATHS (Ralph's record, the CLIs'
settings, git's hooks and config). Deny rules stay a blocklist
(`rm -fr` is not `rm -rf*`): what must never run is better kept out with `deny` mode and
allow rules.
"""

from __future__ import annotations

import os.path
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Literal

import orjson

Decision = Literal["allow", "deny"]
ApprovalMode = Literal["auto", "ask", "deny"]
APPROVAL_MODES: tuple[ApprovalMode, ...] = ("auto", "ask", "deny")

# The input fields that say what a call does, by tool family (Claude Code's, opencode's
# and the other CLIs' spellings): shell commands, file paths, then the rest.
SHELL_KEYS = ("command", "cmd")
PATH_KEYS = ("file_path", "filePath", "filepath", "notebook_path", "path")
OTHER_KEYS = ("url", "pattern", "query")
SUBJECT_KEYS = SHELL_KEYS + PATH_KEYS + OTHER_KEYS
# Tools that only read: allowed without asking unless ralph.toml says otherwise (Claude
# Code's names; opencode's are the same words in lower case, and names match in any case).
READ_ONLY_TOOLS = ("Read", "Glob", "Grep", "LS", "List", "NotebookRead", "TodoRead",
                   "TodoWrite")

# Paths no tool but a reading one may touch, whatever the rules say: where Ralph keeps the
# session's record and answers, and where the agent CLIs and git take settings and hooks
# from (the next session's, or the next commit's, code).
PROTECTED_PATHS = (".ralph/*", ".claude/*", ".opencode/*", "opencode.json",
                   "opencode.jsonc", ".gemini/*", ".codex/*", ".git/hooks/*", ".git/config")
_READ_ONLY = frozenset(name.lower() for name in READ_ONLY_TOOLS)

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


@dataclass(frozen=True)
class Subject:
    """What a call does: `text` as globs see it; for a shell command (`shell`), its pieces
    (None: it cannot be split safely) and which of them redirect."""

    text: str
    shell: bool = False
    pieces: tuple[str, ...] | None = None
    redirects: tuple[bool, ...] = ()
    outside: bool = False  # a path outside the session's directory (absolute, ../, ~)


def subject_of(tool_input: Mapping[str, Any] | Any, cwd: str | None = None) -> str:
    """What a call does, as its rules' globs see it (see the module's docstring)."""
    return call_subject(tool_input, cwd).text


def call_subject(tool_input: Mapping[str, Any] | Any, cwd: str | None = None) -> Subject:
    if isinstance(tool_input, Mapping):
        for key in SUBJECT_KEYS:
            value = tool_input.get(key)
            if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                value = shlex.join(value)  # a command as an argv list
            if not isinstance(value, str):
                continue
            if key in SHELL_KEYS:
                return shell_subject(value)
            if key in PATH_KEYS:
                return path_subject(value, cwd)
            return Subject(value)
        patterns = tool_input.get("patterns")  # opencode's requests: the paths asked about
        if isinstance(patterns, list) and patterns and all(isinstance(p, str) for p in patterns):
            return path_subject(patterns[0], cwd)
    if isinstance(tool_input, str):
        return Subject(tool_input)
    return Subject(orjson.dumps(tool_input, default=str, option=orjson.OPT_SORT_KEYS).decode())


# Command substitution, and the expansions that can run one from a variable's value
# (`${x@P}`, arithmetic on `$[...]`): a command holding any of them is never allowed by rule.
_SUBSTITUTION = ("$(", "`", "<(", ">(", "${", "$[")
_OPERATOR_CHARS = frozenset(";&|<>()\n")


def shell_subject(command: str) -> Subject:
    """The command and its pieces (see the module's docstring)."""
    if any(mark in command for mark in _SUBSTITUTION):
        return Subject(command, shell=True)
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|<>()\n")
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        tokens = list(lexer)
    except ValueError:  # an unbalanced quote: no telling what runs
        return Subject(command, shell=True)
    pieces: list[str] = []
    redirects: list[bool] = []
    words: list[str] = []
    redirect = False
    for token in [*tokens, ";"]:
        operator = bool(token) and set(token) <= _OPERATOR_CHARS
        if operator and ("<" in token or ">" in token):  # >, >>, >|, 2>&, <<<, &>, ...
            redirect = True
        elif operator:  # ;, &&, ||, |, &, (, ), a line break
            if words:
                pieces.append(" ".join(words))
                redirects.append(redirect)
            words, redirect = [], False
            continue
        words.append(token)
    return Subject(command, True, tuple(pieces), tuple(redirects))


def path_subject(path: str, cwd: str | None) -> Subject:
    """`path` normalised, relative to `cwd` when it lies inside it; else marked outside."""
    if not path:
        return Subject(path)
    normal = os.path.normpath(path)
    if cwd and normal.startswith("/"):
        relative = os.path.relpath(normal, cwd)
        if relative != ".." and not relative.startswith("../"):
            normal = relative
    outside = normal.startswith(("/", "~")) or normal == ".." or normal.startswith("../")
    return Subject(normal, outside=outside)


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

    def decide(self, tool_name: str, tool_input: Any,
               cwd: str | None = None) -> RuleDecision | None:
        """The decision of the rules, deny rules first; None: no rule says."""
        subject = call_subject(tool_input, cwd)
        if not subject.shell and not subject.outside and tool_name.lower() not in _READ_ONLY:
            protected = next((g for g in PROTECTED_PATHS if fnmatchcase(subject.text, g)), None)
            if protected is not None:
                return RuleDecision("deny", f"protected path {protected}")
        texts = [subject.text, *(subject.pieces or ())]
        denying = next((r for r in self.deny
                        if any(r.matches(tool_name, text) for text in texts)), None)
        if denying is not None:
            return RuleDecision("deny", denying.text)
        if not subject.shell:
            # A relative glob speaks of the session's directory only: a path outside it is
            # allowed by a bare tool name or an absolute glob (`Read(/usr/share/*)`).
            single = next((r for r in self.allow if r.matches(tool_name, subject.text) and (
                not subject.outside or r.subject is None or r.subject.startswith(("/", "~")))),
                None)
            return None if single is None else RuleDecision("allow", single.text)
        whole = next((r for r in self.allow if r.subject is None
                      and r.matches(tool_name, subject.text)), None)
        if whole is not None:  # `Bash`: every command, as written
            return RuleDecision("allow", whole.text)
        if not subject.pieces:  # a substitution or an unbalanced quote
            return None
        used: list[str] = []
        for piece, redirect in zip(subject.pieces, subject.redirects, strict=True):
            allowing = next((r for r in self.allow if r.matches(tool_name, piece) and (
                not redirect or any(c in (r.subject or "") for c in "<>"))), None)
            if allowing is None:
                return None
            if allowing.text not in used:
                used.append(allowing.text)
        return RuleDecision("allow", ", ".join(used))

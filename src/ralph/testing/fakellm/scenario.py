"""Scenarios: which reply the fake model gives to which request.

A scenario is a JSON object::

    {
      "default": {"text": "OK"},                 # for requests no rule matches (side calls)
      "usage": {"input_tokens": 1200, "output_tokens": 40, "cached_tokens": 0},
      "rules": [
        {"name": "create",
         "match": {"user": "hello.txt"},          # substring of the last user message
         "reply": {"write_file": {"path": "hello.txt", "content": "hello"}},
         "then": [{"text": "Done. EXIT_SIGNAL: true"}]},
        {"name": "limited", "match": {"user_regex": "rate.?limit"},
         "reply": {"error": {"status": 429, "retry_after": 1, "times": 2}}}
      ]
    }

Rules are tried in order and the first that matches answers. A rule's conditions (all
optional, all must hold) look at the request's content, never at its position in time:

``user`` / ``user_regex``
    the text of the last user message (a message the user typed, not a tool result; its text
    parts joined by newlines: claude puts `<system-reminder>` blocks before the prompt). The
    regular expressions are searched (`re.search`, MULTILINE: `^` matches at each line);
``tool_result`` / ``tool_result_regex``
    ``true``: the last input is a tool result; ``false``: it is not; a string: it is one and
    its text contains the string;
``has_tools``, ``offers``
    whether the request offers tools at all / offers the tool with this exact name;
``protocol``, ``model``
    ``responses``, ``chat``, ``anthropic`` or ``gemini``; a substring of the model name.

A rule answers with ``reply`` on the first model turn of a conversation and with the
entries of ``then`` on the following turns (the number of model turns since the last user
message picks the entry; the last one repeats). A reply is one of::

    {"text": "..."}
    {"write_file": {"path": "hello.txt", "content": "hello"}, "text": "optional preamble"}
    {"shell": "ls -la"}
    {"tool": {"name": "ToolName", "arguments": {...}}}      # a raw tool call
    {"error": {"status": 429, "message": "...", "retry_after": 1, "times": 2,
               "in_stream": false, "headers": {...}}}
    {"error": {"status": 404}}        # the API's "unknown model" answer, naming the model
    {"hang": 30}                                            # read the request, answer nothing

and may carry ``usage`` (token counts for this reply; a rule's ``usage`` applies to all its
replies, the scenario's to every other reply) and ``delay`` (seconds to wait before
answering). ``write_file`` and ``shell`` become a call of a tool the client offered in this
request (see ``tools.py``); a rule whose reply needs a tool the request does not offer does
not match, so that side calls without tools (titles, summaries) fall through to the default.
An error is sent as that HTTP status with the protocol's error body (and ``Retry-After``;
a 404 without a message is the protocol's "model not found" error for the requested model),
or, with ``in_stream``, as an error event inside a 200 stream (codex: ``response.failed``).
A rule with ``times`` (or whose first reply is an error with ``times``) matches only that
many requests; after that it is skipped.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

PROTOCOLS = ("responses", "chat", "anthropic", "gemini")


class ScenarioError(ValueError):
    """A scenario file that cannot be used; the message names the offending part."""


@dataclass(frozen=True)
class Usage:
    """Token counts a reply reports."""

    input_tokens: int = 1200
    output_tokens: int = 40
    cached_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class ErrorSpec:
    """An HTTP (or in-stream) error the fake model answers with."""

    status: int = 500
    message: str = ""
    retry_after: float | None = None
    in_stream: bool = False
    headers: dict[str, str] = field(default_factory=dict)
    type: str | None = None
    code: str | None = None
    model: str = ""  # the requested model (filled in by the server): a 404's message names it

    @property
    def model_not_found(self) -> bool:
        """A 404 without a scripted message: the API's answer for a model it does not serve."""
        return self.status == 404 and not self.message

    @property
    def text(self) -> str:
        if self.message:
            return self.message
        if self.status == 429:
            wait = self.retry_after if self.retry_after is not None else 1
            return f"Rate limit reached for requests. Please try again in {_seconds(wait)}s."
        if self.status in (401, 403):
            return "Incorrect API key provided."
        return "The server had an error while processing your request."


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


@dataclass(frozen=True)
class Reply:
    """One scripted answer. Exactly one of text-only, tool, error and hang applies."""

    text: str | None = None
    write_file: tuple[str, str] | None = None  # (path, content)
    shell: str | None = None
    tool: tuple[str, dict[str, Any]] | None = None  # (name, arguments)
    error: ErrorSpec | None = None
    hang: float | None = None
    usage: Usage | None = None
    delay: float = 0.0

    @property
    def kind(self) -> str:
        if self.error is not None:
            return "error"
        if self.hang is not None:
            return "hang"
        if self.write_file is not None or self.shell is not None or self.tool is not None:
            return "tool_call"
        return "text"

    @property
    def needs_tool(self) -> bool:
        return self.write_file is not None or self.shell is not None


@dataclass(frozen=True)
class Match:
    """A rule's conditions; None means "any"."""

    user: str | None = None
    user_regex: re.Pattern[str] | None = None
    tool_result: bool | str | None = None
    tool_result_regex: re.Pattern[str] | None = None
    has_tools: bool | None = None
    offers: str | None = None
    protocol: str | None = None
    model: str | None = None


@dataclass(frozen=True)
class Rule:
    name: str
    match: Match
    replies: tuple[Reply, ...]
    times: int | None = None


@dataclass(frozen=True)
class Scenario:
    rules: tuple[Rule, ...] = ()
    default: Reply = field(default_factory=lambda: Reply(text="OK"))
    usage: Usage = field(default_factory=Usage)

    @classmethod
    def load(cls, source: Scenario | dict[str, Any] | str | Path) -> Scenario:
        """A scenario from itself, a parsed dict, or a JSON file's path."""
        if isinstance(source, Scenario):
            return source
        if isinstance(source, dict):
            return cls.from_dict(source)
        path = Path(source)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ScenarioError(f"cannot read scenario {path}: {exc.strerror}") from exc
        except json.JSONDecodeError as exc:
            raise ScenarioError(f"scenario {path} is not JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise ScenarioError(f"scenario {path}: the top level must be an object")
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Scenario:
        _check_keys(data, {"rules", "default", "usage"}, "scenario")
        usage = _usage(data.get("usage", {}), "usage") or Usage()
        rules_data = data.get("rules", [])
        if not isinstance(rules_data, list):
            raise ScenarioError("rules must be a list")
        rules = tuple(_rule(item, index) for index, item in enumerate(rules_data))
        names = [rule.name for rule in rules]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ScenarioError(f"rule names must be unique: {', '.join(duplicates)}")
        default = _reply(data.get("default", {"text": "OK"}), "default")
        if default.kind == "tool_call":
            raise ScenarioError("default: the default reply cannot be a tool call")
        return cls(rules=rules, default=default, usage=usage)


def _check_keys(data: dict[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ScenarioError(
            f"{where}: unknown key(s) {', '.join(unknown)} (allowed: {', '.join(sorted(allowed))})"
        )


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ScenarioError(f"{where} must be an object")
    return value


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ScenarioError(f"{where} must be a string")
    return value


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ScenarioError(f"{where} must be a number >= 0")
    return float(value)


def _count(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ScenarioError(f"{where} must be an integer >= 0")
    return value


def _regex(value: Any, where: str) -> re.Pattern[str]:
    try:
        return re.compile(_string(value, where), re.MULTILINE)
    except re.error as exc:
        raise ScenarioError(f"{where}: bad regular expression: {exc}") from exc


def _usage(value: Any, where: str) -> Usage | None:
    if value is None:
        return None
    data = _object(value, where)
    _check_keys(data, {"input_tokens", "output_tokens", "cached_tokens"}, where)
    base = Usage()
    return Usage(
        input_tokens=_count(data.get("input_tokens", base.input_tokens), f"{where}.input_tokens"),
        output_tokens=_count(
            data.get("output_tokens", base.output_tokens), f"{where}.output_tokens"
        ),
        cached_tokens=_count(
            data.get("cached_tokens", base.cached_tokens), f"{where}.cached_tokens"
        ),
    )


def _error(value: Any, where: str) -> tuple[ErrorSpec, int | None]:
    data = _object(value, where)
    _check_keys(
        data,
        {"status", "message", "retry_after", "times", "in_stream", "headers", "type", "code"},
        where,
    )
    status = _count(data.get("status", 500), f"{where}.status")
    if not 400 <= status <= 599:
        raise ScenarioError(f"{where}.status must be an HTTP error status (400-599)")
    headers = _object(data.get("headers", {}), f"{where}.headers")
    spec = ErrorSpec(
        status=status,
        message=_string(data.get("message", ""), f"{where}.message"),
        retry_after=(
            _number(data["retry_after"], f"{where}.retry_after")
            if data.get("retry_after") is not None
            else None
        ),
        in_stream=bool(data.get("in_stream", False)),
        headers={str(k): _string(v, f"{where}.headers.{k}") for k, v in headers.items()},
        type=_string(data["type"], f"{where}.type") if "type" in data else None,
        code=_string(data["code"], f"{where}.code") if "code" in data else None,
    )
    times = _count(data["times"], f"{where}.times") if "times" in data else None
    return spec, times


def _reply(value: Any, where: str) -> Reply:
    """A reply that is not a rule's first one: `times` would mean nothing there."""
    reply, times = _reply_and_times(value, where)
    if times is not None:
        raise ScenarioError(f"{where}: times is only allowed on a rule's first reply")
    return reply


def _reply_and_times(value: Any, where: str) -> tuple[Reply, int | None]:
    data = _object(value, where)
    _check_keys(
        data,
        {"text", "write_file", "shell", "tool", "error", "hang", "usage", "delay", "times"},
        where,
    )
    actions = [key for key in ("write_file", "shell", "tool", "error", "hang") if key in data]
    if len(actions) > 1:
        raise ScenarioError(f"{where}: only one of {', '.join(actions)} may be given")
    if not actions and "text" not in data:
        raise ScenarioError(f"{where}: a reply needs text, write_file, shell, tool, error or hang")
    times = _count(data["times"], f"{where}.times") if "times" in data else None
    write_file = None
    if "write_file" in data:
        spec = _object(data["write_file"], f"{where}.write_file")
        _check_keys(spec, {"path", "content"}, f"{where}.write_file")
        write_file = (
            _string(spec.get("path"), f"{where}.write_file.path"),
            _string(spec.get("content", ""), f"{where}.write_file.content"),
        )
    tool = None
    if "tool" in data:
        spec = _object(data["tool"], f"{where}.tool")
        _check_keys(spec, {"name", "arguments"}, f"{where}.tool")
        tool = (
            _string(spec.get("name"), f"{where}.tool.name"),
            _object(spec.get("arguments", {}), f"{where}.tool.arguments"),
        )
    error = None
    if "error" in data:
        error, error_times = _error(data["error"], f"{where}.error")
        times = error_times if times is None else times
    reply = Reply(
        text=_string(data["text"], f"{where}.text") if "text" in data else None,
        write_file=write_file,
        shell=_string(data["shell"], f"{where}.shell") if "shell" in data else None,
        tool=tool,
        error=error,
        hang=_number(data["hang"], f"{where}.hang") if "hang" in data else None,
        usage=_usage(data.get("usage"), f"{where}.usage"),
        delay=_number(data.get("delay", 0), f"{where}.delay"),
    )
    return reply, times


def _match(value: Any, where: str) -> Match:
    data = _object(value, where)
    _check_keys(
        data,
        {"user", "user_regex", "tool_result", "tool_result_regex", "has_tools", "offers",
         "protocol", "model"},
        where,
    )
    tool_result = data.get("tool_result")
    if tool_result is not None and not isinstance(tool_result, bool | str):
        raise ScenarioError(f"{where}.tool_result must be true, false or a string")
    protocol = data.get("protocol")
    if protocol is not None and protocol not in PROTOCOLS:
        raise ScenarioError(f"{where}.protocol must be one of {', '.join(PROTOCOLS)}")
    has_tools = data.get("has_tools")
    if has_tools is not None and not isinstance(has_tools, bool):
        raise ScenarioError(f"{where}.has_tools must be true or false")
    return Match(
        user=_string(data["user"], f"{where}.user") if "user" in data else None,
        user_regex=_regex(data["user_regex"], f"{where}.user_regex")
        if "user_regex" in data
        else None,
        tool_result=tool_result,
        tool_result_regex=_regex(data["tool_result_regex"], f"{where}.tool_result_regex")
        if "tool_result_regex" in data
        else None,
        has_tools=has_tools,
        offers=_string(data["offers"], f"{where}.offers") if "offers" in data else None,
        protocol=protocol,
        model=_string(data["model"], f"{where}.model") if "model" in data else None,
    )


def _rule(value: Any, index: int) -> Rule:
    where = f"rules[{index}]"
    data = _object(value, where)
    _check_keys(data, {"name", "match", "reply", "then", "times", "usage"}, where)
    name = _string(data.get("name", f"rule{index}"), f"{where}.name")
    where = f"rule {name!r}"
    if "reply" not in data:
        raise ScenarioError(f"{where}: a rule needs a reply")
    first, times = _reply_and_times(data["reply"], f"{where}.reply")
    then = data.get("then", [])
    if not isinstance(then, list):
        raise ScenarioError(f"{where}.then must be a list of replies")
    replies = (first, *(_reply(item, f"{where}.then[{i}]") for i, item in enumerate(then)))
    if "times" in data:
        times = _count(data["times"], f"{where}.times")
    usage = _usage(data.get("usage"), f"{where}.usage")
    if usage is not None:
        replies = tuple(r if r.usage is not None else replace(r, usage=usage) for r in replies)
    return Rule(
        name=name, match=_match(data.get("match", {}), f"{where}.match"), replies=replies,
        times=times,
    )

"""The adapter interface: how an agent CLI is invoked, and how its output is understood.

An adapter turns a resolved agent (ralph.toml's `[agents.<name>]`) and a prompt into a
command line, reads the CLI's output as it streams (normalised into AgentEvents), and
classifies how the run ended. The loop never looks at a CLI's own output format.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from ralph.errors import RalphError

AgentStatus = Literal["ok", "error", "rate_limited", "auth_error", "timeout", "cancelled"]
OutputKind = Literal["text", "reasoning", "tool_use", "tool_result", "error"]

PROMPT_PLACEHOLDER = "{prompt}"
PROMPT_FILE_PLACEHOLDER = "{prompt_file}"


class AgentError(RalphError):
    """An agent that cannot be started: unknown adapter, binary not on PATH, bad argv."""


@dataclass(frozen=True)
class AgentCommand:
    """What to run: argv, extra environment, and the bytes for stdin (None: nothing)."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    stdin: bytes | None = None
    shown: list[str] = field(default_factory=list)  # argv as recorded: placeholders unfilled


@dataclass(frozen=True)
class AgentEvent:
    """One normalised piece of an agent's output (the `agent.output` event's meta)."""

    kind: OutputKind
    content: str
    tool: str | None = None
    said: bool = True  # text the agent said (its answer), not a CLI diagnostic
    delta: bool = False  # continues the previous piece of text (streamed chunks)

    def meta(self) -> dict[str, Any]:
        return {"kind": self.kind, "content": self.content, "tool": self.tool}


@dataclass(frozen=True)
class Usage:
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    cost_usd: float | None = None


@dataclass
class Classification:
    """How a run ended, as far as the adapter can tell from exit code and output."""

    status: AgentStatus
    message: str = ""
    session_id: str | None = None
    reset_at: str | None = None  # UTC ISO-8601, when a rate limit lifts (if the CLI says)
    retry_after_s: float | None = None


# "429" alone is no sign (a test count: "429 passed"); as an HTTP status it is.
_RATE_LIMIT = re.compile(r"(?:\bhttp\S*|\bstatus(?: code)?|\bcode|\berror)[: =]*429\b|"
                         r"rate[ _-]?limit|too many requests|usage limit|quota exceeded|"
                         r"exceeded your current quota|resource has been exhausted|"
                         r"resource_exhausted", re.IGNORECASE)
# "Retry-After: 17", "try again in 4 days 6 hours", "retry after 1m30s", "in 20ms".
_RETRY_AFTER = re.compile(r"(?:retry[ -]after|try again in)[:= ]+((?:\d+(?:\.\d+)?\s*"
                          r"(?:ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?|h|hrs?|"
                          r"hours?|d|days?)?(?![a-z])[ ,and]*)+)", re.IGNORECASE)
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]*)", re.IGNORECASE)
_UNIT_SECONDS = {"ms": 0.001, "millisecond": 0.001, "milliseconds": 0.001, "": 1.0, "s": 1.0,
                 "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0, "m": 60.0,
                 "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0, "h": 3600.0,
                 "hr": 3600.0, "hrs": 3600.0, "hour": 3600.0, "hours": 3600.0,
                 "d": 86400.0, "day": 86400.0, "days": 86400.0}
_LOOKS_BAD = re.compile(r"error|fail|exception|fatal|denied|refused|invalid", re.IGNORECASE)
_AUTH = re.compile(r"\b401\b|unauthori[sz]ed|invalid api key|api key not valid|"
                   r"not logged in|authentication", re.IGNORECASE)


def retry_after_seconds(text: str) -> float | None:
    """The wait a rate-limit message asks for, in seconds, with its units (None if none)."""
    match = _RETRY_AFTER.search(text)
    if match is None:
        return None
    total = sum(float(number) * _UNIT_SECONDS.get(unit.lower(), 1.0)
                for number, unit in _DURATION_PART.findall(match.group(1)))
    return round(total, 3)


def classify_text(exit_code: int | None, tail: str) -> Classification:
    """Classify a plain-text run: exit 0 is ok; otherwise look for rate-limit and auth signs
    in the last lines of output (HTTP 429, "rate limit", "usage limit", "Retry-After: N")."""
    if exit_code == 0:
        return Classification("ok")
    last = "\n".join(tail.strip().splitlines()[-20:])
    message = last.splitlines()[-1][:300] if last else f"exited with {exit_code}"
    if _RATE_LIMIT.search(last):
        return Classification("rate_limited", message, retry_after_s=retry_after_seconds(last))
    if _AUTH.search(last):
        return Classification("auth_error", message)
    return Classification("error", message)


class OutputParser:
    """Turns output lines into AgentEvents and remembers what classifying the run needs.

    The base class treats every line as text (stderr as `error`) and watches for rate-limit
    and authentication signs; the JSON adapters subclass JsonOutputParser.
    """

    def __init__(self) -> None:
        self.usage: Usage | None = None
        self.session_id: str | None = None
        self.model: str | None = None
        self.not_json = 0  # lines that were not the JSON the adapter expects: kept as text
        self.rate_limited = False
        self.retry_after_s: float | None = None
        self.reset_at: str | None = None
        self.auth_failed = False
        self.last_error: str | None = None
        # The last plain-text lines (stderr, and stdout that is not the adapter's JSON): what
        # a failed run is classified from when the CLI gave no structured sign. Never the
        # JSON events, whose tool output and agent text may mention "429" or "401".
        self.plain: deque[str] = deque(maxlen=20)

    def feed_line(self, stream: str, line: str) -> list[AgentEvent]:
        if stream == "stderr":
            return self.feed_stderr(line)
        self.plain.append(line)
        return [AgentEvent("text", line)]

    def feed_stderr(self, line: str) -> list[AgentEvent]:
        """stderr carries the CLI's diagnostics: warnings stay text, errors count as errors
        (and may reveal a rate limit), without displacing an error the CLI reported in its
        structured output."""
        self.plain.append(line)
        if not _LOOKS_BAD.search(line) and not _RATE_LIMIT.search(line):
            return [AgentEvent("text", line, said=False)]
        self.note_error(line, structured=False)
        return [AgentEvent("error", line, said=False)]

    def note_error(self, message: str, *, status: int | None = None,
                   structured: bool = True) -> None:
        """Remember an error the CLI reported, and whether it is a rate limit or an auth
        failure (by HTTP status when the CLI gives one, else by its wording)."""
        if structured or self.last_error is None:
            self.last_error = message.strip()[:500] or self.last_error
        if status == 429 or (status is None and _RATE_LIMIT.search(message)):
            self.rate_limited = True
            wait = retry_after_seconds(message)
            if wait is not None:
                self.retry_after_s = wait
        elif status in (401, 403) or (status is None and _AUTH.search(message)):
            self.auth_failed = True

    def add_usage(self, input_tokens: int | None, output_tokens: int | None,
                  cached_tokens: int | None = None, cost_usd: float | None = None) -> None:
        """Accumulate usage over the turns of a run (None stays None until a value comes)."""
        old = self.usage or Usage()
        self.usage = Usage(_plus(old.input_tokens, _count(input_tokens)),
                           _plus(old.output_tokens, _count(output_tokens)),
                           _plus(old.cached_tokens, _count(cached_tokens)),
                           _plus_float(old.cost_usd, _amount(cost_usd)))


_INF = float("inf")


def _count(value: object) -> int | None:
    """A token count as the CLI gave it, if it is one (a string, a negative number or a
    boolean is not: such a field is left out rather than guessed)."""
    if type(value) is int:  # the common case first: this runs for every usage event
        return value if value >= 0 else None
    if type(value) is float and 0 <= value < _INF and value.is_integer():
        return int(value)
    return None  # a string, a boolean, a negative, fractional, infinite or NaN number


def _amount(value: object) -> float | None:
    """A cost in USD as the CLI gave it, if it is a finite non-negative number."""
    if type(value) is float or type(value) is int:  # not bool, a subclass of int
        return float(value) if 0 <= value < _INF else None
    return None


def _plus(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else a + b


def _plus_float(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else round(a + b, 6)


class JsonOutputParser(OutputParser):
    """For CLIs that print one JSON object per line on stdout. A line that is not a JSON
    object, or an object of a shape the adapter does not know, is kept as a text event and
    counted: a CLI that prints garbage mid-stream never crashes the loop."""

    def feed_line(self, stream: str, line: str) -> list[AgentEvent]:
        if stream == "stderr":
            return self.feed_stderr(line)
        if not line.strip():
            return []
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            obj = None
        if not isinstance(obj, dict):
            self.not_json += 1
            self.plain.append(line)
            return [AgentEvent("text", line, said=False)]
        try:
            return self.on_event(obj)
        except Exception:  # a shape the adapter does not know: odd output never crashes a run
            self.not_json += 1
            return [AgentEvent("text", line, said=False)]

    def on_event(self, event: dict[str, Any]) -> list[AgentEvent]:
        raise NotImplementedError


def text_of(value: Any, limit: int = 64 * 1024) -> str:
    """A tool's input or output as text: strings as they are, anything else as JSON."""
    if isinstance(value, str):
        return value[:limit]
    if isinstance(value, list) and all(isinstance(v, dict) for v in value):
        parts = [str(v.get("text", "")) for v in value if v.get("type") in (None, "text")]
        if any(parts):
            return "\n".join(parts)[:limit]
    return orjson.dumps(value, default=str).decode()[:limit]


class Adapter(ABC):
    """One agent CLI. Subclasses are stateless; per-run parsing state lives in OutputParser."""

    name: str
    binary: str | None = None  # the program a default command runs (for `doctor`, PATH errors)
    install_hint: str | None = None  # how to get `binary`, e.g. "npm install -g @openai/codex"

    @abstractmethod
    def default_argv(self, model: str | None) -> list[str]:
        """The CLI's non-interactive invocation when ralph.toml gives no argv."""

    def build(self, argv: list[str], model: str | None, prompt: str,
              prompt_file: str) -> AgentCommand:
        """Fill `{prompt}` / `{prompt_file}` in argv; without either, the prompt goes to stdin."""
        base = argv or self.default_argv(model)
        if not base:
            raise AgentError(f"agent adapter '{self.name}' needs an argv in ralph.toml")
        uses_placeholder = any(PROMPT_PLACEHOLDER in a or PROMPT_FILE_PLACEHOLDER in a
                               for a in base)
        filled = [a.replace(PROMPT_FILE_PLACEHOLDER, prompt_file).replace(PROMPT_PLACEHOLDER,
                                                                           prompt)
                  for a in base]
        return AgentCommand(filled, stdin=None if uses_placeholder else prompt.encode(),
                            shown=list(base))

    def parser(self) -> OutputParser:
        return OutputParser()

    def classify(self, exit_code: int | None, parser: OutputParser) -> Classification:
        """Plain text: exit 0 is ok; otherwise the signs seen in the output decide."""
        if exit_code == 0:
            return Classification("ok", session_id=parser.session_id)
        return classify_failure(exit_code, parser)


def classify_failure(exit_code: int | None, parser: OutputParser,
                     message: str | None = None) -> Classification:
    """A run that failed: rate limited, an authentication failure, or another error, from
    the CLI's structured signs, else its last plain-text lines (`parser.plain`)."""
    if parser.rate_limited or parser.auth_failed:
        status: AgentStatus = "rate_limited" if parser.rate_limited else "auth_error"
        return Classification(status, message or parser.last_error or "",
                              session_id=parser.session_id, reset_at=parser.reset_at,
                              retry_after_s=parser.retry_after_s)
    text = classify_text(exit_code, "\n".join(parser.plain))
    text.session_id = parser.session_id
    if message:
        text.message = message
    elif parser.last_error and text.status == "error":
        text.message = parser.last_error
    return text

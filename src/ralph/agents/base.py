"""The adapter interface: how an agent CLI is invoked, and how its output is understood.

An adapter turns a resolved agent (ralph.toml's `[agents.<name>]`) and a prompt into a
command line, reads the CLI's output as it streams (normalised into AgentEvents), and
classifies how the run ended. The loop never looks at a CLI's own output format.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson

from ralph.errors import RalphError

# auth_error: not logged in or a key the API refused; config_error: the CLI rejected its
# command line, its configuration or its model. No retry fixes either: the loop stops.
AgentStatus = Literal["ok", "error", "rate_limited", "auth_error", "config_error", "timeout",
                      "cancelled"]
OutputKind = Literal["text", "reasoning", "tool_use", "tool_result", "error"]

PROMPT_PLACEHOLDER = "{prompt}"
PROMPT_FILE_PLACEHOLDER = "{prompt_file}"


class AgentError(RalphError):
    """An agent that cannot be started: unknown adapter, binary not on PATH, bad argv."""


@dataclass(frozen=True)
class Login:
    """Whether an agent CLI has credentials, as far as can be told without a network call.

    `logged_in`: True (found), False (the CLI would certainly find none), None (cannot tell:
    a keychain, a cloud login, a provider this check does not know). `found`: what was found
    (names of environment variables and paths of files, never their values), else the fix
    or why it cannot be told."""

    logged_in: bool | None
    found: str


@dataclass(frozen=True)
class AgentCommand:
    """What to run: argv, extra environment, and the bytes for stdin (None: nothing)."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    stdin: bytes | None = None
    shown: list[str] = field(default_factory=list)  # argv as recorded: placeholders unfilled


@dataclass(frozen=True)
class AgentEvent:
    """One normalised piece of an agent's output (an `agent.output` event: see
    `ralph.agents.runner.output_meta`)."""

    kind: OutputKind
    content: str
    tool: str | None = None
    said: bool = True  # text the agent said (its answer), not a CLI diagnostic
    delta: bool = False  # continues the previous piece of text (streamed chunks)


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
# "HTTP/1.1 429", "status 429", "error: 429"; never a number inside a URL (a port: ":40429").
_RATE_LIMIT = re.compile(r"(?:\bhttp(?:/[\d.]+)?|\bstatus(?: code)?|\bcode|\berror)[: =]*"
                         r"429\b|"
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
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# An authentication failure stops the run, so only unambiguous words count: an HTTP 401, the
# APIs' and CLIs' own phrases (a bare "401" or "authentication" is no sign: "test_auth
# 401 passed", "authentication tests failed").
_AUTH = re.compile(r"(?:\bhttp\S*|\bstatus(?: code)?|\bcode\"?|\berror)[: =]*401\b|"
                   r"\bunauthori[sz]ed\b|invalid (?:x-)?api[ -]key|incorrect api key|"
                   r"api key not valid|not logged in|authentication[ _](?:failed|error)|"
                   r"\bunauthenticated\b|must specify the \w+ environment variable|"
                   r"missing environment variable", re.IGNORECASE)
# The API does not know the model (or the endpoint): each API's and CLI's words for it, and an
# HTTP 404. Read in the CLI's structured errors only.
_MODEL_NOT_FOUND = re.compile(
    r"model_not_found|modelnotfounderror|not_found_error|is not found for api version|"
    r"\bmodel not found\b|\bunknown model\b|issue with the selected model|"
    r"\bmodel\b[^\n]{0,100}? does not exist|(?:\bstatus|\bcode\"?)[: =]*404\b",
    re.IGNORECASE)
# A CLI that rejects its command line or its configuration file says so on stderr before it
# starts (before its first JSON event), in its argument parser's words (commander: claude;
# clap: codex; yargs: gemini) or its config loader's.
_REJECTED = re.compile(
    r"^error: (?:unknown option|unexpected argument|invalid value|option .+ is invalid|"
    r"missing required argument|unrecognized subcommand|too many arguments|"
    r"the argument .+ cannot be used)|"
    r"^(?:unknown arguments?|invalid values?|not enough (?:non-option )?arguments|"
    r"not enough arguments following|missing required arguments?):|"
    r"error loading config|config file at .+ is (?:not valid|invalid)|"
    r"configuration is invalid|please fix the configuration file|settings file not found",
    re.IGNORECASE | re.MULTILINE)


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
    lines = tail.strip().splitlines()[-20:]
    last = "\n".join(lines)
    message = lines[-1][:300] if lines else f"exited with {exit_code}"
    if _RATE_LIMIT.search(last):
        return Classification("rate_limited", message, retry_after_s=retry_after_seconds(last))
    if _AUTH.search(last):
        return Classification("auth_error", _last_match(lines, _AUTH) or message)
    return Classification("error", message)


def _plain(text: str) -> str:
    """Text without terminal colour codes (opencode colours its errors even with NO_COLOR)."""
    return _ANSI.sub("", text).strip()


def _last_match(lines: list[str], pattern: re.Pattern[str]) -> str | None:
    """The last line that says it (the message a user needs), at most 300 characters."""
    return next((line.strip()[:300] for line in reversed(lines) if pattern.search(line)), None)


class OutputParser:
    """Turns output lines into AgentEvents and remembers what classifying the run needs.

    The base class treats every line as text (stderr as `error`) and watches for rate-limit
    and authentication signs; the JSON adapters subclass JsonOutputParser.
    """

    # Whether the CLI prints structured events once it runs, so that stderr before the first
    # one is the CLI's own startup diagnostics (its argument parser, its config loader). Not
    # so for a plain program, whose stderr may be anything its tools print.
    structured_output = False

    def __init__(self) -> None:
        self.usage: Usage | None = None
        self.session_id: str | None = None
        self.model: str | None = None
        self.not_json = 0  # lines that were not the JSON the adapter expects: kept as text
        self.rate_limited = False
        self.retry_after_s: float | None = None
        self.reset_at: str | None = None
        self.auth_failed = False
        self.config_failed = False
        self.started = False  # the CLI printed its first structured event: it is running
        self.last_error: str | None = None
        self._error_continues = False  # the last error noted ends with ":", its text follows
        # The last plain-text lines (stderr, and stdout that is not the adapter's JSON): what
        # a failed run is classified from when the CLI gave no structured sign. Never the
        # JSON events, whose tool output and agent text may mention "429" or "401".
        self.plain: deque[str] = deque(maxlen=20)

    def feed_line(self, stream: str, line: str) -> list[AgentEvent]:
        if stream == "stderr":
            return self.feed_stderr(line)
        self.plain.append(line)
        return [AgentEvent("text", line)]

    def last_plain_line(self) -> str:
        """The last non-blank plain-text line (at most 300 characters), "" if none."""
        return next((line.strip()[:300] for line in reversed(self.plain) if line.strip()), "")

    def feed_stderr(self, line: str) -> list[AgentEvent]:
        """stderr carries the CLI's diagnostics: warnings stay text, errors count as errors
        (and may reveal a rate limit or an auth failure, and, before a JSON CLI's first
        event, a command line or config file it rejected), without displacing an error the
        CLI reported in its structured output."""
        self.plain.append(line)
        if self._error_continues and line.strip():
            # "Invalid values:" / "Error loading config.toml:": what is wrong is on the next
            # line (unless that starts a block: "--- JSONC Input ---")
            self._error_continues = False
            if not line.startswith("---"):
                self.last_error = f"{self.last_error} {_plain(line)}"[:500]
        rejected = (self.structured_output and not self.started
                    and bool(_REJECTED.search(line)))
        if not (rejected or _LOOKS_BAD.search(line) or _RATE_LIMIT.search(line)
                or _AUTH.search(line)):
            return [AgentEvent("text", line, said=False)]
        if rejected:
            self.config_failed = True
        self.note_error(line, structured=False)
        return [AgentEvent("error", line, said=False)]

    def note_error(self, message: str, *, status: int | None = None,
                   structured: bool = True, final: bool = True) -> None:
        """Remember an error the CLI reported, and whether it is a rate limit, an auth failure
        or a model the API does not know (by HTTP status when the CLI gives one, else by its
        wording; the model only from a structured error). `final=False`: a notice the CLI may
        still recover from (a reconnect), which is no sign of a configuration error."""
        if structured or self.last_error is None:
            text = _plain(message)
            self.last_error = text[:500] or self.last_error
            self._error_continues = not structured and text.endswith(":")
        if status == 429 or (status is None and _RATE_LIMIT.search(message)):
            self.rate_limited = True
            wait = retry_after_seconds(message)
            if wait is not None:
                self.retry_after_s = wait
        elif status in (401, 403) or (status is None and _AUTH.search(message)):
            self.auth_failed = True
        elif final and structured and (status == 404 or (
                _MODEL_NOT_FOUND.search(message) and (status is None or status < 500))):
            self.config_failed = True

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

    structured_output = True

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
        self.started = True
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
    # How to log in or give the CLI its key: the fix the loop names when a run ends auth_error.
    login_hint: str = ("log in with the program's own login command, or give it its key with "
                       "`env` in its [agents.<name>] section of ralph.toml")

    @abstractmethod
    def default_argv(self, model: str | None) -> list[str]:
        """The CLI's non-interactive invocation when ralph.toml gives no argv."""

    def continue_argv(self, argv: list[str], conversation: str) -> list[str]:
        """`argv` (placeholders not yet filled) continuing the CLI's own conversation
        `conversation` (the session id it reported), so the prompt is a follow-up with the
        earlier turns in context. An adapter whose CLI cannot raises AgentError."""
        raise AgentError(f"agent adapter '{self.name}' cannot continue a conversation: its "
                         "program keeps none between runs")

    def approvals_argv(self, argv: list[str], mode: str, policy: str,
                       folder: Path) -> list[str]:
        """`argv` (placeholders not yet filled) running under the approvals `mode`: auto
        leaves it as it is; ask and deny need a way for Ralph to answer (or refuse) each
        tool call. `policy`: the session's policy, encoded for a hook or bridge process
        (ralph.approvals.policy.PolicyFile); `folder`: the session's folder, where the
        files of `approvals_files` are written. An adapter whose CLI has no such way
        raises AgentError."""
        if mode == "auto":
            return argv
        raise AgentError(f"agent adapter '{self.name}' cannot run with approvals '{mode}': "
                         "its program asks Ralph nothing before it acts (only 'auto' works)")

    def approvals_files(self, mode: str) -> dict[str, str]:
        """Files (name: text) the CLI reads under `mode`, written to the session's folder."""
        return {}

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

    def login(self, env: Mapping[str, str], cwd: Path, model: str | None) -> Login:
        """Whether the CLI has credentials, from `env` (the agent's environment) and its
        credential files; never a network call. A CLI Ralph knows nothing about: unknown."""
        return Login(None, "")


def classify_failure(exit_code: int | None, parser: OutputParser,
                     message: str | None = None) -> Classification:
    """A run that failed: rate limited, an authentication failure, a configuration the CLI
    rejected, or another error, from the CLI's structured signs and its stderr, else its last
    plain-text lines (`parser.plain`)."""
    flagged: AgentStatus | None = (
        "rate_limited" if parser.rate_limited else "auth_error" if parser.auth_failed
        else "config_error" if parser.config_failed else None)
    if flagged is not None:
        return Classification(flagged, message or parser.last_error or "",
                              session_id=parser.session_id, reset_at=parser.reset_at,
                              retry_after_s=parser.retry_after_s)
    text = classify_text(exit_code, "\n".join(parser.plain))
    text.session_id = parser.session_id
    if message:
        text.message = message
    elif parser.last_error and text.status == "error":
        text.message = parser.last_error
    return text


def without_options(argv: list[str], valued: tuple[str, ...],
                    flags: tuple[str, ...] = ()) -> list[str]:
    """`argv` without the options `valued` (with their value: `--opt v`, `--opt=v`, and for
    a short one `-ov` too) and the `flags` (also as `--flag=value`)."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        name = arg.split("=", 1)[0]
        attached = any(len(option) == 2 and arg.startswith(option) and len(arg) > 2
                       for option in valued if not option.startswith("--"))
        if skip:
            skip = False
        elif arg in valued:
            skip = True
        elif name in valued or name in flags or attached:
            continue
        else:
            kept.append(arg)
    return kept


def insert_after(argv: list[str], anchors: tuple[str, ...], extra: list[str]) -> list[str]:
    """`extra` inserted after the first of `anchors` in `argv` (else after the program)."""
    for i, arg in enumerate(argv):
        if arg in anchors:
            return [*argv[:i + 1], *extra, *argv[i + 1:]]
    return [*argv[:1], *extra, *argv[1:]]

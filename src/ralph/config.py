"""`ralph.toml`, validated into pydantic models, with errors that name the key and the line.

Every key has a default, so a file holding only `[agents.x] argv = [...]` is a complete
configuration. Models are strict (TOML values are typed: `"10"` is not an integer) and
forbid unknown keys, because a misspelt key silently falling back to its default is the worst
kind of configuration error. tomllib reports no positions for keys, so `KeyLocator` scans the
text itself to turn a pydantic error location into a line number.
"""

from __future__ import annotations

import ast
import bisect
import contextlib
import difflib
import inspect
import os
import re
import string
import sys
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, cast, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)
from pydantic_core import ErrorDetails, PydanticCustomError

from ralph.approvals.rules import READ_ONLY_TOOLS, Rule, RuleError
from ralph.configcache import remember
from ralph.errors import RalphError

CONFIG_FILE = "ralph.toml"

AdapterName = Literal["codex", "claude", "gemini", "opencode", "command"]
ADAPTERS: tuple[str, ...] = get_args(AdapterName)
# Agents that work without an [agents.<name>] section: their adapter knows the command line.
BUILTIN_AGENTS: tuple[str, ...] = ("codex", "claude", "gemini", "opencode")

ARGV_PLACEHOLDERS: tuple[str, ...] = ("prompt", "prompt_file")
COMMIT_PLACEHOLDERS: tuple[str, ...] = ("task_id", "title", "iteration")
# `{name}` in an argv element; other braces (JSON, `${VAR}` written without a name) are text.
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")

KeyPath = tuple[str | int, ...]


class ConfigError(RalphError):
    """ralph.toml is missing or invalid; `problems` lists each one found (first one first)."""

    def __init__(self, message: str, problems: Sequence[ConfigProblem] = ()) -> None:
        super().__init__(message)
        self.problems: list[ConfigProblem] = list(problems)


@dataclass(frozen=True)
class ConfigProblem:
    """One invalid or unknown key: where it is (dotted path, line if known) and what is wrong."""

    key: str
    line: int | None
    message: str


# --------------------------------------------------------------------------------------------
# Models


class _Section(BaseModel):
    """Base of every section: strict types, unknown keys are errors, values never change.

    The docstring under each field is its description in `config_schema()`, added there:
    pydantic's `use_attribute_docstrings` would read and tokenize every class's source when
    the module is imported, about a third of the time every `ralph` command spends on it."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class FilesConfig(_Section):
    """Where the project's files are, relative to the project root."""

    prd: str = Field(default="PRD.md", min_length=1)
    """The task list: a Markdown checklist under `## Tasks` (.md) or `{"stories": [...]}`
    (.json)."""
    progress: str = Field(default="progress.md", min_length=1)
    """Append-only notes of past iterations; the prompt includes its tail."""
    agents: str = Field(default="AGENTS.md", min_length=1)
    """Project memory for agents: how to build, test and run the project."""
    prompt: str = Field(default="PROMPT_build.md", min_length=1)
    """Prompt of build tasks (tasks without a tag)."""
    plan: str = Field(default="PROMPT_plan.md", min_length=1)
    """Prompt of [PLAN] tasks."""
    general: str = Field(default="PROMPT.md", min_length=1)
    """Prompt of task kinds without a file of their own ([DOCS], [HOTFIX], [REVIEW]).
    Ralph's addition to the usual set of files."""
    judge: str = Field(default="PROMPT_judge.md", min_length=1)
    """Prompt of the judge, when [judge] is enabled and sets no prompt."""
    review: str = Field(default="PROMPT_review.md", min_length=1)
    """Prompt of the reviewer, when [review] is enabled and sets no prompt."""
    feedback: str = Field(default="FEEDBACK.md", min_length=1)
    """Feedback from people to the agent, included in every prompt."""
    nu: str = Field(default="PROMPT_nu.md", min_length=1)
    """Prompt of named sessions (`ralph nu`); Ralph's built-in one when the file is missing."""


class LoopConfig(_Section):
    """How long a run goes on and how hard it tries."""

    max_iterations: int = Field(default=20, ge=1)
    """Most iterations of one `ralph run`."""
    no_progress_limit: int = Field(default=3, ge=1)
    """A run stops after this many iterations in a row without progress."""
    max_attempts_per_task: int = Field(default=3, ge=1)
    """Failed attempts at one task before it is marked blocked and skipped."""
    rate_limit_per_hour: int = Field(default=0, ge=0)
    """Most agent starts per hour; 0 = no cap."""
    rate_limit_max_wait_seconds: int = Field(default=3600, ge=0)
    """Longest single wait for a rate limit to pass; then the agent is tried again."""
    rate_limit_max_retries: int = Field(default=10, ge=0)
    """Rate-limited retries of one agent run before it counts as a failed attempt (a run
    that keeps looking rate limited, a mistaken "429" in its output say, must end)."""
    agent_timeout_seconds: int = Field(default=1800, gt=0)
    """An agent run is stopped after this long, unless its agent sets timeout_seconds."""
    default_agent: str = Field(default="codex", min_length=1)
    """The agent used when none is named (`--agent`, the bridge's `agent` param); when
    ralph.toml defines exactly one agent and leaves this out, that agent."""
    context_chars: int = Field(default=60000, ge=1000)
    """Character budget of a prompt; the oldest progress notes are dropped first."""
    progress_tail_chars: int = Field(default=8000, ge=0)
    """At most this many characters from the end of the progress file go into a prompt."""
    notes_chars: int = Field(default=4000, ge=0)
    """At most this many characters of the session notes (`ralph notes`) go into a prompt,
    newest first."""
    silence_warning_seconds: int = Field(default=120, ge=0)
    """An agent silent this long gets a warning, repeated with back-off; 0 = never."""
    max_cost_usd: float | None = Field(default=None, gt=0)
    """A run stops (reason `budget`) once its agents cost this much in USD, after the
    iteration in flight; unset = no limit."""
    max_tokens: int | None = Field(default=None, gt=0)
    """A run stops (reason `budget`) once its agents used this many tokens (input and
    output), after the iteration in flight; unset = no limit."""


class AgentConfig(_Section):
    """One `[agents.<name>]` section."""

    adapter: AdapterName | None = None
    """Which adapter runs it; unset = the agent's name when that is a known adapter, else
    `command`."""
    argv: list[str] = Field(default_factory=list)
    """The command line; empty = the adapter's default command. An element containing
    `{prompt}` or `{prompt_file}` receives the prompt (text, or the path of a file holding
    it); without either the prompt goes to stdin."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables of the agent's process."""
    model: str | None = None
    """The model the adapter asks for; unset = the agent's own default."""
    timeout_seconds: int | None = Field(default=None, gt=0)
    """Overrides loop.agent_timeout_seconds for this agent."""
    server: bool = False
    """opencode only: start `opencode serve` once per run and attach every iteration to it
    (`opencode run --attach`)."""
    port: int = Field(default=0, ge=0, le=65535)
    """The port of that server; 0 = a free port."""
    server_command: Literal["serve", "web"] = "serve"
    """Which opencode command runs that server: `serve` (headless) or `web` (the same server
    with its web UI; `serve` is used where the installed opencode has no `web`)."""
    server_wait_seconds: int = Field(default=60, gt=0)
    """How long the server may take to answer HTTP before the run gives up."""

    @model_validator(mode="after")
    def _check_placeholders(self) -> AgentConfig:
        for index, element in enumerate(self.argv):
            for name in _PLACEHOLDER.findall(element):
                if name not in ARGV_PLACEHOLDERS:
                    raise PydanticCustomError(
                        "unknown_placeholder",
                        "unknown placeholder {placeholder} (use {known}){hint}",
                        {"placeholder": "{" + name + "}",
                         "known": " or ".join("{" + known + "}" for known in ARGV_PLACEHOLDERS),
                         "hint": _suggest(name, ARGV_PLACEHOLDERS, "{", "}"),
                         "key": ("argv", index)},
                    )
        return self


def _not_blank(command: str) -> str:
    if not command.strip():
        raise PydanticCustomError("blank_command",
                                  "a gate command must not be blank (it would always pass)")
    return command


def _relative_glob(pattern: str) -> str:
    if not pattern.strip():
        raise PydanticCustomError("blank_pattern", "a protected pattern must not be blank")
    parts = pattern.split("/")
    if pattern.startswith("/") or ".." in parts or "\0" in pattern or "\\/" in pattern:
        raise PydanticCustomError(
            "outside_pattern",
            "{pattern} must be relative to the project root, without '..'",
            {"pattern": repr(pattern)})
    if "[:" in pattern:
        raise PydanticCustomError(
            "class_pattern", "{pattern}: character classes such as [:alpha:] are not "
            "supported (list the characters: [a-z])", {"pattern": repr(pattern)})
    # `./tests/**` and `tests//x` name what `tests/**` and `tests/x` do.
    normal = "/".join(part for part in parts if part not in ("", "."))
    if not normal:
        raise PydanticCustomError("root_pattern", "{pattern} names the project root itself "
                                  "(write ** to protect everything)", {"pattern": repr(pattern)})
    return normal  # a pattern names everything below what it names: a trailing / adds nothing


class GatesConfig(_Section):
    """Checks that decide whether an iteration's work is good, run after every iteration."""

    commands: list[Annotated[str, AfterValidator(_not_blank)]] = Field(default_factory=list)
    """Shell command strings, run in order in the project root; each must exit 0 (a blank
    one, which would pass without checking anything, is refused)."""
    timeout_seconds: int = Field(default=900, gt=0)
    """A gate command is stopped (and fails) after this long."""
    protected: list[Annotated[str, AfterValidator(_relative_glob)]] = Field(
        default_factory=list)
    """Globs of paths the agent must not change (`tests/**`, `fixtures/*.json`), besides
    ralph.toml, the PROMPT files and the tracked files the gate commands name; whatever the
    agent changes there is put back before the gates run, and the attempt fails."""
    protect_gate_files: bool = True
    """Protect every tracked file or directory a gate command names on its command line
    (`sh gate.sh` protects gate.sh, `pytest tests/unit` everything under tests/unit)."""


class JudgeConfig(_Section):
    """A second agent run that judges the diff against the task; ends `JUDGE_SIGNAL: true`."""

    enabled: bool = False
    """Run the judge after the gates; a task is done only if it says true."""
    agent: str | None = Field(default=None, min_length=1)
    """The judging agent; unset = the iteration's agent."""
    prompt: str | None = Field(default=None, min_length=1)
    """The judge's prompt file; unset = files.judge."""


class ReviewConfig(_Section):
    """A reviewer run over the diff whose last line is `SHIP` or `BLOCK`."""

    enabled: bool = False
    """Run the review after the gates; a task is done only if it says SHIP."""
    agent: str | None = Field(default=None, min_length=1)
    """The reviewing agent; unset = the iteration's agent."""
    prompt: str | None = Field(default=None, min_length=1)
    """The reviewer's prompt file; unset = files.review."""


WORKFLOW_ROLES = ("planner", "questioner", "executor", "reviewer")


class RoleConfig(_Section):
    """One role of `ralph workflow`: which agent plays it, with which instructions."""

    agent: str | None = Field(default=None, min_length=1)
    """The agent playing the role; unset = loop.default_agent."""
    prompt: str | None = Field(default=None, min_length=1)
    """The role's instructions file; unset = PROMPT_<role>.md."""


class WorkflowRolesConfig(_Section):
    """The four roles of `ralph workflow`."""

    planner: RoleConfig = Field(default_factory=RoleConfig)
    questioner: RoleConfig = Field(default_factory=RoleConfig)
    executor: RoleConfig = Field(default_factory=RoleConfig)
    reviewer: RoleConfig = Field(default_factory=RoleConfig)


class WorkflowConfig(_Section):
    """`ralph workflow`: planner, questioner, executor and reviewer agents on a session."""

    max_qa_cycles: int = Field(default=3, ge=0)
    """Q&A cycles (questioner brainstorm then research) the planner may ask for."""
    max_task_attempts: int = Field(default=3, ge=1)
    """Attempts of one task (the first and its reworks) before it is marked failed."""
    roles: WorkflowRolesConfig = Field(default_factory=WorkflowRolesConfig)


def _approval_rule(rule: str) -> str:
    try:
        return Rule.parse(rule).text
    except RuleError as exc:
        raise PydanticCustomError("bad_rule", "{reason}", {"reason": str(exc)}) from None


class ApprovalsConfig(_Section):
    """Tool-permission requests of agent sessions run with approvals `ask` or `deny`
    (`ralph agent run --approvals`): rules that answer without a person, and how long a
    person has. A rule is a tool name (any case), optionally with a glob of the call's
    command or path: `Read`, `Bash(git status*)`, `Edit(src/*)`."""

    allow: list[Annotated[str, AfterValidator(_approval_rule)]] = Field(
        default_factory=lambda: list(READ_ONLY_TOOLS))
    """Calls allowed without asking (default: the tools that only read)."""
    deny: list[Annotated[str, AfterValidator(_approval_rule)]] = Field(default_factory=list)
    """Calls denied without asking; a call that matches both lists is denied."""
    timeout_seconds: int = Field(default=600, gt=0)
    """A request nobody answers within this long is denied."""


class GitConfig(_Section):
    """What the loop does with git."""

    auto_commit: bool = True
    """Commit the agent's changes and the tracker update after each verified iteration."""
    branch: str | None = Field(default=None, min_length=1)
    """Work on this branch; unset = stay on the current branch."""
    commit_message: str = Field(default="ralph: {task_id} {title}", min_length=1)
    """Commit message; placeholders {task_id}, {title}, {iteration}."""

    @model_validator(mode="after")
    def _check_commit_message(self) -> GitConfig:
        try:
            names = [name for _, name, _, _ in string.Formatter().parse(self.commit_message)
                     if name is not None]
        except ValueError as exc:  # a lone `{` or `}`
            raise PydanticCustomError(
                "bad_template", "invalid template: {reason} (write {{ and }} for literal braces)",
                {"reason": str(exc), "key": ("commit_message",)}) from None
        for name in names:
            if name not in COMMIT_PLACEHOLDERS:
                raise PydanticCustomError(
                    "unknown_placeholder",
                    "unknown placeholder {placeholder} (use {known})",
                    {"placeholder": "{" + name + "}",
                     "known": ", ".join("{" + known + "}" for known in COMMIT_PLACEHOLDERS),
                     "key": ("commit_message",)})
        try:  # a format spec that does not fit the value, such as {title:d}
            self.format_commit_message(task_id="1", title="A task", iteration=1)
        except (ValueError, TypeError) as exc:
            raise PydanticCustomError(
                "bad_template", "invalid template: {reason}",
                {"reason": str(exc), "key": ("commit_message",)}) from None
        return self

    def format_commit_message(self, *, task_id: str, title: str, iteration: int) -> str:
        """The commit message of one iteration (`commit_message` was checked at load)."""
        return self.commit_message.format(task_id=task_id, title=title, iteration=iteration)


class PriceConfig(_Section):
    """A model's price in USD per million tokens."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(default=None, ge=0)
    """Cached input tokens; unset = the input price."""

    def cost(self, input_tokens: int, output_tokens: int, cached_tokens: int = 0) -> float:
        """Cost of a run; cached tokens are part of the input tokens, billed at their rate."""
        cached = min(cached_tokens, input_tokens)
        cached_rate = self.input if self.cached_input is None else self.cached_input
        return round(((input_tokens - cached) * self.input + cached * cached_rate
                      + output_tokens * self.output) / 1_000_000, 6)


@dataclass(frozen=True)
class ResolvedAgent:
    """An agent ready to run: its section (or defaults) with the adapter and timeout decided."""

    name: str
    adapter: AdapterName
    argv: tuple[str, ...]
    """Empty = the adapter's default command line."""
    env: Mapping[str, str]
    model: str | None
    timeout_seconds: int
    """The agent's own timeout_seconds, else loop.agent_timeout_seconds."""
    server: bool = False
    port: int = 0
    server_command: Literal["serve", "web"] = "serve"
    server_wait_seconds: int = 60
    prices: Mapping[str, PriceConfig] = field(default_factory=dict)
    """ralph.toml [prices]: the cost of a run whose CLI reports tokens only is computed from
    the price of the model it used, if listed (never guessed)."""

    @property
    def prompt_via_stdin(self) -> bool:
        """Whether the prompt goes to stdin: no argv element names `{prompt}`/`{prompt_file}`."""
        return not any(name in ARGV_PLACEHOLDERS for element in self.argv
                       for name in _PLACEHOLDER.findall(element))

    def command(self, *, prompt: str, prompt_file: str | os.PathLike[str]) -> list[str]:
        """argv with `{prompt}` and `{prompt_file}` replaced (other text left as written)."""
        return expand_argv(self.argv, prompt=prompt, prompt_file=prompt_file)


class Config(_Section):
    """The whole of ralph.toml."""

    files: FilesConfig = Field(default_factory=FilesConfig)
    loop: LoopConfig = Field(default_factory=LoopConfig)
    agents: dict[str, AgentConfig] = Field(default_factory=dict)
    """Agents by name; a known adapter's name (codex, claude, gemini, opencode) works without
    a section."""
    gates: GatesConfig = Field(default_factory=GatesConfig)
    judge: JudgeConfig = Field(default_factory=JudgeConfig)
    review: ReviewConfig = Field(default_factory=ReviewConfig)
    git: GitConfig = Field(default_factory=GitConfig)
    approvals: ApprovalsConfig = Field(default_factory=ApprovalsConfig)
    workflow: WorkflowConfig = Field(default_factory=WorkflowConfig)
    prices: dict[str, PriceConfig] = Field(default_factory=dict)
    """USD per million tokens by model name, for agents whose CLI reports tokens but no
    cost: `[prices."gpt-5-codex"] input = 1.25, output = 10.0, cached_input = 0.125`."""

    @model_validator(mode="before")
    @classmethod
    def _sole_agent_is_default(cls, data: Any) -> Any:
        """A ralph.toml that defines exactly one agent and names no default agent uses that
        one: a file holding only `[agents.x] argv = [...]` runs."""
        if not isinstance(data, dict):
            return data
        agents, loop = data.get("agents"), data.get("loop", {})
        if (isinstance(agents, dict) and len(agents) == 1 and isinstance(loop, dict)
                and "default_agent" not in loop):
            data = {**data, "loop": {**loop, "default_agent": next(iter(agents))}}
        return data

    @model_validator(mode="after")
    def _check_agents(self) -> Config:
        for name, section in self.agents.items():
            if not name:
                raise PydanticCustomError("empty_name", "an agent name must not be empty",
                                          {"key": ("agents", name)})
            if _adapter_for(name, section) == "command" and not section.argv:
                raise PydanticCustomError(
                    "missing_argv",
                    "the command adapter needs argv (the program and its arguments)",
                    {"key": ("agents", name, "argv")})
        references: list[tuple[KeyPath, str | None]] = [
            (("loop", "default_agent"), self.loop.default_agent),
            (("judge", "agent"), self.judge.agent),
            (("review", "agent"), self.review.agent),
            *((("workflow", "roles", role, "agent"), getattr(self.workflow.roles, role).agent)
              for role in WORKFLOW_ROLES),
        ]
        for key, reference in references:
            if (reference is not None and reference not in self.agents
                    and reference not in BUILTIN_AGENTS):
                raise PydanticCustomError(
                    "unknown_agent",
                    "unknown agent '{name}': define [agents.{table}] or name a built-in agent"
                    " (codex, claude, gemini, opencode){hint}",
                    {"name": reference, "table": format_key((reference,)), "key": key,
                     "hint": _suggest(reference, [*self.agents, *BUILTIN_AGENTS])})
        return self

    def agent(self, name: str) -> ResolvedAgent:
        """The agent called `name`: its section, else a built-in adapter with its defaults.

        Raises ConfigError for a name that is neither configured nor a known adapter.
        """
        section = self.agents.get(name)
        if section is None:
            if name not in BUILTIN_AGENTS:
                hint = _suggest(name, [*self.agents, *BUILTIN_AGENTS])
                raise ConfigError(f"unknown agent '{name}': define [agents.{format_key((name,))}]"
                                  f" in {CONFIG_FILE}{hint}")
            section = AgentConfig()
        return ResolvedAgent(
            name=name,
            adapter=_adapter_for(name, section),
            argv=tuple(section.argv),
            env=dict(section.env),
            model=section.model,
            timeout_seconds=section.timeout_seconds or self.loop.agent_timeout_seconds,
            server=section.server,
            port=section.port,
            server_command=section.server_command,
            server_wait_seconds=section.server_wait_seconds,
            prices=dict(self.prices),
        )


    @property
    def judge_prompt(self) -> str:
        """The judge's prompt file: judge.prompt, else files.judge."""
        return self.judge.prompt or self.files.judge

    @property
    def review_prompt(self) -> str:
        """The reviewer's prompt file: review.prompt, else files.review."""
        return self.review.prompt or self.files.review

    def role_agent(self, role: str) -> str:
        """The agent playing workflow role `role`: its own, else loop.default_agent."""
        return getattr(self.workflow.roles, role).agent or self.loop.default_agent

    def role_prompt(self, role: str) -> str:
        """The instructions file of workflow role `role`: its own, else PROMPT_<role>.md."""
        return getattr(self.workflow.roles, role).prompt or f"PROMPT_{role}.md"


def _adapter_for(name: str, section: AgentConfig) -> AdapterName:
    if section.adapter is not None:
        return section.adapter
    if name in BUILTIN_AGENTS:
        return cast(AdapterName, name)
    return "command"


def expand_argv(argv: Sequence[str], *, prompt: str,
                prompt_file: str | os.PathLike[str]) -> list[str]:
    """Replace `{prompt}` and `{prompt_file}` in each element; nothing else is touched."""
    values = {"prompt": prompt, "prompt_file": os.fspath(prompt_file)}

    def replace(match: re.Match[str]) -> str:
        return values.get(match.group(1), match.group(0))

    return [_PLACEHOLDER.sub(replace, element) for element in argv]


def config_schema() -> dict[str, Any]:
    """JSON Schema of ralph.toml (for docs and editors), descriptions from the field docs."""
    _describe_fields()
    return Config.model_json_schema()


def _describe_fields() -> None:
    """Give every field of the sections its docstring as description (once), as pydantic's
    `use_attribute_docstrings` would have at import: the sections first, Config last, since
    a model's schema embeds those of the models it holds."""
    docs = _attribute_docstrings()
    for model in (FilesConfig, LoopConfig, AgentConfig, GatesConfig, JudgeConfig, ReviewConfig,
                  GitConfig, ApprovalsConfig, PriceConfig, Config):
        fields = [(info, docs.get((model.__name__, name)))
                  for name, info in model.model_fields.items()]
        missing = [(info, doc) for info, doc in fields if doc and info.description is None]
        for info, doc in missing:
            info.description = doc
        if missing:
            model.model_rebuild(force=True)


def _attribute_docstrings() -> dict[tuple[str, str], str]:
    """(class, field) -> the string literal right below the field's annotated assignment in
    this module's class bodies (pydantic's rule for attribute docstrings)."""
    tree = ast.parse(inspect.getsource(sys.modules[__name__]))
    docs: dict[tuple[str, str], str] = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        for field_node, below in zip(node.body, node.body[1:], strict=False):
            if (isinstance(field_node, ast.AnnAssign) and isinstance(field_node.target, ast.Name)
                    and isinstance(below, ast.Expr) and isinstance(below.value, ast.Constant)
                    and isinstance(below.value.value, str)):
                docs[(node.name, field_node.target.id)] = inspect.cleandoc(below.value.value)
    return docs


# --------------------------------------------------------------------------------------------
# Loading


def load_config(root: Path, required: bool = True) -> Config:
    """The configuration of the project at `root`, from `root/ralph.toml`.

    A missing file is a ConfigError (the loop must not run on guesses) unless `required` is
    false, which returns the defaults.
    """
    path = root / CONFIG_FILE
    source = _display_path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        if not required:
            return Config()
        raise ConfigError(f"no {CONFIG_FILE} in {root}: run `ralph init` to create one") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {source}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"{source}:{line}: not valid UTF-8 (byte offset {exc.start})") from None
    config = parse_config(text, source)
    remember(root, data, config.files)  # for readers that need only [files] (ralph status)
    return config


def parse_config(text: str, source: str = CONFIG_FILE) -> Config:
    """Validate the TOML `text`; `source` names it in error messages (`ralph.toml:7: ...`)."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"line (\d+)", str(exc))
        where = f"{source}:{found.group(1)}" if found else source
        raise ConfigError(f"{where}: invalid TOML: {exc}") from None
    try:
        return Config.model_validate(document)
    except ValidationError as exc:
        locator = KeyLocator(text)
        problems = [_problem(error, locator) for error in exc.errors()]
        problems.sort(key=lambda problem: problem.line if problem.line is not None else 1 << 62)
        first = problems[0]
        where = f"{source}:{first.line}" if first.line is not None else source
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ConfigError(f"{where}: {first.message}{more}", problems) from None


def _display_path(path: Path) -> str:
    """`path` relative to the working directory when below it (as users type it), else whole."""
    cwd = Path.cwd()
    if cwd == Path(cwd.anchor):
        return str(path)
    try:
        return str(path.relative_to(cwd))
    except ValueError:
        return str(path)


def _problem(error: ErrorDetails, locator: KeyLocator) -> ConfigProblem:
    """One pydantic error as a ConfigProblem: dotted key, its line, and a plain message."""
    loc: KeyPath = tuple(error["loc"])
    ctx = error.get("ctx") or {}
    extra = ctx.get("key")
    if isinstance(extra, tuple):  # our validators say which key they are about
        loc = loc + extra
    key = format_key(loc)
    kind = error["type"]
    if kind == "extra_forbidden":
        hint = _suggest(str(loc[-1]), _field_names(loc[:-1]))
        return ConfigProblem(key, locator.line(loc), f"unknown key '{key}'{hint}")
    message = _describe_error(error)
    prefix = f"{key}: " if key else ""
    return ConfigProblem(key, locator.line(loc), prefix + message)


_EXPECTED = {
    "int_type": "an integer", "int_parsing": "an integer", "int_from_float": "an integer",
    "bool_type": "a boolean (true or false)", "bool_parsing": "a boolean (true or false)",
    "string_type": "a string", "list_type": "an array", "dict_type": "a table",
    "model_type": "a table", "model_attributes_type": "a table",
}


def _describe_error(error: ErrorDetails) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    got = describe_value(error.get("input"))
    if kind in _EXPECTED:
        return f"expected {_EXPECTED[kind]}, got {got}"
    if kind == "greater_than_equal":
        return f"must be >= {ctx['ge']}, got {got}"
    if kind == "greater_than":
        return f"must be > {ctx['gt']}, got {got}"
    if kind == "string_too_short":
        return "must not be empty"
    if kind == "literal_error":
        expected = str(ctx.get("expected", "")).replace("'", "")
        return f"expected one of {expected.replace(' or ', ', ')}, got {got}"
    return str(error["msg"])


def describe_value(value: Any) -> str:
    """A short, one-line, TOML-flavoured rendering of a value for error messages."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return repr(shown)
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return f"a {type(value).__name__}"


def _suggest(word: str, choices: Iterable[str], before: str = "",
             after: str = "") -> str:
    """`; did you mean 'x'?` for the closest choice, or an empty string."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean '{before}{close[0]}{after}'?" if close else ""


def _field_names(path: KeyPath) -> list[str]:
    """The keys allowed in the table at `path` (Config's fields at the top, and so on)."""
    current: Any = Config
    for part in path:
        if get_origin(current) is dict:  # agents.<name>: any name, the value's model
            current = get_args(current)[1]
        elif isinstance(current, type) and issubclass(current, BaseModel):
            info = current.model_fields.get(str(part))
            if info is None:
                return []
            current = info.annotation
        else:
            return []
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def format_key(path: Sequence[str | int]) -> str:
    """A key path as TOML writes it: `loop.max_iterations`, `agents."my.agent".argv[0]`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        text = part if _BARE_KEY.fullmatch(part) else _quote(part)
        out += f".{text}" if out else text
    return out


def _quote(key: str) -> str:
    escaped = key.replace("\\", "\\\\").replace('"', '\\"')
    escaped = "".join(ch if ch.isprintable() else f"\\u{ord(ch):04X}" for ch in escaped)
    return f'"{escaped}"'


# --------------------------------------------------------------------------------------------
# The key locator


class KeyLocator:
    """Line numbers (1-based) of the keys, tables and array elements of a TOML document.

    Built for error messages over text tomllib has already accepted: it scans headers
    (`[a.b]`, `[[a]]`), keys (bare, quoted, dotted), inline tables and arrays, and skips
    strings and comments. A path not defined in the text falls back to the nearest enclosing
    key or table (`loop.max_iterations` missing -> the `[loop]` line); on text it cannot
    follow it keeps what it found so far and never raises.
    """

    def __init__(self, text: str) -> None:
        self._explicit: dict[KeyPath, int] = {}
        self._implicit: dict[KeyPath, int] = {}
        scanner = _Scanner(text, self._explicit, self._implicit)
        with contextlib.suppress(_ScanError, IndexError):
            scanner.document()

    def line(self, path: str | Sequence[str | int]) -> int | None:
        """The line defining `path` (dotted string or parts), else its nearest ancestor's."""
        parts: KeyPath = tuple(parse_dotted_key(path) if isinstance(path, str) else path)
        while parts:
            found = self._explicit.get(parts) or self._implicit.get(parts)
            if found is not None:
                return found
            parts = parts[:-1]
        return None


def parse_dotted_key(text: str) -> list[str]:
    """`agents."my.agent".env` -> ['agents', 'my.agent', 'env'] (TOML key syntax)."""
    explicit: dict[KeyPath, int] = {}
    scanner = _Scanner(text, explicit, {})
    try:
        parts = scanner.key()
    except (_ScanError, IndexError):
        raise ValueError(f"not a TOML key: {text!r}") from None
    scanner.spaces()
    if scanner.pos != len(text):
        raise ValueError(f"not a TOML key: {text!r}")
    return parts


class _ScanError(Exception):
    """The scanner met text it does not understand (the locator then stops quietly)."""


_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\"}
_SCALAR_END = re.compile(r"[,\]}#\r\n]")


@dataclass
class _Scanner:
    """A recursive-descent walk over TOML text that records where each key is defined."""

    text: str
    explicit: dict[KeyPath, int]
    implicit: dict[KeyPath, int]
    pos: int = 0
    _newlines: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._newlines = [i for i, ch in enumerate(self.text) if ch == "\n"]

    def line_at(self, pos: int) -> int:
        return bisect.bisect_left(self._newlines, pos) + 1

    def peek(self, count: int = 1) -> str:
        return self.text[self.pos:self.pos + count]

    def record(self, path: KeyPath, line: int) -> None:
        """`path` is defined at `line`; its ancestors exist from there on, if not before."""
        self.explicit[path] = line
        for end in range(1, len(path)):
            self.implicit.setdefault(path[:end], line)

    # -- whitespace and comments

    def spaces(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t":
            self.pos += 1

    def blank(self) -> None:
        """Skip spaces, newlines and comments."""
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch in " \t\r\n":
                self.pos += 1
            elif ch == "#":
                end = self.text.find("\n", self.pos)
                self.pos = len(self.text) if end < 0 else end
            else:
                return

    def expect(self, token: str) -> None:
        if not self.text.startswith(token, self.pos):
            raise _ScanError(f"expected {token!r} at {self.pos}")
        self.pos += len(token)

    # -- statements

    def document(self) -> None:
        table: KeyPath = ()
        arrays: dict[KeyPath, int] = {}
        while True:
            self.blank()
            if self.pos >= len(self.text):
                return
            line = self.line_at(self.pos)
            if self.peek(2) == "[[":
                self.pos += 2
                name: KeyPath = tuple(self.key())
                self.spaces()
                self.expect("]]")
                index = arrays.get(name, -1) + 1
                arrays[name] = index
                self.implicit.setdefault(name, line)
                table = (*name, index)
                self.record(table, line)
            elif self.peek() == "[":
                self.pos += 1
                table = tuple(self.key())
                self.spaces()
                self.expect("]")
                self.record(table, line)
            else:
                self.key_value(table)

    def key_value(self, table: KeyPath) -> None:
        line = self.line_at(self.pos)
        path: KeyPath = (*table, *self.key())
        self.spaces()
        self.expect("=")
        self.record(path, line)
        self.spaces()
        self.value(path)

    def key(self) -> list[str]:
        parts: list[str] = []
        while True:
            self.spaces()
            ch = self.peek()
            if ch == '"':
                parts.append(self.basic_string())
            elif ch == "'":
                parts.append(self.literal_string())
            else:
                match = _BARE_KEY.match(self.text, self.pos)
                if match is None:
                    raise _ScanError(f"expected a key at {self.pos}")
                parts.append(match.group())
                self.pos = match.end()
            self.spaces()
            if self.peek() != ".":
                return parts
            self.pos += 1

    # -- values

    def value(self, path: KeyPath) -> None:
        ch = self.peek()
        if ch == '"':
            self.basic_string()
        elif ch == "'":
            self.literal_string()
        elif ch == "[":
            self.array(path)
        elif ch == "{":
            self.inline_table(path)
        else:
            match = _SCALAR_END.search(self.text, self.pos)
            end = len(self.text) if match is None else match.start()
            if end == self.pos:
                raise _ScanError(f"expected a value at {self.pos}")
            self.pos = end

    def array(self, path: KeyPath) -> None:
        self.expect("[")
        index = 0
        while True:
            self.blank()
            if self.peek() == "]":
                self.pos += 1
                return
            self.record((*path, index), self.line_at(self.pos))
            self.value((*path, index))
            index += 1
            self.blank()
            if self.peek() == ",":
                self.pos += 1
            elif self.peek() != "]":
                raise _ScanError(f"expected ',' or ']' at {self.pos}")

    def inline_table(self, path: KeyPath) -> None:
        self.expect("{")
        while True:
            self.blank()
            if self.peek() == "}":
                self.pos += 1
                return
            self.key_value(path)
            self.blank()
            if self.peek() == ",":
                self.pos += 1
            elif self.peek() != "}":
                raise _ScanError(f"expected ',' or '}}' at {self.pos}")

    # -- strings

    def basic_string(self) -> str:
        if self.peek(3) == '"""':
            self.pos += 3
            self._multiline_end('"', escapes=True)
            return ""
        self.pos += 1
        out: list[str] = []
        while True:
            ch = self.text[self.pos]
            if ch == '"':
                self.pos += 1
                return "".join(out)
            if ch == "\n":
                raise _ScanError("newline in a string")
            if ch == "\\":
                out.append(self._escape())
                continue
            out.append(ch)
            self.pos += 1

    def _escape(self) -> str:
        code = self.text[self.pos + 1]
        if code in _ESCAPES:
            self.pos += 2
            return _ESCAPES[code]
        width = {"u": 4, "U": 8}.get(code)
        if width is None:
            raise _ScanError(f"bad escape at {self.pos}")
        digits = self.text[self.pos + 2:self.pos + 2 + width]
        self.pos += 2 + width
        try:
            return chr(int(digits, 16))
        except ValueError:
            raise _ScanError(f"bad escape at {self.pos}") from None

    def literal_string(self) -> str:
        if self.peek(3) == "'''":
            self.pos += 3
            self._multiline_end("'", escapes=False)
            return ""
        end = self.text.find("'", self.pos + 1)
        newline = self.text.find("\n", self.pos + 1)
        if end < 0 or 0 <= newline < end:
            raise _ScanError("unterminated literal string")
        value = self.text[self.pos + 1:end]
        self.pos = end + 1
        return value

    def _multiline_end(self, quote: str, *, escapes: bool) -> None:
        """Move past the closing triple quote (which may be preceded by up to two quotes)."""
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if escapes and ch == "\\":
                self.pos += 2
                continue
            if ch == quote and self.peek(3) == quote * 3:
                run = 3
                while run < 5 and self.text[self.pos + run:self.pos + run + 1] == quote:
                    run += 1
                self.pos += run
                return
            self.pos += 1
        raise _ScanError("unterminated multi-line string")

"""ralph.toml -> Config: defaults, every section, and errors that name the key and the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from ralph.config import (
    CONFIG_FILE,
    AgentConfig,
    Config,
    ConfigError,
    FilesConfig,
    GatesConfig,
    GitConfig,
    JudgeConfig,
    LoopConfig,
    ReviewConfig,
    config_schema,
    describe_value,
    expand_argv,
    format_key,
    load_config,
    parse_config,
)
from ralph.errors import RalphError


def error_of(text: str, source: str = CONFIG_FILE) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, source)
    message = str(caught.value)
    assert "\n" not in message, message
    return caught.value


# -- defaults and valid files


def test_defaults_match_the_documented_values() -> None:
    config = Config()
    assert config.files == FilesConfig(
        prd="PRD.md", progress="progress.md", agents="AGENTS.md", prompt="PROMPT_build.md",
        plan="PROMPT_plan.md", general="PROMPT.md", judge="PROMPT_judge.md",
        review="PROMPT_review.md", feedback="FEEDBACK.md")
    assert config.loop.model_dump() == {
        "max_iterations": 20, "no_progress_limit": 3, "max_attempts_per_task": 3,
        "rate_limit_per_hour": 0, "rate_limit_max_wait_seconds": 3600,
        "rate_limit_max_retries": 10, "agent_timeout_seconds": 1800, "default_agent": "codex",
        "context_chars": 60000, "progress_tail_chars": 8000, "notes_chars": 4000,
        "silence_warning_seconds": 120, "max_cost_usd": None, "max_tokens": None}
    assert config.agents == {}
    assert config.gates == GatesConfig(commands=[], timeout_seconds=900)
    assert config.judge == JudgeConfig(enabled=False, agent=None, prompt=None)
    assert config.review == ReviewConfig(enabled=False, agent=None, prompt=None)
    assert config.git == GitConfig(auto_commit=True, branch=None,
                                   commit_message="ralph: {task_id} {title}")


def test_an_empty_file_is_the_defaults() -> None:
    assert parse_config("") == Config()
    assert parse_config("# only a comment\n\n") == Config()


def test_a_file_with_only_one_agent_loads() -> None:
    config = parse_config('[agents.x]\nargv = ["my-agent", "{prompt}"]\n')
    assert config.agents == {"x": AgentConfig(argv=["my-agent", "{prompt}"])}
    assert config.loop == LoopConfig(default_agent="x")  # the only agent is the default
    agent = config.agent("x")
    assert agent.adapter == "command"
    assert agent.argv == ("my-agent", "{prompt}")
    assert agent.timeout_seconds == 1800
    assert not agent.prompt_via_stdin


EVERY_SECTION = """\
[files]
prd = "docs/prd.json"
progress = "notes/progress.md"
agents = "MEMORY.md"
prompt = "prompts/build.md"
plan = "prompts/plan.md"
general = "prompts/general.md"
judge = "prompts/judge.md"
review = "prompts/review.md"
feedback = "notes/feedback.md"

[loop]
max_iterations = 50
no_progress_limit = 5
max_attempts_per_task = 2
rate_limit_per_hour = 30
rate_limit_max_wait_seconds = 120
agent_timeout_seconds = 600
default_agent = "mine"
context_chars = 1000
progress_tail_chars = 0

[agents.mine]
argv = ["mine", "--file", "{prompt_file}"]
env = { MINE_TOKEN_FILE = "/dev/null", MODE = "fast" }
model = "big-1"
timeout_seconds = 60

[agents.claude]
adapter = "claude"
model = "opus"

[gates]
commands = ["pytest -q", "ruff check ."]
timeout_seconds = 30

[judge]
enabled = true
agent = "claude"
prompt = "prompts/strict-judge.md"

[review]
enabled = true
agent = "mine"

[git]
auto_commit = false
branch = "ralph/work"
commit_message = "[{iteration}] {task_id}: {title}"
"""


def test_every_section_and_key_is_read() -> None:
    config = parse_config(EVERY_SECTION)
    assert config.files.prd == "docs/prd.json"
    assert config.files.general == "prompts/general.md"
    assert config.files.feedback == "notes/feedback.md"
    assert config.loop == LoopConfig(
        max_iterations=50, no_progress_limit=5, max_attempts_per_task=2,
        rate_limit_per_hour=30, rate_limit_max_wait_seconds=120, agent_timeout_seconds=600,
        default_agent="mine", context_chars=1000, progress_tail_chars=0)
    assert config.agents["mine"] == AgentConfig(
        argv=["mine", "--file", "{prompt_file}"], env={"MINE_TOKEN_FILE": "/dev/null",
                                                      "MODE": "fast"},
        model="big-1", timeout_seconds=60)
    assert config.gates == GatesConfig(commands=["pytest -q", "ruff check ."],
                                       timeout_seconds=30)
    assert config.judge == JudgeConfig(enabled=True, agent="claude",
                                       prompt="prompts/strict-judge.md")
    assert config.review == ReviewConfig(enabled=True, agent="mine")
    assert config.git == GitConfig(auto_commit=False, branch="ralph/work",
                                   commit_message="[{iteration}] {task_id}: {title}")
    assert config.judge_prompt == "prompts/strict-judge.md"
    assert config.review_prompt == "prompts/review.md"  # unset: files.review
    assert config.git.format_commit_message(task_id="3", title="Add x", iteration=7) == \
        "[7] 3: Add x"


def test_judge_and_review_prompts_default_to_the_files_section() -> None:
    config = parse_config('[files]\njudge = "J.md"\nreview = "R.md"\n')
    assert (config.judge_prompt, config.review_prompt) == ("J.md", "R.md")


def test_dotted_keys_at_top_level() -> None:
    config = parse_config('loop.max_iterations = 5\nagents.x.argv = ["x"]\n'
                          'agents.x.env.A = "1"\n')
    assert config.loop.max_iterations == 5
    assert config.agents["x"] == AgentConfig(argv=["x"], env={"A": "1"})


def test_quoted_agent_names() -> None:
    config = parse_config('[agents."my.agent"]\nargv = ["a"]\n\n'
                          "[agents.'with space']\nargv = ['b']\n")
    assert set(config.agents) == {"my.agent", "with space"}
    assert config.agent("my.agent").argv == ("a",)
    assert config.agent("with space").adapter == "command"


# -- agents


def test_a_known_adapter_works_without_a_section() -> None:
    config = Config()
    for name in ("codex", "claude", "gemini", "opencode"):
        agent = config.agent(name)
        assert (agent.name, agent.adapter, agent.argv, dict(agent.env), agent.model,
                agent.timeout_seconds) == (name, name, (), {}, None, 1800)
        assert agent.prompt_via_stdin


def test_adapter_resolution() -> None:
    config = parse_config("""
[loop]
agent_timeout_seconds = 100
[agents.claude]
model = "sonnet"
[agents.fast-claude]
adapter = "claude"
timeout_seconds = 5
[agents.codex]
adapter = "command"
argv = ["codex-wrapper"]
[agents.tool]
argv = ["tool", "--stdin"]
""")
    assert (config.agent("claude").adapter, config.agent("claude").model) == ("claude", "sonnet")
    assert config.agent("claude").timeout_seconds == 100
    assert config.agent("fast-claude").adapter == "claude"
    assert config.agent("fast-claude").timeout_seconds == 5
    assert config.agent("codex").adapter == "command"
    assert config.agent("codex").argv == ("codex-wrapper",)
    assert config.agent("tool").adapter == "command"
    assert config.agent("tool").prompt_via_stdin
    assert config.agent("gemini").adapter == "gemini"  # still works without a section


def test_an_unknown_agent_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config('[agents.x]\nargv = ["x"]\n').agent("nobody")
    assert str(caught.value) == \
        "unknown agent 'nobody': define [agents.nobody] in ralph.toml"
    assert isinstance(caught.value, RalphError)
    config = parse_config('[agents."my.bot2"]\nargv = ["b"]\n')
    with pytest.raises(ConfigError, match=r"define \[agents\.\"my\.bot\"\].*did you mean"):
        config.agent("my.bot")
    with pytest.raises(ConfigError, match=r"did you mean 'codex'\?"):
        Config().agent("codx")
    with pytest.raises(ConfigError, match="unknown agent 'command'"):
        Config().agent("command")  # the command adapter has no default program


def test_an_agent_named_elsewhere_must_exist() -> None:
    error = error_of('[loop]\ndefault_agent = "codx"\n')
    assert str(error).startswith(
        "ralph.toml:2: loop.default_agent: unknown agent 'codx': define [agents.codx]")
    assert str(error).endswith("did you mean 'codex'?")
    error = error_of('[agents.x]\nargv = ["x"]\n\n[review]\nenabled = true\nagent = "y"\n')
    assert str(error).startswith("ralph.toml:6: review.agent: unknown agent 'y'")
    assert parse_config('[judge]\nagent = "gemini"\n').judge.agent == "gemini"


def test_a_command_agent_needs_an_argv() -> None:
    error = error_of('[loop]\nmax_iterations = 3\n\n[agents.mine]\nmodel = "m"\n')
    assert str(error) == ("ralph.toml:4: agents.mine.argv: the command adapter needs argv "
                          "(the program and its arguments)")
    assert str(error_of('[agents.mine]\nadapter = "command"\nargv = []\n')).startswith(
        "ralph.toml:3: agents.mine.argv:")


def test_unknown_argv_placeholder_is_named() -> None:
    error = error_of('[agents.x]\nargv = [\n  "x",\n  "--in={promt}",\n]\n')
    assert str(error) == ("ralph.toml:4: agents.x.argv[1]: unknown placeholder {promt} "
                          "(use {prompt} or {prompt_file}); did you mean '{prompt}'?")
    assert "{model}" in str(error_of('[agents.x]\nargv = ["x", "{model}"]\n'))


def test_braces_that_are_not_placeholders_are_text() -> None:
    config = parse_config("""[agents.x]
argv = ["x", '--json={"a": 1}', "{}", "${ prompt }", "pre-{prompt}-post", "{prompt_file}"]
""")
    agent = config.agent("x")
    assert not agent.prompt_via_stdin
    assert agent.command(prompt="P", prompt_file=Path("/tmp/p.md")) == \
        ["x", '--json={"a": 1}', "{}", "${ prompt }", "pre-P-post", "/tmp/p.md"]


def test_expand_argv_replaces_only_the_two_placeholders() -> None:
    assert expand_argv(["a", "{prompt}", "{prompt_file}", "{other}"], prompt="{prompt_file}",
                       prompt_file="f") == ["a", "{prompt_file}", "f", "{other}"]


def test_the_default_agent_is_the_sole_agent_only_when_left_out() -> None:
    two = parse_config('[agents.x]\nargv = ["a"]\n[agents.y]\nargv = ["b"]\n')
    assert two.loop.default_agent == "codex"
    named = parse_config('[loop]\ndefault_agent = "claude"\n[agents.x]\nargv = ["a"]\n')
    assert named.loop.default_agent == "claude"
    assert parse_config("").loop.default_agent == "codex"


@pytest.mark.parametrize("template", ["ralph: {title:d}", "{iteration:s}", "{task_id:>x}"])
def test_a_commit_message_format_spec_that_does_not_fit_is_an_error(template: str) -> None:
    error = error_of(f'[git]\ncommit_message = "{template}"\n')
    assert str(error).startswith("ralph.toml:2: git.commit_message: invalid template:")


@pytest.mark.parametrize("command", ["", "  ", "\\t"])
def test_a_blank_gate_command_is_an_error(command: str) -> None:
    error = error_of(f'[gates]\ncommands = ["pytest -q", "{command}"]\n')
    assert str(error) == ("ralph.toml:2: gates.commands[1]: a gate command must not be blank "
                          "(it would always pass)")


def test_commit_message_placeholders_are_checked() -> None:
    error = error_of('[git]\ncommit_message = "{task} done"\n')
    assert str(error) == ("ralph.toml:2: git.commit_message: unknown placeholder {task} "
                          "(use {task_id}, {title}, {iteration})")
    error = error_of('[git]\n\ncommit_message = "fix {task_id"\n')
    assert str(error).startswith("ralph.toml:3: git.commit_message: invalid template:")
    config = parse_config('[git]\ncommit_message = "{{ralph}} {title}"\n')
    assert config.git.format_commit_message(task_id="1", title="T", iteration=1) == "{ralph} T"


# -- unknown keys


def test_unknown_key_in_a_section_names_key_line_and_suggestion() -> None:
    text = "[files]\nprd = 'PRD.md'\n\n[loop]\n# how many\n\nmax_iteration = 10\n"
    error = error_of(text)
    assert str(error) == ("ralph.toml:7: unknown key 'loop.max_iteration'; "
                          "did you mean 'max_iterations'?")
    assert [(p.key, p.line) for p in error.problems] == [("loop.max_iteration", 7)]


def test_unknown_top_level_key_and_table() -> None:
    assert str(error_of('[lop]\nmax_iterations = 1\n')) == \
        "ralph.toml:1: unknown key 'lop'; did you mean 'loop'?"
    assert str(error_of('x = 1\n[gates]\n')) == "ralph.toml:1: unknown key 'x'"
    assert str(error_of('[gates]\ncommands = []\n\n[gate]\n')) == \
        "ralph.toml:4: unknown key 'gate'; did you mean 'gates'?"


def test_unknown_key_in_an_agent_table() -> None:
    text = '[agents.codex]\nargv = []\n\n[agents."my.agent"]\nargv = ["a"]\nenvv = {}\n'
    assert str(error_of(text)) == \
        "ralph.toml:6: unknown key 'agents.\"my.agent\".envv'; did you mean 'env'?"


def test_unknown_dotted_key_and_inline_table_key() -> None:
    text = 'loop.max_iterations = 5\nloop.no_progress = 2\n'
    assert str(error_of(text)) == ("ralph.toml:2: unknown key 'loop.no_progress'; "
                                   "did you mean 'no_progress_limit'?")
    text = 'agents = { x = { argv = ["x"],\n  modle = "m" } }\n'
    # inline tables are one line in TOML 1.0; tomllib rejects the newline
    assert "invalid TOML" in str(error_of(text))
    text = 'judge = { enabled = true, agnt = "claude" }\n'
    assert str(error_of(text)) == "ralph.toml:1: unknown key 'judge.agnt'; did you mean 'agent'?"


def test_several_problems_report_the_first_by_line_and_count_the_rest() -> None:
    text = ('[git]\nauto_commit = "yes"\n\n[loop]\nmax_iterations = 0\n'
            'bogus = 1\n\n[gates]\ntimeout_seconds = -1\n')
    error = error_of(text)
    assert str(error) == ("ralph.toml:2: git.auto_commit: expected a boolean (true or false), "
                          "got 'yes' (and 3 more)")
    assert [(p.key, p.line) for p in error.problems] == [
        ("git.auto_commit", 2), ("loop.max_iterations", 5), ("loop.bogus", 6),
        ("gates.timeout_seconds", 9)]
    assert error.problems[1].message == "loop.max_iterations: must be >= 1, got 0"
    assert error.problems[3].message == "gates.timeout_seconds: must be > 0, got -1"


# -- wrong types


@pytest.mark.parametrize(("text", "expected"), [
    ('[files]\nprd = "PRD.md"\nprogress = 3\n',
     "ralph.toml:3: files.progress: expected a string, got 3"),
    ("[loop]\n\nmax_iterations = 'ten'\n",
     "ralph.toml:3: loop.max_iterations: expected an integer, got 'ten'"),
    ('[loop]\nmax_iterations = "10"\n',
     "ralph.toml:2: loop.max_iterations: expected an integer, got '10'"),
    ("[loop]\ncontext_chars = 1.5e4\n",
     "ralph.toml:2: loop.context_chars: expected an integer, got 15000.0"),
    ("[loop]\ncontext_chars = 999\n",
     "ralph.toml:2: loop.context_chars: must be >= 1000, got 999"),
    ("[loop]\nrate_limit_per_hour = -1\n",
     "ralph.toml:2: loop.rate_limit_per_hour: must be >= 0, got -1"),
    ("[loop]\nmax_iterations = true\n",
     "ralph.toml:2: loop.max_iterations: expected an integer, got true"),
    ('[loop]\ndefault_agent = ""\n', "ralph.toml:2: loop.default_agent: must not be empty"),
    ('[gates]\ncommands = "pytest"\n', "ralph.toml:2: gates.commands: expected an array, "
                                      "got 'pytest'"),
    ('[gates]\ncommands = [\n  "pytest",\n  ["ruff"],\n]\n',
     "ralph.toml:4: gates.commands[1]: expected a string, got an array"),
    ('[judge]\nenabled = 1\n',
     "ralph.toml:2: judge.enabled: expected a boolean (true or false), got 1"),
    ('[agents.x]\nadapter = "cursor"\nargv = ["x"]\n',
     "ralph.toml:2: agents.x.adapter: expected one of codex, claude, gemini, opencode, "
     "command, got 'cursor'"),
    ('[agents.x]\nargv = ["x"]\nenv = { A = "1", B = 2 }\n',
     "ralph.toml:3: agents.x.env.B: expected a string, got 2"),
    ('[agents.x]\nargv = ["x"]\ntimeout_seconds = 0\n',
     "ralph.toml:3: agents.x.timeout_seconds: must be > 0, got 0"),
    ('[agents]\nx = "codex"\n', "ralph.toml:2: agents.x: expected a table, got 'codex'"),
    ('loop = 5\n', "ralph.toml:1: loop: expected a table, got 5"),
    ('[git]\nbranch = 2024-01-01\n', "ralph.toml:2: git.branch: expected a string, got a date"),
])
def test_wrong_type_names_key_line_and_value(text: str, expected: str) -> None:
    assert str(error_of(text)) == expected


def test_a_long_string_value_is_shortened() -> None:
    message = str(error_of(f"[loop]\nmax_iterations = '{'x' * 100}'\n"))
    assert message.endswith("got 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...'")
    assert describe_value("a\nb") == "'a\\nb'"


# -- syntax and files


def test_toml_syntax_error_keeps_tomllib_position() -> None:
    error = error_of('[loop]\nmax_iterations = = 3\n', source="proj/ralph.toml")
    message = str(error)
    assert message.startswith("proj/ralph.toml:2: invalid TOML: ")
    assert "(at line 2, column" in message


def test_duplicate_key_is_a_syntax_error() -> None:
    assert str(error_of("[loop]\nmax_iterations = 1\nmax_iterations = 2\n")).startswith(
        "ralph.toml:3: invalid TOML:")


def test_load_config_reads_ralph_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ralph.toml").write_text("[loop]\nmax_iterations = 7\n")
    assert load_config(tmp_path).loop.max_iterations == 7
    (tmp_path / "ralph.toml").write_text("[loop]\nmax_iterations = 'x'\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"^ralph\.toml:2: loop\.max_iterations: "):
        load_config(tmp_path)
    monkeypatch.chdir("/")
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path)
    assert str(caught.value).startswith(f"{tmp_path}/ralph.toml:2: ")


def test_a_missing_file_is_an_error_unless_not_required(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path)
    assert str(caught.value) == f"no ralph.toml in {tmp_path}: run `ralph init` to create one"
    assert load_config(tmp_path, required=False) == Config()


def test_unreadable_and_undecodable_files(tmp_path: Path) -> None:
    (tmp_path / "ralph.toml").mkdir()
    with pytest.raises(ConfigError, match=r"cannot read .*ralph\.toml: Is a directory"):
        load_config(tmp_path, required=False)
    (tmp_path / "ralph.toml").rmdir()
    (tmp_path / "ralph.toml").write_bytes(b"[loop]\n# caf\xe9\n")
    with pytest.raises(ConfigError, match=r"ralph\.toml:2: not valid UTF-8 \(byte offset 12\)"):
        load_config(tmp_path)


# -- schema and helpers


def test_config_schema_describes_every_section() -> None:
    schema = config_schema()
    assert set(schema["properties"]) == {"files", "loop", "agents", "gates", "judge", "review",
                                         "git", "approvals", "workflow", "prices"}
    loop = schema["$defs"]["LoopConfig"]
    assert loop["additionalProperties"] is False
    assert loop["properties"]["max_iterations"]["default"] == 20
    assert loop["properties"]["max_iterations"]["minimum"] == 1
    assert "budget" in loop["properties"]["context_chars"]["description"]
    adapter = schema["$defs"]["AgentConfig"]["properties"]["adapter"]
    assert {"codex", "claude", "gemini", "opencode", "command"} <= {
        value for option in adapter["anyOf"] for value in option.get("enum", [])}
    general = schema["$defs"]["FilesConfig"]["properties"]["general"]
    assert general["default"] == "PROMPT.md"
    assert "[DOCS]" in general["description"]
    approvals = schema["$defs"]["ApprovalsConfig"]["properties"]
    assert approvals["timeout_seconds"]["default"] == 600
    assert "tools that only read" in approvals["allow"]["description"]


def test_approval_rules_are_checked_when_loaded(tmp_path: Path) -> None:
    (tmp_path / "ralph.toml").write_text('[approvals]\nallow = ["Bash(git status*)"]\n'
                                         'deny = ["Bash()"]\n')
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path)
    assert "approvals.deny[0]" in str(caught.value)
    assert "the parentheses are empty" in str(caught.value)


def test_format_key_quotes_what_toml_would() -> None:
    assert format_key(("loop", "max_iterations")) == "loop.max_iterations"
    assert format_key(("agents", "my.agent", "env")) == 'agents."my.agent".env'
    assert format_key(("agents", "a b", "argv", 2)) == 'agents."a b".argv[2]'
    assert format_key(("agents", 'q"x')) == 'agents."q\\"x"'


def test_models_are_immutable() -> None:
    config = Config()
    with pytest.raises(ValueError, match="frozen"):
        config.loop.max_iterations = 3  # type: ignore[misc]


def test_the_workflow_roles_and_their_limits() -> None:
    config = parse_config('[agents.x]\nargv = ["x"]\n\n[workflow]\nmax_qa_cycles = 1\n\n'
                          '[workflow.roles.reviewer]\nagent = "claude"\nprompt = "R.md"\n')
    assert config.workflow.max_qa_cycles == 1 and config.workflow.max_task_attempts == 3
    assert config.role_agent("reviewer") == "claude" and config.role_prompt("reviewer") == "R.md"
    assert config.role_agent("executor") == "x"  # loop.default_agent: the sole agent
    assert config.role_prompt("planner") == "PROMPT_planner.md"
    error = error_of('[workflow.roles.executor]\nagent = "codx"\n')
    assert str(error).startswith(
        "ralph.toml:2: workflow.roles.executor.agent: unknown agent 'codx'")
    assert str(error_of('[workflow.roles.judge]\nagent = "claude"\n')) == (
        "ralph.toml:1: unknown key 'workflow.roles.judge'")
    assert str(error_of('[workflow]\nmax_task_attempts = 0\n')).startswith(
        "ralph.toml:2: workflow.max_task_attempts:")

"""A quick start: what each command imports, and the Typer-free paths answering as Typer does.

No timing here (benchmarks/cli_bench.py measures it): these tests guard the laziness that
makes `ralph` start fast, by the modules a command leaves in `sys.modules`, and check that
the paths taken without Typer (`--version`, ralph.cli.fastpath) give the same output and exit
code as Typer gives for the same command line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from ralph.cli import fastpath, notes_cmd, status_view
from ralph.cli.app import app
from ralph.cli.fastpath import FORMS, parse_options, plain_command
from tests.cli.helpers import RALPH, TIMEOUT, Cli, Result
from tests.cli.test_tasks_cli import PRD, STATE, project

# Runs `ralph ARGS` as the console script does, then writes the names of the modules it
# imported to the file named by $RALPH_PROBE_OUT.
PROBE = """\
import sys
from ralph.cli.main import run
code = run(sys.argv[1:])
import json, os
with open(os.environ["RALPH_PROBE_OUT"], "w") as out:
    json.dump(sorted(sys.modules), out)
sys.exit(code)
"""

# What each kind of command must not import (a package stands for its submodules too).
HEAVY_FOR_VERSION = {"typer", "rich", "pydantic", "pydantic_core", "orjson", "ralph.config",
                     "ralph.cli.commands"}
NO_TYPER = {"typer", "ralph.cli.commands", "ralph.cli.app"}
NO_LOOP_MACHINERY = {"asyncio", "sqlite3", "watchfiles", "ralph.agents", "ralph.store",
                     "ralph.loop.service", "ralph.git", "ralph.proc"}


def imported(args: list[str], cwd: Path, tmp_path: Path) -> tuple[int, set[str]]:
    """`ralph ARGS` in a child process: its exit code and the modules it imported."""
    out = tmp_path / "modules.json"
    env = {**os.environ, "RALPH_PROBE_OUT": str(out)}
    env.pop("_RALPH_COMPLETE", None)
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=cwd, env=env,
                          capture_output=True, timeout=TIMEOUT, check=False)
    assert out.exists(), proc.stderr.decode()
    return proc.returncode, set(json.loads(out.read_text()))


def loaded(modules: set[str], names: set[str]) -> set[str]:
    """The `names` (packages or modules) of which something is in `modules`."""
    return {name for name in names
            if any(m == name or m.startswith(name + ".") for m in modules)}


@pytest.fixture
def tasks_project(tmp_path: Path) -> Path:
    return project(tmp_path / "proj", state=STATE)


def test_version_imports_neither_typer_nor_rich_nor_pydantic(tmp_path: Path) -> None:
    code, modules = imported(["--version"], tmp_path, tmp_path)
    assert code == 0
    assert loaded(modules, HEAVY_FOR_VERSION) == set()


@pytest.mark.parametrize("args", [["status", "--json"], ["tasks", "--json"]],
                         ids=" ".join)
def test_json_reports_import_neither_typer_rich_nor_the_loop(tasks_project: Path,
                                                             tmp_path: Path,
                                                             args: list[str]) -> None:
    code, modules = imported(args, tasks_project, tmp_path)
    assert code == 0
    assert loaded(modules, NO_TYPER | NO_LOOP_MACHINERY | {"rich"}) == set()


@pytest.mark.parametrize("args", [["status"], ["tasks"]], ids=" ".join)
def test_text_reports_import_no_typer_and_tasks_no_rich_console(
        tasks_project: Path, tmp_path: Path, args: list[str]) -> None:
    code, modules = imported(args, tasks_project, tmp_path)
    assert code == 0
    assert ("rich.console" in modules) == (args == ["status"])  # tasks: ralph.cli.texttable
    assert loaded(modules, NO_TYPER | NO_LOOP_MACHINERY) == set()


@pytest.mark.parametrize("args", [["status", "--json"], ["tasks", "--json"], ["status"],
                                  ["tasks"]], ids=" ".join)
def test_reports_validate_a_ralph_toml_once_then_read_it_without_pydantic(
        tasks_project: Path, tmp_path: Path, args: list[str]) -> None:
    first_code, first = imported(args, tasks_project, tmp_path)
    code, second = imported(args, tasks_project, tmp_path)
    assert first_code == code == 0
    assert loaded(first, {"pydantic", "ralph.config"}) == {"pydantic", "ralph.config"}
    assert loaded(second, {"pydantic", "ralph.config"}) == set()
    toml = tasks_project / "ralph.toml"
    stat = toml.stat()
    toml.write_bytes(toml.read_bytes() + b"#")  # changed, same mtime: validated again
    os.utime(toml, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    code, third = imported(args, tasks_project, tmp_path)
    assert code == 0 and "pydantic" in third


@pytest.mark.parametrize("args", [["notes", "list"], ["notes", "list", "--json"]],
                         ids=" ".join)
def test_notes_list_imports_neither_typer_nor_pydantic_nor_subscriptions(
        tmp_path: Path, args: list[str]) -> None:
    store = tmp_path / "store"
    assert subprocess.run([sys.executable, "-m", "ralph", "notes", "add", "--type", "learning",
                           "a note", "--store", str(store)], capture_output=True,
                          timeout=TIMEOUT, check=False).returncode == 0
    code, modules = imported([*args, "--store", str(store)], tmp_path, tmp_path)
    assert code == 0
    unwanted = NO_TYPER | {"pydantic", "asyncio", "watchfiles", "ralph.config", "ralph.loop",
                           "rich.console"}
    assert loaded(modules, unwanted) == set()


def test_help_imports_no_command_implementation(tmp_path: Path) -> None:
    code, modules = imported(["--help"], tmp_path, tmp_path)
    assert code == 0
    assert "typer" in modules
    unwanted = {"pydantic", "rich", "asyncio", "sqlite3", "ralph.config", "ralph.loop",
                "ralph.agents", "ralph.scaffold", "ralph.bridge"}
    assert loaded(modules, unwanted) == set()


def test_a_command_through_typer_loads_only_its_own_module(tmp_path: Path) -> None:
    code, modules = imported(["log", "--help"], tmp_path, tmp_path)
    assert code == 0
    assert "ralph.cli.log_cmd" in modules
    others = {"ralph.cli.demo", "ralph.cli.store_cmd", "ralph.cli.loop_cmd",
              "ralph.cli.bridge_cmd", "ralph.cli.doctor_cmd", "ralph.cli.notes_cmd"}
    assert loaded(modules, others) == set()


# -- the Typer-free paths give what Typer gives


def through_typer(cli: Cli, monkeypatch: pytest.MonkeyPatch, *args: str) -> Result:
    with monkeypatch.context() as patch:
        patch.setattr(fastpath, "plain_command", lambda args: None)
        return cli(*args)


def test_version_alone_prints_what_typers_version_option_prints(cli: Cli) -> None:
    alone = cli("--version")
    assert alone.code == 0 and alone.err == ""
    assert alone.out == f"ralph {__import__('ralph').__version__}\n"
    assert cli("--version", "status") == alone  # Typer's eager option


SUSPICIOUS_PRD = PRD + "\n## Backlog\n\n- [ ] Dark mode\n"


@pytest.mark.parametrize("args", [
    ["status"], ["status", "--json"], ["status", "--json", "--root", "{root}"],
    ["status", "--root", "{root}", "--json"], ["status", "--root", "{missing}"],
    ["status", "--root", "{damaged}", "--json"],
    ["tasks"], ["tasks", "--json"], ["tasks", "--root", "{root}"],
    ["tasks", "--root", "{warnings}"], ["tasks", "--root", "{warnings}", "--json"],
    ["tasks", "--root", "{unreadable}"], ["tasks", "--root", "{missing}", "--json"],
    ["notes", "list"], ["notes", "list", "--json"], ["notes", "list", "--type", "learning"],
    ["notes", "list", "--name", "other", "--json"], ["notes", "list", "--type", "decision"],
    ["notes", "list", "--store", "{missing}"],
], ids=" ".join)
def test_the_fast_path_answers_as_typer_does(cli: Cli, monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path, args: list[str]) -> None:
    root = project(tmp_path / "proj", state=STATE)
    paths = {"root": root, "missing": tmp_path / "missing",
             "warnings": project(tmp_path / "warn", SUSPICIOUS_PRD),
             "unreadable": project(tmp_path / "unreadable", "# no tasks here\n"),
             "damaged": project(tmp_path / "damaged")}
    (paths["damaged"] / ".ralph").mkdir()
    (paths["damaged"] / ".ralph" / "state.json").write_text("{not json")
    monkeypatch.chdir(root)
    monkeypatch.setenv("RALPH_STORE", str(tmp_path / "store"))
    for note_type, text, name in (("learning", "use [bold]", "default"),
                                  ("decision", "keep \x1b[31m out", "default"),
                                  ("learning", "other's", "other")):
        assert cli("notes", "add", "--type", note_type, text, "--name", name).code == 0
    argv = [arg.format(**paths) for arg in args]
    assert plain_command(argv) is not None
    fast = cli(*argv)
    assert fast == through_typer(cli, monkeypatch, *argv)
    assert fast.out or fast.err


@pytest.mark.parametrize("error", [KeyboardInterrupt, EOFError])
def test_an_interrupted_fast_command_ends_as_under_typer(
        cli: Cli, monkeypatch: pytest.MonkeyPatch, error: type[BaseException]) -> None:
    def interrupted(json: bool, root: Path | None) -> None:
        raise error

    monkeypatch.setattr(status_view, "show_status", interrupted)
    fast = cli("status", "--json")
    assert fast == through_typer(cli, monkeypatch, "status", "--json")
    assert fast.code == 130


@pytest.mark.parametrize("args", [["tasks"], ["tasks", "--json"], ["status"],
                                  ["tasks", "--root=."]], ids=" ".join)
def test_a_reader_gone_away_is_not_an_error(tasks_project: Path, args: list[str]) -> None:
    """`ralph tasks | head -1` without Typer too: Rich and a plain write both meet the closed
    pipe (Rich by calling sys.exit(1) itself); exit 0, nothing on stderr."""
    proc = subprocess.Popen([*RALPH, *args], cwd=tasks_project, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    assert proc.stdout is not None
    proc.stdout.close()  # before the command writes anything
    _, err = proc.communicate(timeout=TIMEOUT)
    assert (proc.returncode, err) == (0, b"")


def test_forms_take_exactly_the_options_of_their_typer_commands() -> None:
    root = typer.main.get_command(app)
    for words, form in FORMS.items():
        command = root
        for word in words:
            command = command.commands[word]  # type: ignore[attr-defined]
        params = [p for p in command.params if p.param_type_name == "option"]
        assert [p for p in command.params if p.param_type_name == "argument"] == [], words
        flags = {opt for p in params if p.is_flag for opt in p.opts}  # type: ignore[attr-defined]
        values = {opt for p in params if not p.is_flag  # type: ignore[attr-defined]
                  for opt in p.opts}
        assert all(len(p.opts) == 1 and not p.secondary_opts for p in params), words
        assert (flags, values) == (set(form.flags), set(form.values)), words
    note_types = FORMS[("notes", "list")].choices["--type"]()
    assert [choice.value for choice in notes_cmd.NoteTypeChoice] == list(note_types)


STATUS = FORMS[("status",)]


@pytest.mark.parametrize(("args", "expected"), [
    ([], {}),
    (["--json"], {"--json": True}),
    (["--root", "p", "--json"], {"--root": "p", "--json": True}),
    (["--json", "--root", "p"], {"--json": True, "--root": "p"}),
    (["--json", "--json"], None),
    (["--root", "a", "--root", "b"], None),
    (["--root"], None),
    (["--root", ""], None),
    (["--root", "--json"], None),
    (["--root=p"], None),
    (["--help"], None),
    (["-h"], None),
    (["--bogus"], None),
    (["extra"], None),
    (["--", "--json"], None),
])
def test_parse_options_takes_only_plain_forms(args: list[str],
                                              expected: dict[str, object] | None) -> None:
    assert parse_options(args, STATUS) == expected


def test_choices_and_completion_are_left_to_typer(monkeypatch: pytest.MonkeyPatch) -> None:
    assert plain_command(["notes", "list", "--type", "learning"]) is not None
    assert plain_command(["notes", "list", "--type", "Learning"]) is None
    assert plain_command(["notes", "add", "x", "--type", "learning"]) is None
    assert plain_command(["notes"]) is None
    assert plain_command(["status", "--json"]) is not None
    monkeypatch.setenv("_RALPH_COMPLETE", "bash_complete")
    assert plain_command(["status", "--json"]) is None

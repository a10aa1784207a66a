"""The `ralph` command itself: version, help, entry points, exit codes, where the store is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ralph import __version__
from ralph.store import Store
from tests.cli.helpers import RALPH, TIMEOUT, Cli, assert_error, run_ralph

STORE_VERBS = ["append", "cat", "last", "get", "cas", "sync", "rebuild", "stats", "errors", "gc",
               "copy"]
CONSOLE_SCRIPT = Path(sys.executable).parent / "ralph"


def test_version_in_process(cli: Cli) -> None:
    result = cli("--version")
    assert result.code == 0
    assert result.out == f"ralph {__version__}\n"
    assert result.err == ""


def test_version_of_the_module_and_the_console_script() -> None:
    assert run_ralph("--version").out == f"ralph {__version__}\n"
    proc = subprocess.run([str(CONSOLE_SCRIPT), "--version"], capture_output=True,
                          stdin=subprocess.DEVNULL, timeout=TIMEOUT, check=False)
    assert proc.returncode == 0
    assert proc.stdout.decode() == f"ralph {__version__}\n"
    assert proc.stderr == b""


def test_console_script_exit_codes(tmp_path: Path) -> None:
    def code(*args: str) -> int:
        return subprocess.run([str(CONSOLE_SCRIPT), *args, "--store", str(tmp_path / "s")],
                              capture_output=True, stdin=subprocess.DEVNULL, timeout=TIMEOUT,
                              check=False).returncode

    assert code("store", "stats") == 0
    assert code("store", "append", "1bad") == 1
    assert code("store", "last", "t", "0") == 2


def test_help(cli: Cli) -> None:
    result = cli("--help")
    assert result.code == 0
    assert result.err == ""
    assert "Usage: ralph" in result.out
    for word in ("--version", "store", "notes", "demo"):
        assert word in result.out


def test_store_help_lists_every_verb(cli: Cli) -> None:
    result = cli("store", "--help")
    assert result.code == 0
    commands = result.out.split("Commands:", 1)[1]
    listed = [line.split()[0] for line in commands.splitlines() if line.startswith("  ")]
    assert sorted(listed) == sorted(STORE_VERBS)


@pytest.mark.parametrize(("args", "words"), [
    (["store", "append"], ["topic", "--meta", "--stream", "--store"]),
    (["store", "cat"], ["--topic", "--stream", "--after", "--limit", "--follow", "--store"]),
    (["store", "last"], ["topic", "[n]"]),
    (["store", "get"], ["id"]),
    (["store", "cas"], ["hash"]),
    (["store", "gc"], ["--policy", "--dry-run"]),
    (["notes", "add"], ["text", "--type", "--name", "--iteration", "completed", "decision"]),
    (["notes", "list"], ["--type", "--name", "--json"]),
    (["notes"], ["add", "list"]),
    (["demo"], ["--dir", "--cleanup", "--quiet"]),
])
def test_command_help(cli: Cli, args: list[str], words: list[str]) -> None:
    result = cli(*args, "--help")
    assert result.code == 0
    assert result.err == ""
    for word in words:
        assert word in result.out.lower(), word


@pytest.mark.parametrize("group", [[], ["store"], ["notes"]])
def test_group_without_a_command_shows_its_help(cli: Cli, group: list[str]) -> None:
    result = cli(*group)
    assert result.code == 2
    assert result.out == ""
    assert result.err.startswith(f"Usage: {' '.join(['ralph', *group])} ")
    assert "Commands:" in result.err
    assert not any(line.startswith("error") for line in result.err.splitlines())


def test_python_dash_m_with_no_arguments() -> None:
    result = run_ralph()
    assert result.code == 2
    assert result.out == ""
    assert "Usage: ralph" in result.err
    assert "Traceback" not in result.err


def test_unknown_command_and_missing_argument_are_usage_errors(cli: Cli) -> None:
    for args, words in [(["frobnicate"], ["no such command", "frobnicate"]),
                        (["store", "frobnicate"], ["no such command", "frobnicate"]),
                        (["store", "get"], ["missing argument", "ID"]),
                        (["notes", "add", "x"], ["missing option", "--type"])]:
        result = cli(*args)
        assert result.code == 2
        assert_error(result, *words)


def test_run_returns_the_exit_code(cli: Cli, tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    assert cli("store", "stats", "--store", store).code == 0
    assert cli("store", "append", "a..b", "--store", store).code == 1
    assert cli("store", "cat", "--after", "x", "--store", store).code == 2


def test_closed_pipe_is_not_an_error(tmp_path: Path) -> None:
    """`ralph store cat | head -1`: the reader goes away early; exit 0, nothing on stderr."""
    store = tmp_path / "s"
    with Store(store) as opened:
        for n in range(3000):  # far more than a pipe buffer holds
            opened.append("bulk.frame", {"n": n, "pad": "x" * 100})
    proc = subprocess.Popen([*RALPH, "store", "cat", "--store", str(store)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith(b'{"id":')
        proc.stdout.close()
        _, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=TIMEOUT)
    assert proc.returncode == 0
    assert err == b""


# -- where the store is -----------------------------------------------------------------------


def _frame_count(store: Path) -> int:
    return sum(len(p.read_bytes().splitlines()) for p in (store / "streams").rglob("*.jsonl"))


@pytest.fixture
def no_env_store(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RALPH_STORE", raising=False)


def test_store_flag_wins_over_the_environment(cli: Cli, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RALPH_STORE", str(tmp_path / "env"))
    assert cli("store", "append", "t", "--store", str(tmp_path / "flag")).code == 0
    assert _frame_count(tmp_path / "flag") == 1
    assert not (tmp_path / "env").exists()


def test_environment_wins_over_the_project(cli: Cli, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ralph.toml").write_text("")
    monkeypatch.setenv("RALPH_STORE", str(tmp_path / "env"))
    assert cli("store", "append", "t").code == 0
    assert _frame_count(tmp_path / "env") == 1
    assert not (tmp_path / ".ralph").exists()


@pytest.mark.usefixtures("no_env_store")
@pytest.mark.parametrize("marker", ["ralph.toml", ".ralph", ".git"])
def test_default_store_is_under_the_project_root(cli: Cli, tmp_path: Path, marker: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "project"
    deep = root / "src" / "pkg"
    deep.mkdir(parents=True)
    if marker == "ralph.toml":
        (root / marker).write_text("")
    else:
        (root / marker).mkdir()
    monkeypatch.chdir(deep)
    written = cli("store", "append", "t")
    assert written.code == 0, written
    assert _frame_count(root / ".ralph" / "store") == 1
    assert not (deep / ".ralph").exists()
    assert cli("store", "cat").frames() == written.frames()


@pytest.mark.usefixtures("no_env_store")
def test_ralph_marker_is_nearer_than_the_git_root(cli: Cli, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".git").mkdir()
    sub = tmp_path / "sub"
    (sub / "deeper").mkdir(parents=True)
    (sub / "ralph.toml").write_text("")
    monkeypatch.chdir(sub / "deeper")
    assert cli("store", "append", "t").code == 0
    assert _frame_count(sub / ".ralph" / "store") == 1
    assert not (tmp_path / ".ralph").exists()


@pytest.mark.usefixtures("no_env_store")
def test_default_store_without_a_project_is_under_the_cwd(cli: Cli, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    here = tmp_path / "plain"
    here.mkdir()
    monkeypatch.chdir(here)
    assert cli("notes", "add", "--type", "learning", "where am I").code == 0
    assert _frame_count(here / ".ralph" / "store") == 1


def test_empty_environment_variable_means_unset(cli: Cli, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RALPH_STORE", "")
    (tmp_path / "ralph.toml").write_text("")
    assert cli("store", "append", "t").code == 0
    assert _frame_count(tmp_path / ".ralph" / "store") == 1


def test_child_process_uses_the_environment_store(tmp_path: Path) -> None:
    env_store = tmp_path / "child-env"
    env = {**os.environ, "RALPH_STORE": str(env_store)}
    result = run_ralph("store", "append", "t", env=env)
    assert result.code == 0, result
    listed = run_ralph("store", "cat", "--store", str(env_store))
    assert listed.frames() == result.frames()

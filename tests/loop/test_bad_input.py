"""Every bad input of the loop issue, through the CLI: one clear `error:` line and a nonzero
exit, no traceback, nothing on stdout, and no half-written state (state.json, the PRD, git HEAD
and the tree as they were; no active run or in-flight iteration left; the lock released)."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ralph.loop import state as state_module
from ralph.loop.lock import ProjectLock
from tests.loop.conftest import THREE_TASKS, Project
from tests.loop.test_cli_loop import Result, in_process, ralph_cli

Restore = Callable[[], None] | None
Setup = Callable[[Project], tuple[tuple[str, ...], Restore]]
MISSING_PROGRAMS = ("codex", "no-such-agent-binary")


# -- environment and snapshots ---------------------------------------------------------------------


def cli_env(project: Project) -> dict[str, str]:
    """The environment of every `ralph` here: git never looks above the scratch directory and
    no agent CLI these cases need missing is on PATH."""
    env = {k: v for k, v in os.environ.items() if k != "RALPH_DEBUG"}
    env["GIT_CEILING_DIRECTORIES"] = str(project.root.parent)
    env["PATH"] = os.pathsep.join(
        d for d in env.get("PATH", "").split(os.pathsep)
        if d and not any(os.path.exists(os.path.join(d, p)) for p in MISSING_PROGRAMS))
    return env




def ralph(project: Project, *args: str) -> Result:
    return ralph_cli(project.root, *args, env=cli_env(project))


def git_out(project: Project, *args: str) -> str | None:
    proc = subprocess.run(["git", *args], cwd=project.root, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL, env=cli_env(project),
                          check=False)
    return proc.stdout if proc.returncode == 0 else None


def _read(path: Path) -> bytes | str | None:
    if path.is_file():
        return path.read_bytes()
    return "<dir>" if path.is_dir() else None


def snapshot(project: Project) -> dict[str, Any]:
    """What a failed command must leave as it was."""
    root = project.root
    dot = root / ".ralph"
    if dot.is_dir():
        runtime: Any = sorted(
            str(p.relative_to(dot)) for p in dot.rglob("*")
            # the store, the lock, and the validated ralph.toml kept (ralph.configcache)
            if p.relative_to(dot).parts[0] not in ("store", "loop.lock", "cache"))
    else:
        runtime = _read(dot)
    return {
        "state.json": _read(dot / "state.json"),
        ".ralph": runtime,
        "PRD.md": _read(root / "PRD.md"),
        "progress.md": _read(root / "progress.md"),
        "ralph.toml": _read(root / "ralph.toml"),
        "HEAD": git_out(project, "rev-parse", "--verify", "-q", "HEAD"),
        "tree": git_out(project, "status", "--porcelain", "--untracked-files=all"),
    }


def assert_one_error(result: Result, *words: str, code: int = 2) -> str:
    """Exit `code`, nothing on stdout, no traceback, and stderr holding exactly one `error:`
    line naming the problem (every word, case-insensitively) besides `warning:` lines."""
    assert result.code == code, result
    assert result.out == "", result
    assert "Traceback" not in result.err, result.err
    lines = [line for line in result.err.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1, result.err
    others = [line for line in lines if not line.startswith(("error: ", "warning: "))]
    assert others == [], result.err
    assert "unexpected" not in errors[0], errors[0]
    for word in words:
        assert word.lower() in errors[0].lower(), (word, errors[0])
    return errors[0]


def assert_no_run_left(project: Project) -> None:
    state_path = project.root / ".ralph" / "state.json"
    if state_path.is_file():
        state = json.loads(state_path.read_text() or "{}")
        assert state.get("active_run") is None, state
        assert state.get("in_flight") is None, state


def assert_idle(project: Project) -> None:
    status = ralph(project, "status", "--json")
    assert status.code == 0, status
    body = status.json()
    assert (body["running"], body["paused"], body["activeRunId"]) == (False, False, None)
    text = ralph(project, "status")
    assert text.code == 0 and "loop idle" in text.out, text


# -- the cases -------------------------------------------------------------------------------------


def fake_argv(project: Project) -> list[str]:
    return [sys.executable, "-m", "ralph.testing.fake_agent", "--plan", str(project.plan_path)]


def write_toml(project: Project, text: str) -> None:
    (project.root / "ralph.toml").write_text(text)


def line_of(text: str, needle: str) -> int:
    return text[:text.index(needle)].count("\n") + 1


def toml_with(project: Project, *, loop: str = 'default_agent = "fake"\nmax_iterations = 10\n',
              extra: str = "") -> str:
    return (f"[loop]\n{loop}\n[agents.fake]\nargv = {json.dumps(fake_argv(project))}\n"
            f"timeout_seconds = 60\n{extra}")


def restore_config(project: Project) -> Restore:
    return project.config


def bad_toml(text_of: Callable[[Project], str], needle: str,
             *words: str) -> Setup:
    def setup(project: Project) -> tuple[tuple[str, ...], Restore]:
        text = text_of(project)
        write_toml(project, text)
        return (f"ralph.toml:{line_of(text, needle)}:", *words), restore_config(project)
    return setup


def missing_toml(project: Project) -> tuple[tuple[str, ...], Restore]:
    (project.root / "ralph.toml").unlink()
    return ("no ralph.toml", "ralph init"), restore_config(project)


def prd_case(text: str, *words: str) -> Setup:
    def setup(project: Project) -> tuple[tuple[str, ...], Restore]:
        project.prd(text)
        project.commit("bad prd")
        return (words, lambda: project.prd(THREE_TASKS))
    return setup


def missing_prd(project: Project) -> tuple[tuple[str, ...], Restore]:
    (project.root / "PRD.md").unlink()
    project.commit("no prd")
    return ("PRD.md", "no such file"), lambda: project.prd(THREE_TASKS)


def no_words(*words: str) -> Setup:
    def setup(project: Project) -> tuple[tuple[str, ...], Restore]:
        return words, None
    return setup


def agent_binary_missing(project: Project) -> tuple[tuple[str, ...], Restore]:
    write_toml(project, toml_with(project, extra='\n[agents.x]\nargv = ["no-such-agent-binary", '
                                                 '"--flag"]\n'))
    project.commit("agent x")
    return ("'x'", "no-such-agent-binary", "not found on PATH"), None


def codex_by_default(project: Project) -> tuple[tuple[str, ...], Restore]:
    write_toml(project, toml_with(project, loop='default_agent = "codex"\n'))
    project.commit("codex")
    return ("codex", "not found on PATH", "npm install -g @openai/codex"), None


def ralph_dir_is_a_file(project: Project) -> tuple[tuple[str, ...], Restore]:
    dot = project.root / ".ralph"
    saved = project.root.parent / "ralph-dir.saved"
    dot.rename(saved)
    dot.write_text("not a directory\n")

    def restore() -> None:
        dot.unlink()
        saved.rename(dot)
    return (".ralph", "not a directory"), restore


def state_json_is_a_directory(project: Project) -> tuple[tuple[str, ...], Restore]:
    state = project.root / ".ralph" / "state.json"
    saved = state.read_bytes()
    state.unlink()
    (state / "x").mkdir(parents=True)

    def restore() -> None:
        shutil.rmtree(state)
        state.write_bytes(saved)
    return ("state.json", "is a directory"), restore


def runtime_dir_is_a_file(name: str, *words: str) -> Setup:
    def setup(project: Project) -> tuple[tuple[str, ...], Restore]:
        path = project.root / ".ralph" / name
        shutil.rmtree(path)
        path.write_text("in the way\n")

        def restore() -> None:
            path.unlink()
            path.mkdir()
        return words, restore
    return setup


def not_a_git_repository(project: Project) -> tuple[tuple[str, ...], Restore]:
    shutil.rmtree(project.root / ".git")
    return ("not a git repository", "git init"), None


def dirty_tree(project: Project) -> tuple[tuple[str, ...], Restore]:
    (project.root / "scratch.txt").write_text("work in progress\n")
    with (project.root / "AGENTS.md").open("a") as handle:
        handle.write("\nan uncommitted edit\n")
    return ("uncommitted changes", "--require-clean"), None


def missing_prompt_file(project: Project) -> tuple[tuple[str, ...], Restore]:
    prompt = project.root / "PROMPT_build.md"
    saved = prompt.read_bytes()
    prompt.unlink()
    project.commit("no prompt file")

    def restore() -> None:
        prompt.write_bytes(saved)
        project.commit("prompt file back")
    return ("PROMPT_build.md", "missing"), restore


@dataclass(frozen=True)
class Case:
    id: str
    setup: Setup
    args: tuple[str, ...] = ()
    commands: tuple[str, ...] = ("step", "run")
    status_fails: bool = False  # `ralph status` meets the same problem
    prd_error: bool = False  # `ralph status` reports it as its prd_error (exit 0)
    midway: bool = False  # met inside an iteration, after it started: run with --quiet
    code: int = 2


CASES = [
    Case("missing-ralph-toml", missing_toml, status_fails=True),
    Case("unknown-key", bad_toml(
        lambda p: toml_with(p, loop='default_agent = "fake"\nmax_iterations = 10\n'
                                    "max_iteration = 5\n"),
        "max_iteration = 5", "unknown key", "loop.max_iteration'", "max_iterations"),
        status_fails=True),
    Case("unknown-section", bad_toml(
        lambda p: toml_with(p, extra="\n[gate]\ncommands = []\n"), "[gate]",
        "unknown key", "'gate'"), status_fails=True),
    Case("wrong-type", bad_toml(
        lambda p: toml_with(p, loop='default_agent = "fake"\n\nmax_iterations = "ten"\n'),
        'max_iterations = "ten"', "loop.max_iterations", "integer", "'ten'"),
        status_fails=True),
    Case("wrong-type-array", bad_toml(
        lambda p: toml_with(p, extra='\n[gates]\ncommands = "pytest -q"\n'),
        'commands = "pytest -q"', "gates.commands", "array"), status_fails=True),
    Case("wrong-type-bool", bad_toml(
        lambda p: toml_with(p, extra='\n[git]\nauto_commit = "yes"\n'),
        'auto_commit = "yes"', "git.auto_commit", "boolean"), status_fails=True),
    Case("invalid-toml", bad_toml(
        lambda p: toml_with(p, loop='default_agent = "fake"\nmax_iterations = = 3\n'),
        "max_iterations = = 3", "invalid TOML"), status_fails=True),
    Case("unknown-default-agent", bad_toml(
        lambda p: toml_with(p, loop='default_agent = "nope"\n'),
        'default_agent = "nope"', "loop.default_agent", "nope"), status_fails=True),
    Case("prd-without-tasks", prd_case("# Project\n\n## Tasks\n\n", "PRD.md", "no tasks"),
         prd_error=True),
    Case("prd-without-tasks-section", prd_case("# Project\n\nJust prose.\n", "PRD.md",
                                               "no tasks"), prd_error=True),
    Case("missing-prd", missing_prd, prd_error=True),
    Case("dependency-cycle", prd_case(
        "# P\n\n## Tasks\n\n- [ ] 1. A\n  - Depends on: 3\n- [ ] 2. B\n  - Depends on: 1\n"
        "- [ ] 3. C\n  - Depends on: 2\n", "PRD.md", "dependency cycle", "1 -> 3 -> 2 -> 1"),
        prd_error=True),
    Case("unknown-dependency", prd_case(
        "# P\n\n## Tasks\n\n- [ ] 1. A\n  - Depends on: 9\n", "PRD.md", "unknown task '9'"),
        prd_error=True),
    Case("unknown-agent", no_words("unknown agent 'nope'", "[agents.nope]"),
         args=("--agent", "nope")),
    Case("agent-binary-not-on-path", agent_binary_missing, args=("--agent", "x")),
    Case("codex-not-on-path", no_words("agent 'codex'", "codex not found on PATH",
                                       "npm install -g @openai/codex"),
         args=("--agent", "codex")),
    Case("codex-default-not-on-path", codex_by_default),
    Case("ralph-dir-is-a-file", ralph_dir_is_a_file, status_fails=True),
    Case("state-json-is-a-directory", state_json_is_a_directory, status_fails=True),
    Case("not-a-git-repository", not_a_git_repository),
    Case("require-clean-with-a-dirty-tree", dirty_tree, args=("--require-clean",)),
    Case("max-iterations-zero", no_words("--max-iterations", "greater than or equal to 1"),
         args=("--max-iterations", "0"), commands=("run",)),
    Case("missing-prompt-file", missing_prompt_file, midway=True),
    Case("logs-dir-is-a-file", runtime_dir_is_a_file("logs", "log"), midway=True),
    Case("context-dir-is-a-file", runtime_dir_is_a_file("context", "context"), midway=True),
]


def _params(cases: list[Case]) -> list[Any]:
    return [pytest.param(case, command, id=f"{command}-{case.id}")
            for case in cases for command in case.commands]


# -- through a child process, as a user types it ---------------------------------------------------


@pytest.mark.parametrize(("case", "command"), _params(CASES))
def test_bad_input(project: Project, case: Case, command: str) -> None:
    project.plan({"default": {"tick": True, "write": {"out.txt": "x"}}})
    words, restore = case.setup(project)
    before = snapshot(project)
    flags = ("--quiet",) if case.midway else ()
    result = ralph(project, command, *flags, *case.args)
    assert_one_error(result, *words, code=case.code)
    after = snapshot(project)
    if case.midway:
        # the iteration had begun: its own records may stay, nothing else
        for key in ("PRD.md", "progress.md", "HEAD", "tree", "ralph.toml"):
            assert after[key] == before[key], key
    else:
        assert after == before
    assert_no_run_left(project)
    if restore is not None:
        restore()
    assert_idle(project)
    if case.midway:
        nxt = ralph(project, "step", "--quiet")
        assert "interrupted" not in nxt.err, nxt.err  # nothing was left in flight


@pytest.mark.parametrize("case", [c for c in CASES if c.status_fails], ids=lambda c: c.id)
def test_bad_input_status(project: Project, case: Case) -> None:
    words, _restore = case.setup(project)
    before = snapshot(project)
    assert_one_error(ralph(project, "status"), *words, code=1)
    assert_one_error(ralph(project, "status", "--json"), *words, code=1)
    assert snapshot(project) == before


@pytest.mark.parametrize("case", [c for c in CASES if c.prd_error], ids=lambda c: c.id)
def test_bad_prd_status(project: Project, case: Case) -> None:
    """An editor opens any folder: status answers, with no task and the PRD's problem."""
    words, _restore = case.setup(project)
    before = snapshot(project)
    result = ralph(project, "status", "--json")
    assert result.code == 0 and result.err == "", result
    body = result.json()
    assert (body["done"], body["total"], body["next"], body["blocked"]) == (0, 0, None, [])
    assert "\n" not in body["prd_error"]
    for word in words:
        assert word.lower() in body["prd_error"].lower(), (word, body["prd_error"])
    text = ralph(project, "status")
    assert text.code == 0 and text.err == "", text
    assert text.out.splitlines()[1] == f"the PRD cannot be read: {body['prd_error']}"
    assert snapshot(project) == before


def test_no_traceback_even_with_json(project: Project) -> None:
    (project.root / "ralph.toml").write_text("[loop]\nmax_iterations = 0\n")
    for command in ("step", "run", "status"):
        result = ralph(project, command, "--json")
        assert_one_error(result, "ralph.toml:2:", "loop.max_iterations", ">= 1",
                         code=1 if command == "status" else 2)


# -- in this process: the lock is released, whatever failed ----------------------------------------


@pytest.fixture
def inproc(project: Project, capfd: pytest.CaptureFixture[str],
           monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Result]]:
    monkeypatch.chdir(project.root)
    for key, value in cli_env(project).items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("RALPH_DEBUG", raising=False)
    with in_process(capfd) as invoke:
        yield invoke


def _lock_is_free(project: Project) -> bool:
    lock = ProjectLock(project.root / ".ralph" / "loop.lock")
    try:
        return lock.try_acquire()
    finally:
        lock.release()


@pytest.mark.parametrize(("case", "command"), _params([c for c in CASES if not c.midway]))
def test_bad_input_in_process_releases_the_lock(project: Project, case: Case, command: str,
                                                inproc: Callable[..., Result]) -> None:
    words, restore = case.setup(project)
    before = snapshot(project)
    result = inproc(command, *case.args)
    assert_one_error(result, *words, code=case.code)
    assert snapshot(project) == before
    if restore is not None:
        restore()
    assert _lock_is_free(project)  # flock: even this process could not take a leaked one
    status = inproc("status", "--json")
    assert status.code == 0, status
    assert status.json()["running"] is False and status.json()["activeRunId"] is None


def test_midway_failure_in_process_releases_the_lock(project: Project,
                                                     inproc: Callable[..., Result]) -> None:
    _words, restore = missing_prompt_file(project)
    result = inproc("step", "--quiet")
    assert result.code == 2
    assert _lock_is_free(project)
    assert restore is not None
    restore()
    assert inproc("status", "--json").json()["running"] is False


@pytest.mark.parametrize("command", ["step", "run"])
def test_state_json_cannot_be_written(project: Project, command: str,
                                      inproc: Callable[..., Result],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """An unwritable .ralph/ (as root, permissions do not stop writes: the write is made to
    fail): the first save of state.json is refused before anything else happened."""
    def refuse(path: Path, data: bytes, *, durable: bool = True) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    before = snapshot(project)
    with monkeypatch.context() as patched:
        patched.setattr(state_module, "atomic_write_bytes", refuse)
        result = inproc(command)
    assert_one_error(result, "state.json", "permission denied")
    assert snapshot(project) == before
    assert_no_run_left(project)
    assert _lock_is_free(project)
    assert ralph(project, "status", "--json").json()["running"] is False


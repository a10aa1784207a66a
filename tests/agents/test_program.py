"""An agent whose program cannot start is refused before a run, in one line naming the agent,
the path and the fix: not there, a directory, not executable, a format the kernel does not
run (no #! line, not an ELF binary), a #! line naming a missing interpreter."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from ralph.agents.base import AgentError
from ralph.agents.program import _binfmt_matches, check_program, exec_problem
from ralph.agents.runner import resolve_program
from ralph.config import parse_config

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the exec format is checked on Linux")


def refuse(argv0: str) -> str:
    agent = parse_config(f'[agents.mine]\nargv = ["{argv0}"]\n').agent("mine")
    with pytest.raises(AgentError) as info:
        resolve_program([argv0], agent, None)
    message = str(info.value)
    assert message.startswith("agent 'mine': ") and "\n" not in message
    return message


def script(path: Path, text: str, mode: int = 0o755) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def test_a_file_that_is_not_executable(tmp_path: Path) -> None:
    agent = script(tmp_path / "agent.sh", "#!/bin/sh\necho hi\n", 0o644)
    message = refuse(str(agent))
    assert f"{agent} is not executable: run `chmod +x {agent}`" in message


def test_a_file_on_path_that_is_not_executable_is_named(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    script(tmp_path / "my-agent", "#!/bin/sh\n", 0o644)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert f"{tmp_path / 'my-agent'} is not executable: run `chmod +x" in refuse("my-agent")


@linux_only
def test_a_file_with_no_shebang_and_no_elf_header(tmp_path: Path) -> None:
    agent = script(tmp_path / "agent", "echo hi\n")
    message = refuse(str(agent))
    assert f"{agent} cannot be executed (exec format error)" in message
    assert "#!/bin/sh" in message  # the fix


@linux_only
def test_an_empty_executable_file(tmp_path: Path) -> None:
    assert "exec format error" in refuse(str(script(tmp_path / "empty", "")))


def test_a_directory(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    assert f"{tmp_path / 'bin'} is a directory, not a program" in refuse(str(tmp_path / "bin"))


def test_a_path_that_does_not_exist(tmp_path: Path) -> None:
    assert refuse(str(tmp_path / "nope")) == f"agent 'mine': {tmp_path / 'nope'} does not exist"


@linux_only
def test_a_shebang_naming_a_missing_interpreter(tmp_path: Path) -> None:
    agent = script(tmp_path / "agent", "#!/no/such/python3 -u\nprint(1)\n")
    assert "names a missing interpreter in its #! line: /no/such/python3" in refuse(str(agent))


@linux_only
def test_a_script_with_windows_line_endings(tmp_path: Path) -> None:
    agent = script(tmp_path / "agent", "#!/bin/sh\r\necho hi\r\n")
    assert "has Windows line endings" in refuse(str(agent))


@pytest.mark.parametrize("text", ["#!/bin/sh\necho hi\n", "#! /usr/bin/env sh\necho hi\n"])
def test_scripts_and_binaries_that_run_pass(tmp_path: Path, text: str) -> None:
    assert exec_problem(str(script(tmp_path / "agent", text))) is None
    sh = shutil.which("sh")
    assert sh is not None and exec_problem(str(Path(sh).resolve())) is None  # an ELF binary
    assert check_program("sh") == check_program(sh)  # found on PATH, and runs


def test_not_on_path_keeps_its_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    check = check_program("codex", "npm install -g @openai/codex")
    assert check.path is None
    assert check.problem == "codex not found on PATH; install it with `npm install -g " \
                            "@openai/codex`"


def test_a_broken_symbolic_link(tmp_path: Path) -> None:
    (tmp_path / "agent").symlink_to(tmp_path / "gone")
    assert f"{tmp_path / 'agent'} is a broken symbolic link" in refuse(str(tmp_path / "agent"))


@pytest.mark.parametrize(("rule", "name", "head", "runs"), [
    # WSL runs Windows programs: "MZ" at offset 0
    ("enabled\ninterpreter /init\nflags: PF\noffset 0\nmagic 4d5a\n", "agent.exe", b"MZ\x90",
     True),
    ("enabled\ninterpreter /init\nflags: PF\noffset 0\nmagic 4d5a\n", "agent", b"echo hi",
     False),
    # qemu for aarch64 binaries: a magic under a mask
    ("enabled\ninterpreter /usr/bin/qemu-aarch64\nflags: F\noffset 0\n"
     "magic 7f454c460201010000000000000000000200b700\n"
     "mask ffffffffffffff00fffffffffffffffffeffffff\n", "agent",
     bytes.fromhex("7f454c460201010300000000000000000200b700"), True),
    ("enabled\ninterpreter /usr/bin/mono\nflags: \nextension .net\n", "tool.net", b"", True),
])
def test_binfmt_misc_handlers_are_matched_as_the_kernel_does(rule: str, name: str, head: bytes,
                                                             runs: bool) -> None:
    assert _binfmt_matches(rule, name, head) is runs

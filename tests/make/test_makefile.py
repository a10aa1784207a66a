"""The Makefile's installs: `make demo` installs Ralph alone, `make test` adds the dev tools,
and neither installs again what is already there (run on a copy with stand-in programs)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PIP = "python -m pip install --quiet --disable-pip-version-check"
RUNTIME = f"{PIP} -e ."
DEV = f"{PIP} -e .[dev]"
CHECKS = ["ruff check src tests benchmarks examples", "mypy",
          "pytest -q -n 2 --dist loadfile --junitxml=.venv/pytest-report.xml"]
STAND_INS = ("python", "ralph", "ruff", "mypy", "pytest")


class Checkout:
    """A copy of the Makefile whose .venv/bin programs only log how they were called."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.log = root / "calls.log"
        shutil.copy(REPO / "Makefile", root / "Makefile")
        (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
        agents = root / "tests" / "agents"
        (agents / "node_modules").mkdir(parents=True)
        for name in ("package.json", "package-lock.json"):
            (agents / name).write_text("{}")
        bin_dir = root / ".venv" / "bin"
        bin_dir.mkdir(parents=True)
        for name in STAND_INS:
            program = bin_dir / name
            program.write_text(f'#!/bin/sh\necho "{name} $*" >> "{self.log}"\n')
            program.chmod(0o755)
        # pytest writes its report when it gets to its end: so does its stand-in
        (bin_dir / "pytest").write_text(
            f'#!/bin/sh\necho "pytest $*" >> "{self.log}"\n'
            'for arg; do case $arg in --junitxml=*) echo "<testsuites/>" > "${arg#*=}";; '
            'esac; done\n')
        self.age(-100, "pyproject.toml", "tests/agents/package.json",
                 "tests/agents/package-lock.json")
        (agents / "node_modules" / ".installed").touch()  # the agent CLIs: installed

    def age(self, seconds: float, *names: str) -> None:
        """Set the files' times to `seconds` from now."""
        when = time.time() + seconds
        for name in names:
            os.utime(self.root / name, (when, when))

    def make(self, target: str) -> list[str]:
        """Run `make target`; the stand-ins' calls it made."""
        self.log.write_text("")
        # Not the flags of a `make test` this may run under (-j's jobserver, -n, ...).
        env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS",
                                                                  "MAKELEVEL",
                                                                  "PYTEST_WORKERS")}
        done = subprocess.run(["make", "--no-print-directory", target], cwd=self.root,
                              capture_output=True, text=True, timeout=60, env=env,
                              stdin=subprocess.DEVNULL, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        return [line.rstrip() for line in self.log.read_text().splitlines()]


@pytest.fixture
def checkout(tmp_path: Path) -> Checkout:
    return Checkout(tmp_path)


def test_unit_fails_when_pytest_ends_without_its_report(checkout: Checkout) -> None:
    """A test that ends the pytest process itself (os._exit(0) in code under test) must not
    pass the run half-done."""
    (checkout.root / ".venv" / "bin" / "pytest").write_text("#!/bin/sh\nexit 0\n")
    checkout.make("demo")  # installs nothing of the dev tools' yet: the stamps
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS",
                                                              "MAKELEVEL")}
    (checkout.root / ".venv" / ".installed-dev").touch()
    done = subprocess.run(["make", "--no-print-directory", "unit"], cwd=checkout.root,
                          capture_output=True, text=True, timeout=60, env=env,
                          stdin=subprocess.DEVNULL, check=False)
    assert done.returncode != 0
    assert "pytest ended before its end (no report)" in done.stderr


def test_demo_installs_ralph_without_the_dev_tools_then_test_adds_them(
        checkout: Checkout) -> None:
    assert checkout.make("demo") == [RUNTIME, "ralph demo"]
    assert checkout.make("demo") == ["ralph demo"]
    assert checkout.make("test") == [DEV, *CHECKS]
    assert checkout.make("test") == CHECKS
    assert checkout.make("demo") == ["ralph demo"]


def test_test_on_a_clean_clone_then_demo_installs_nothing_more(checkout: Checkout) -> None:
    assert checkout.make("test") == [DEV, *CHECKS]
    assert checkout.make("demo") == ["ralph demo"]
    assert checkout.make("lint") == CHECKS[:1]


def test_a_changed_pyproject_installs_again(checkout: Checkout) -> None:
    checkout.make("test")
    checkout.age(-60, ".venv/.installed-runtime", ".venv/.installed-dev")
    checkout.age(-50, "pyproject.toml")
    assert checkout.make("demo") == [RUNTIME, "ralph demo"]
    assert checkout.make("typecheck") == [DEV, "mypy"]
    assert checkout.make("demo") == ["ralph demo"]

"""The project's test command, found from its files: what `ralph init` proposes as a gate.

`detect_test_commands(root)` only reads files under `root` (nothing is run, nothing is looked
up on PATH), so the same checkout gives the same answer on every machine. Each rule needs a
file that really declares how the tests run; a file that cannot be read or parsed gives no
command and one warning, never an exception. The rules, in priority order (one command per
rule; the first is the proposal, the others are listed beside it):

1. make: the makefile GNU make would read (GNUmakefile, makefile, Makefile) has a rule for
   the `test` target that does something (a recipe or prerequisites): `make test`. First,
   because a project that ships `make test` has said how its suite runs, often with the
   set-up the other rules know nothing about (a virtualenv, a build, several languages).
2. Python: pytest configured (pytest.ini, .pytest.ini, [tool.pytest.ini_options] or
   [tool.pytest] in pyproject.toml, [pytest] in tox.ini, [tool:pytest] in setup.cfg), a
   conftest.py at the root, pytest in pyproject.toml's dependency lists, or a Python project
   (pyproject.toml, setup.py or setup.cfg) whose tests/ or test/ holds test_*.py or
   *_test.py files: `python3 -m pytest -q`, or `uv run` / `poetry run` / `pdm run pytest -q`
   when that tool's lock file is there.
3. Node: package.json has a `scripts.test` other than npm's placeholder (`echo "Error: no
   test specified" && exit 1`): `npm test`, or `pnpm test` / `yarn test` / `bun run test` by
   the `packageManager` field, else by the lock file.
4. Rust: Cargo.toml declares a [package] or a [workspace]: `cargo test`.
5. Go: go.mod: `go test ./...`.

Why `python3 -m pytest` rather than `pytest`: gates run through /bin/sh with Ralph's own
PATH, where a `pytest` script may be missing or belong to another interpreter than the one
that has the project's dependencies; `-m` runs pytest with the interpreter named, and also
puts the project root on sys.path so a package that is not installed still imports. And
`python3` rather than `python`: gates are POSIX shell commands, and on macOS and stock
Debian/Ubuntu only `python3` exists, while every virtualenv, conda env and pyenv has both.
"""

from __future__ import annotations

import configparser
import json
import os
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# What `npm init` (and `pnpm init`) writes as the test script: a test that always fails.
NPM_PLACEHOLDER = "no test specified"
# GNU make reads the first of these that exists (BSD make: makefile, Makefile).
MAKEFILES = ("GNUmakefile", "makefile", "Makefile")
TEST_DIRS = ("tests", "test")
_TEST_DIR_DEPTH = 4  # how deep below tests/ a test file is looked for
_WARNING_CHARS = 200


@dataclass(frozen=True)
class ProposedGate:
    """A test command and why it was chosen (`reason` completes "proposed because ...")."""

    command: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"command": self.command, "reason": self.reason}


@dataclass(frozen=True)
class Detection:
    """Every test command found, best first, and the files that could not be read."""

    found: tuple[ProposedGate, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def proposal(self) -> ProposedGate | None:
        """The command to propose: the first found, or None."""
        return self.found[0] if self.found else None

    @property
    def alternatives(self) -> tuple[ProposedGate, ...]:
        """The other commands found, in priority order."""
        return self.found[1:]


@dataclass
class _Files:
    """The project files read so far, each parsed once; what could not be read is warned."""

    root: Path
    warnings: list[str] = field(default_factory=list)
    _cache: dict[str, Any] = field(default_factory=dict)

    def is_file(self, name: str) -> bool:
        try:
            return (self.root / name).is_file()
        except OSError:
            return False

    def text(self, name: str) -> str | None:
        """The file's text; None when it is not a regular file or cannot be read (warned)."""
        key = f"text:{name}"
        if key not in self._cache:
            self._cache[key] = self._read(name)
        value: str | None = self._cache[key]
        return value

    def _read(self, name: str) -> str | None:
        if not self.is_file(name):  # absent, a directory, a FIFO that would block
            return None
        try:
            data = (self.root / name).read_bytes()
        except OSError as exc:
            self._warn(name, f"cannot be read ({exc.strerror or exc})")
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            self._warn(name, f"is not valid UTF-8 (byte offset {exc.start})")
            return None

    def parsed(self, name: str, kind: str, parse: Callable[[str], Any]) -> Any:
        """`parse(text)` of the file; None when absent or broken (warned: `kind` says how)."""
        key = f"parsed:{name}"
        if key not in self._cache:
            text = self.text(name)
            value = None
            if text is not None:
                try:
                    value = parse(text)
                except (ValueError, configparser.Error) as exc:
                    self._warn(name, f"is not valid {kind} ({exc})")
            self._cache[key] = value
        return self._cache[key]

    def toml(self, name: str) -> dict[str, Any] | None:
        value = self.parsed(name, "TOML", tomllib.loads)
        return value if isinstance(value, dict) else None

    def ini(self, name: str) -> configparser.RawConfigParser | None:
        value = self.parsed(name, "INI", _parse_ini)
        return value if isinstance(value, configparser.RawConfigParser) else None

    def _warn(self, name: str, problem: str) -> None:
        message = " ".join(f"{name} {problem}".split())
        if len(message) > _WARNING_CHARS:
            message = message[:_WARNING_CHARS - 3] + "..."
        self.warnings.append(f"{message}: no test command detected from it")


def _parse_ini(text: str) -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser(strict=False)
    parser.read_string(text)
    return parser


def detect_test_commands(root: Path) -> Detection:
    """The test commands the files under `root` declare, best first (see the module doc)."""
    files = _Files(root)
    found = [gate for rule in _RULES if (gate := rule(files)) is not None]
    return Detection(tuple(found), tuple(files.warnings))


def detect_test_command(root: Path) -> ProposedGate | None:
    """The test command to propose as a gate for the project at `root`, or None."""
    return detect_test_commands(root).proposal


# -- make


def _make(files: _Files) -> ProposedGate | None:
    name = next((name for name in MAKEFILES if files.is_file(name)), None)
    if name is None:
        return None
    text = files.text(name)
    if text is None or not makefile_has_target(text, "test"):
        return None
    return ProposedGate("make test", f"{name} has a test target")


_RULE = re.compile(r"^ *(?P<targets>[^\s:=#][^:=#]*?)\s*&?(?P<colons>::?)(?![:=])(?P<rest>.*)$")
_TARGET_VARIABLE = re.compile(
    r"^\s*(?:(?:export|override|private|unexport)\s+)*[^\s:=#]+\s*(?:\+|\?|!|:{1,3})?=")


def _logical_lines(text: str) -> list[str]:
    """The makefile's lines with backslash-newline continuations joined."""
    lines: list[str] = []
    pending = ""
    for line in text.splitlines():
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        lines.append(pending + line)
        pending = ""
    if pending:
        lines.append(pending)
    return lines


def makefile_has_target(text: str, target: str) -> bool:
    """Whether the makefile `text` has a rule for `target` that does something when made.

    A rule (`test:`, `test::`, `unit test: deps`) counts when it has a recipe (tab-indented
    lines after it, or `; command`) or prerequisites. `.PHONY: test` alone does not: `make
    test` would then do nothing and exit 0, a gate that always passes. Nor do variable
    assignments (`test := x`) or target-specific variables (`test: X = 1`).
    """
    lines = _logical_lines(text)
    in_define = 0
    for index, line in enumerate(lines):
        stripped = line.strip()
        if line.startswith("\t") or not stripped or stripped.startswith("#"):
            continue
        word = stripped.split(None, 1)[0]
        if word in ("define", "export", "override") and "define" in stripped.split()[:2]:
            in_define += 1
            continue
        if word == "endef":
            in_define = max(0, in_define - 1)
            continue
        if in_define:
            continue
        match = _RULE.match(line)
        if match is None or target not in match.group("targets").split():
            continue
        rest = match.group("rest")
        if _TARGET_VARIABLE.match(rest):
            continue
        prerequisites, _, inline = rest.partition(";")
        prerequisites = prerequisites.split("#", 1)[0].replace("|", " ")
        if prerequisites.strip() or inline.strip() or _recipe_follows(lines, index):
            return True
    return False


def _recipe_follows(lines: list[str], index: int) -> bool:
    for line in lines[index + 1:]:
        if line.startswith("\t"):
            if line.strip() and not line.strip().startswith("#"):
                return True
            continue
        if line.strip() and not line.strip().startswith("#"):
            return False
    return False


# -- Python


def _python(files: _Files) -> ProposedGate | None:
    reason = _pytest_reason(files)
    if reason is None:
        return None
    for lock, runner in (("uv.lock", "uv"), ("poetry.lock", "poetry"), ("pdm.lock", "pdm")):
        if files.is_file(lock):
            return ProposedGate(f"{runner} run pytest -q",
                                f"{reason}, and {lock} says the project runs through {runner}")
    return ProposedGate("python3 -m pytest -q", reason)


def _pytest_reason(files: _Files) -> str | None:
    # pytest's own order of configuration files
    for name in ("pytest.ini", ".pytest.ini"):
        if files.is_file(name):
            return f"{name} configures pytest"
    pyproject = files.toml("pyproject.toml")
    tool = _table(pyproject, "tool")
    if isinstance(tool.get("pytest"), dict):
        return "pyproject.toml configures pytest"
    tox = files.ini("tox.ini")
    if tox is not None and tox.has_section("pytest"):
        return "tox.ini configures pytest"
    setup_cfg = files.ini("setup.cfg")
    if setup_cfg is not None and setup_cfg.has_section("tool:pytest"):
        return "setup.cfg configures pytest"
    if files.is_file("conftest.py"):
        return "conftest.py configures pytest"
    if pyproject is not None and _pytest_is_a_dependency(pyproject):
        return "pyproject.toml lists pytest as a dependency"
    python_project = next((name for name, present in (
        ("pyproject.toml", pyproject is not None), ("setup.py", files.is_file("setup.py")),
        ("setup.cfg", setup_cfg is not None)) if present), None)
    if python_project is not None:
        for directory in TEST_DIRS:
            if _has_test_files(files.root / directory):
                return (f"{directory}/ holds test_*.py files of a Python project "
                        f"({python_project})")
    return None


def _table(value: Any, key: str) -> dict[str, Any]:
    item = value.get(key) if isinstance(value, dict) else None
    return item if isinstance(item, dict) else {}


_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _is_pytest(requirement: Any) -> bool:
    if not isinstance(requirement, str):
        return False
    match = _REQUIREMENT_NAME.match(requirement)
    return match is not None and re.sub(r"[-_.]+", "-", match.group(1)).lower() == "pytest"


def _pytest_is_a_dependency(pyproject: dict[str, Any]) -> bool:
    """pytest in [project] (optional-)dependencies, [dependency-groups], or poetry, uv, pdm's
    dev dependencies."""
    project = _table(pyproject, "project")
    lists: list[Any] = [project.get("dependencies")]
    lists += _table(project, "optional-dependencies").values()
    lists += _table(pyproject, "dependency-groups").values()
    tool = _table(pyproject, "tool")
    lists.append(_table(tool, "uv").get("dev-dependencies"))
    lists += _table(_table(tool, "pdm"), "dev-dependencies").values()
    requirements = [item for value in lists if isinstance(value, list) for item in value]
    poetry = _table(tool, "poetry")
    names: list[str] = list(_table(poetry, "dependencies"))
    names += _table(poetry, "dev-dependencies")
    for group in _table(poetry, "group").values():
        names += _table(group, "dependencies")
    return any(_is_pytest(item) for item in [*requirements, *names])


def _has_test_files(directory: Path) -> bool:
    """Whether `directory` (a few levels deep) holds a file pytest collects by default."""
    try:
        if not directory.is_dir():
            return False
        base_depth = len(directory.parts)
        for current, subdirs, names in os.walk(directory):
            if any(_is_test_file(name) for name in names):
                return True
            if len(Path(current).parts) - base_depth >= _TEST_DIR_DEPTH:
                subdirs.clear()
            else:
                subdirs[:] = sorted(d for d in subdirs
                                    if not d.startswith(".") and d != "__pycache__")
    except OSError:
        return False
    return False


def _is_test_file(name: str) -> bool:
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


# -- Node


_NODE_RUNNERS = {"npm": "npm test", "pnpm": "pnpm test", "yarn": "yarn test",
                 "bun": "bun run test"}  # `bun test` is bun's own runner, not the script
_NODE_LOCKS = (("pnpm-lock.yaml", "pnpm"), ("yarn.lock", "yarn"), ("bun.lock", "bun"),
               ("bun.lockb", "bun"), ("package-lock.json", "npm"),
               ("npm-shrinkwrap.json", "npm"))


def _node(files: _Files) -> ProposedGate | None:
    package = files.parsed("package.json", "JSON", json.loads)
    script = _table(package, "scripts").get("test")
    if not isinstance(script, str) or not script.strip() or NPM_PLACEHOLDER in script:
        return None
    reason = "package.json has a test script"
    manager = (package or {}).get("packageManager")
    if isinstance(manager, str):
        name = manager.split("@", 1)[0].strip()
        if name in _NODE_RUNNERS:
            return ProposedGate(_NODE_RUNNERS[name],
                                f"{reason}, and its packageManager is {name}")
    for lock, name in _NODE_LOCKS:
        if files.is_file(lock):
            suffix = "" if name == "npm" else f", and {lock} says the project uses {name}"
            return ProposedGate(_NODE_RUNNERS[name], reason + suffix)
    return ProposedGate("npm test", reason)


# -- Rust and Go


def _cargo(files: _Files) -> ProposedGate | None:
    manifest = files.toml("Cargo.toml")
    if manifest is None or not ({"package", "workspace"} & manifest.keys()):
        return None
    kind = "package" if "package" in manifest else "workspace"
    return ProposedGate("cargo test", f"Cargo.toml declares a Rust {kind}")


def _go(files: _Files) -> ProposedGate | None:
    if not files.is_file("go.mod"):
        return None
    return ProposedGate("go test ./...", "go.mod declares a Go module")


_RULES: tuple[Callable[[_Files], ProposedGate | None], ...] = (
    _make, _python, _node, _cargo, _go)

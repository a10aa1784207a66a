"""ralph.testcmd: the test command `ralph init` proposes as a gate, from the project's files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ralph.testcmd import (
    Detection,
    ProposedGate,
    detect_test_command,
    detect_test_commands,
    makefile_has_target,
)

NPM_DEFAULT = 'echo "Error: no test specified" && exit 1'


def write(root: Path, name: str, text: str | bytes) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def package_json(root: Path, scripts: dict[str, object] | None = None, **extra: object) -> None:
    data: dict[str, object] = {"name": "x", "version": "1.0.0", **extra}
    if scripts is not None:
        data["scripts"] = scripts
    write(root, "package.json", json.dumps(data, indent=2))


def commands(root: Path) -> list[str]:
    return [gate.command for gate in detect_test_commands(root).found]


# -- nothing


def test_an_empty_project_has_no_test_command(tmp_path: Path) -> None:
    assert detect_test_commands(tmp_path) == Detection()
    assert detect_test_command(tmp_path) is None
    assert Detection().proposal is None
    assert Detection().alternatives == ()


def test_unrelated_files_give_nothing(tmp_path: Path) -> None:
    write(tmp_path, "README.md", "# hi\n")
    write(tmp_path, "main.py", "print(1)\n")
    write(tmp_path, "tests/test_main.py", "def test(): pass\n")  # no Python project file
    write(tmp_path, "pyproject.toml", '[tool.ruff]\nline-length = 100\n')
    write(tmp_path, "setup.cfg", "[metadata]\nname = x\n")
    write(tmp_path, "tox.ini", "[tox]\nenvlist = py311\n")
    (tmp_path / "tests").rename(tmp_path / "spec")  # not a test directory pytest-style
    assert detect_test_commands(tmp_path) == Detection()


# -- Python


@pytest.mark.parametrize(("name", "text", "reason"), [
    ("pyproject.toml", '[tool.pytest.ini_options]\naddopts = "-q"\n',
     "pyproject.toml configures pytest"),
    ("pyproject.toml", '[tool.pytest]\nminversion = "9.0"\n',  # pytest 9's native table
     "pyproject.toml configures pytest"),
    ("pytest.ini", "", "pytest.ini configures pytest"),  # pytest uses it even when empty
    (".pytest.ini", "[pytest]\n", ".pytest.ini configures pytest"),
    ("setup.cfg", "[metadata]\nname = x\n\n[tool:pytest]\ntestpaths = tests\n",
     "setup.cfg configures pytest"),
    ("tox.ini", "[tox]\nenvlist = py311\n\n[pytest]\naddopts = -ra\n",
     "tox.ini configures pytest"),
    ("conftest.py", "import pytest\n", "conftest.py configures pytest"),
    ("pyproject.toml", '[project]\nname = "x"\n[project.optional-dependencies]\n'
                       'dev = ["ruff", "pytest>=8 ; python_version >= \'3.11\'"]\n',
     "pyproject.toml lists pytest as a dependency"),
    ("pyproject.toml", '[dependency-groups]\ntest = ["PyTest[testing]==8.*", '
                       '{include-group = "lint"}]\nlint = ["ruff"]\n',
     "pyproject.toml lists pytest as a dependency"),
    ("pyproject.toml", '[tool.poetry.group.dev.dependencies]\npytest = "^8.0"\n',
     "pyproject.toml lists pytest as a dependency"),
    ("pyproject.toml", '[tool.poetry.dev-dependencies]\npytest = "^7.0"\n',
     "pyproject.toml lists pytest as a dependency"),
    ("pyproject.toml", '[tool.uv]\ndev-dependencies = ["pytest"]\n',
     "pyproject.toml lists pytest as a dependency"),
])
def test_pytest_configured(tmp_path: Path, name: str, text: str, reason: str) -> None:
    write(tmp_path, name, text)
    assert detect_test_commands(tmp_path) == Detection(
        (ProposedGate("python3 -m pytest -q", reason),))


def test_a_pytest_plugin_alone_is_not_pytest(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", '[project]\nname = "x"\n'
                                      '[project.optional-dependencies]\ndev = ["pytest-cov"]\n')
    assert detect_test_command(tmp_path) is None


@pytest.mark.parametrize("project_file", ["pyproject.toml", "setup.py", "setup.cfg"])
@pytest.mark.parametrize("test_file", ["tests/test_app.py", "tests/unit/api/test_app.py",
                                       "test/app_test.py"])
def test_a_python_project_with_test_files(tmp_path: Path, project_file: str,
                                          test_file: str) -> None:
    write(tmp_path, project_file, '[project]\nname = "x"\n' if project_file == "pyproject.toml"
          else "[metadata]\nname = x\n" if project_file == "setup.cfg" else "")
    write(tmp_path, test_file, "def test_it(): pass\n")
    directory = test_file.split("/", maxsplit=1)[0]
    assert detect_test_commands(tmp_path).found == (ProposedGate(
        "python3 -m pytest -q",
        f"{directory}/ holds test_*.py files of a Python project ({project_file})"),)


def test_a_tests_dir_without_pytest_style_files_is_nothing(tmp_path: Path) -> None:
    write(tmp_path, "setup.py", "")
    write(tmp_path, "tests/helpers.py", "")
    write(tmp_path, "tests/__pycache__/test_x.cpython-311.pyc", "")
    write(tmp_path, "tests/.hidden/test_x.py", "")
    write(tmp_path, "tests/a/b/c/d/e/test_deep.py", "")  # deeper than is looked
    write(tmp_path, "tests/test_data.json", "")
    assert detect_test_command(tmp_path) is None


@pytest.mark.parametrize(("lock", "command"), [
    ("uv.lock", "uv run pytest -q"), ("poetry.lock", "poetry run pytest -q"),
    ("pdm.lock", "pdm run pytest -q")])
def test_a_python_lock_file_picks_the_runner(tmp_path: Path, lock: str, command: str) -> None:
    write(tmp_path, "pyproject.toml", "[tool.pytest.ini_options]\n")
    write(tmp_path, lock, "")
    gate = detect_test_command(tmp_path)
    assert gate is not None
    assert gate.command == command
    assert gate.reason.startswith("pyproject.toml configures pytest, and ")
    assert lock in gate.reason


def test_pytest_ini_wins_over_pyproject(tmp_path: Path) -> None:
    write(tmp_path, "pytest.ini", "[pytest]\n")
    write(tmp_path, "pyproject.toml", "[tool.pytest.ini_options]\n")
    assert detect_test_commands(tmp_path).found == (
        ProposedGate("python3 -m pytest -q", "pytest.ini configures pytest"),)


# -- Node


def test_a_package_json_test_script(tmp_path: Path) -> None:
    package_json(tmp_path, {"build": "tsc", "test": "vitest run"})
    assert detect_test_commands(tmp_path) == Detection(
        (ProposedGate("npm test", "package.json has a test script"),))


@pytest.mark.parametrize("script", [
    NPM_DEFAULT, 'echo "Error: no test specified"; exit 1', "", "   ", 42, None,
    ["jest"]])
def test_npm_placeholder_and_non_scripts_are_not_taken(tmp_path: Path, script: object) -> None:
    package_json(tmp_path, {"test": script, "lint": "eslint ."})
    assert detect_test_command(tmp_path) is None


@pytest.mark.parametrize("package", [{"name": "x"}, {"scripts": ["test"]}, [1, 2], "text"])
def test_package_json_without_a_test_script(tmp_path: Path, package: object) -> None:
    write(tmp_path, "package.json", json.dumps(package))
    assert detect_test_commands(tmp_path) == Detection()


@pytest.mark.parametrize(("lock", "command"), [
    ("package-lock.json", "npm test"), ("npm-shrinkwrap.json", "npm test"),
    ("pnpm-lock.yaml", "pnpm test"), ("yarn.lock", "yarn test"),
    ("bun.lockb", "bun run test"), ("bun.lock", "bun run test")])
def test_the_lock_file_picks_the_package_manager(tmp_path: Path, lock: str,
                                                 command: str) -> None:
    package_json(tmp_path, {"test": "jest"})
    write(tmp_path, lock, "")
    assert commands(tmp_path) == [command]


def test_pnpm_wins_over_a_stray_npm_lock(tmp_path: Path) -> None:
    package_json(tmp_path, {"test": "jest"})
    write(tmp_path, "package-lock.json", "{}")
    write(tmp_path, "pnpm-lock.yaml", "")
    gate = detect_test_command(tmp_path)
    assert gate == ProposedGate("pnpm test", "package.json has a test script, and "
                                             "pnpm-lock.yaml says the project uses pnpm")


def test_the_package_manager_field_wins_over_lock_files(tmp_path: Path) -> None:
    package_json(tmp_path, {"test": "jest"}, packageManager="yarn@4.1.0+sha256.abcdef")
    write(tmp_path, "package-lock.json", "{}")
    assert detect_test_command(tmp_path) == ProposedGate(
        "yarn test", "package.json has a test script, and its packageManager is yarn")
    package_json(tmp_path, {"test": "jest"}, packageManager="cnpm@1")  # unknown: lock file
    assert commands(tmp_path) == ["npm test"]


# -- Rust, Go


def test_cargo(tmp_path: Path) -> None:
    write(tmp_path, "Cargo.toml", '[package]\nname = "x"\nversion = "0.1.0"\n')
    assert detect_test_commands(tmp_path) == Detection(
        (ProposedGate("cargo test", "Cargo.toml declares a Rust package"),))
    write(tmp_path, "Cargo.toml", '[workspace]\nmembers = ["a", "b"]\n')
    assert detect_test_commands(tmp_path) == Detection(
        (ProposedGate("cargo test", "Cargo.toml declares a Rust workspace"),))
    write(tmp_path, "Cargo.toml", '[dependencies]\nserde = "1"\n')  # not a manifest cargo takes
    assert detect_test_command(tmp_path) is None


def test_go(tmp_path: Path) -> None:
    write(tmp_path, "go.mod", "module example.com/x\n\ngo 1.22\n")
    assert detect_test_commands(tmp_path) == Detection(
        (ProposedGate("go test ./...", "go.mod declares a Go module"),))


# -- make


@pytest.mark.parametrize("name", ["Makefile", "makefile", "GNUmakefile"])
def test_a_makefile_with_a_test_target(tmp_path: Path, name: str) -> None:
    write(tmp_path, name, ".PHONY: test\n\nbuild:\n\tcc -o x x.c\n\ntest: build\n\t./x --check\n")
    assert detect_test_commands(tmp_path) == Detection(
        (ProposedGate("make test", f"{name} has a test target"),))


def test_a_makefile_without_a_test_target(tmp_path: Path) -> None:
    write(tmp_path, "Makefile", "build:\n\tcc x.c\n\ntests:\n\t./run-tests\n")
    assert detect_test_command(tmp_path) is None


def test_gnu_make_reads_only_the_first_makefile(tmp_path: Path) -> None:
    write(tmp_path, "GNUmakefile", "all:\n\techo hi\n")
    write(tmp_path, "Makefile", "test:\n\techo test\n")
    assert detect_test_command(tmp_path) is None  # `make test` would read GNUmakefile


@pytest.mark.parametrize("text", [
    "test:\n\tpytest\n",
    "test::\n\tpytest\n",
    "test :\n\tpytest\n",
    "unit test lint: deps\n",
    "test: unit integration\n",
    "test: ; ./run-tests\n",
    "test: ## run the tests\n\n# a comment between\n\t./run-tests\n",
    "all: \\\n  test\ntest \\\n  : build\n",
    ".PHONY: test\ntest:\n\tpytest\n",
    "test: | order-only\n",
    "ifeq ($(CI),1)\n  test:\n\tpytest\nendif\n",
    "a test &: b\n",
])
def test_makefile_rules_for_test(text: str) -> None:
    assert makefile_has_target(text, "test"), text


@pytest.mark.parametrize("text", [
    "",
    ".PHONY: test\n",  # declared, never defined: `make test` would do nothing and pass
    ".PHONY: test\nall:\n\techo test\n",
    "tests:\n\tpytest\n",
    "test-unit:\n\tpytest\n",
    "unittest:\n\tpytest\n",
    "test := pytest\n",
    "test ::= pytest\n",
    "test:::= pytest\n",
    "test = pytest\n",
    "TEST: \n\tpytest\n",
    "test:\n\nall:\n\techo\n",  # a rule that does nothing
    "test: ;\n",
    "test: CFLAGS += -g\n",
    "test: export PYTHONPATH=src\n",
    "# test:\n#\tpytest\n",
    "all:\n\ttest: not a rule, a recipe line\n",
    "define recipe\ntest:\n\tpytest\nendef\n",
    "\ttest:\n",
])
def test_makefile_without_a_rule_for_test(text: str) -> None:
    assert not makefile_has_target(text, "test"), text


# -- broken files


def test_broken_pyproject_warns_and_gives_nothing_from_it(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", "[tool.pytest.ini_options\naddopts = 1\n")
    write(tmp_path, "tests/test_x.py", "")  # pyproject.toml was the only Python project file
    detection = detect_test_commands(tmp_path)
    assert detection.found == ()
    assert len(detection.warnings) == 1
    warning = detection.warnings[0]
    assert warning.startswith("pyproject.toml is not valid TOML (")
    assert warning.endswith("): no test command detected from it")
    assert "\n" not in warning


def test_broken_pyproject_leaves_the_other_rules(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", "= nonsense")
    write(tmp_path, "setup.py", "")
    write(tmp_path, "tests/test_x.py", "")
    write(tmp_path, "go.mod", "module x\n")
    detection = detect_test_commands(tmp_path)
    assert [gate.command for gate in detection.found] == ["python3 -m pytest -q",
                                                          "go test ./..."]
    assert detection.found[0].reason == (
        "tests/ holds test_*.py files of a Python project (setup.py)")
    assert [w.split(" is ")[0] for w in detection.warnings] == ["pyproject.toml"]


@pytest.mark.parametrize("text", ['{"scripts": {"test": "jest"}', "", "not json",
                                  b'{"scripts": {"test": "jest \xff"}}'])
def test_broken_package_json_warns(tmp_path: Path, text: str | bytes) -> None:
    write(tmp_path, "package.json", text)
    detection = detect_test_commands(tmp_path)
    assert detection.found == ()
    assert len(detection.warnings) == 1
    assert detection.warnings[0].startswith("package.json is not valid ")
    assert detection.warnings[0].endswith(": no test command detected from it")


def test_broken_ini_files_and_cargo_warn(tmp_path: Path) -> None:
    write(tmp_path, "setup.cfg", "[tool:pytest\ntestpaths = tests\n")
    write(tmp_path, "tox.ini", "no section header\n")
    write(tmp_path, "Cargo.toml", "[package\n")
    detection = detect_test_commands(tmp_path)
    assert detection.found == ()
    assert sorted(w.split(" ")[0] for w in detection.warnings) == ["Cargo.toml", "setup.cfg",
                                                                    "tox.ini"]
    assert all(len(w) < 260 and "\n" not in w for w in detection.warnings)


def test_a_directory_or_a_fifo_named_like_a_project_file_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "package.json").mkdir()
    (tmp_path / "Makefile").mkdir()
    os.mkfifo(tmp_path / "pyproject.toml")  # reading it would block
    assert detect_test_commands(tmp_path) == Detection()


def test_an_unreadable_file_warns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "Makefile", "test:\n\tpytest\n")
    read_bytes = Path.read_bytes

    def denied(path: Path) -> bytes:
        if path.name == "Makefile":
            raise PermissionError(13, "Permission denied")
        return read_bytes(path)

    monkeypatch.setattr(Path, "read_bytes", denied)
    detection = detect_test_commands(tmp_path)
    assert detection.found == ()
    assert detection.warnings == (
        "Makefile cannot be read (Permission denied): no test command detected from it",)


# -- priority


def test_everything_at_once_in_priority_order(tmp_path: Path) -> None:
    write(tmp_path, "go.mod", "module x\n")
    write(tmp_path, "Cargo.toml", '[package]\nname = "x"\n')
    package_json(tmp_path, {"test": "jest"})
    write(tmp_path, "pyproject.toml", "[tool.pytest.ini_options]\n")
    write(tmp_path, "Makefile", "test:\n\tpytest\n")
    detection = detect_test_commands(tmp_path)
    assert [gate.command for gate in detection.found] == [
        "make test", "python3 -m pytest -q", "npm test", "cargo test", "go test ./..."]
    assert detection.proposal == ProposedGate("make test", "Makefile has a test target")
    assert detection.alternatives == detection.found[1:]
    assert detection.warnings == ()


@pytest.mark.parametrize(("present", "expected"), [
    (["pyproject", "package"], ["python3 -m pytest -q", "npm test"]),
    (["package", "cargo"], ["npm test", "cargo test"]),
    (["cargo", "go"], ["cargo test", "go test ./..."]),
    (["go", "make"], ["make test", "go test ./..."]),
])
def test_pairs(tmp_path: Path, present: list[str], expected: list[str]) -> None:
    files = {"pyproject": ("pyproject.toml", "[tool.pytest.ini_options]\n"),
             "package": ("package.json", '{"scripts": {"test": "jest"}}'),
             "cargo": ("Cargo.toml", "[package]\n"), "go": ("go.mod", "module x\n"),
             "make": ("Makefile", "test:\n\tgo test ./...\n")}
    for key in present:
        write(tmp_path, *files[key])
    assert commands(tmp_path) == expected


def test_to_dict() -> None:
    assert ProposedGate("make test", "why").to_dict() == {"command": "make test",
                                                          "reason": "why"}

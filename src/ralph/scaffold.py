"""`ralph init`: the files a project needs before the loop can run, written without clobbering.

The scaffold never overwrites a file unless asked (`force`), because PRD.md, progress.md and
the prompts are the user's work once they exist. Even with `force` it leaves the runtime
state alone: `.ralph/state.json` (the loop's attempts and blocks), the event store under
`.ralph/store/`, and the lines a `.gitignore` already has. Each file is written atomically, so
a failure part-way leaves every file either absent or whole.

ralph.toml's [gates] proposes the project's test command when one is found
(`ralph.testcmd`), commented out: a gate is the user's decision, never switched on unasked.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import textwrap
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any, Literal, get_args

from ralph.config import CONFIG_FILE, Config, ConfigError, load_config
from ralph.errors import RalphError
from ralph.fsutil import atomic_write_bytes, atomic_write_text
from ralph.testcmd import Detection, ProposedGate, detect_test_commands

Tracker = Literal["md", "json"]
TRACKERS: tuple[str, ...] = get_args(Tracker)
PRD_FILES: dict[str, str] = {"md": "PRD.md", "json": "prd.json"}

RUNTIME_DIR = ".ralph"
STATE_FILE = f"{RUNTIME_DIR}/state.json"
RUNTIME_SUBDIRS = ("logs", "receipts", "context", "attempts", "store")
# The parts of .ralph/ that belong to one machine's runs, not to the project's history.
GITIGNORE_ENTRIES = (
    ".ralph/state.json",
    ".ralph/state.json.damaged",
    ".ralph/logs/",
    ".ralph/receipts/",
    ".ralph/context/",
    ".ralph/attempts/",
    ".ralph/store/",
    ".ralph/cache/",
    ".ralph/sessions/",
    ".ralph/workflows/",
    ".ralph/*.lock",
    ".ralph/serve.json",
)
GITIGNORE_HEADER = "# Ralph's runtime files (ralph init)"
GIT_INIT_TIMEOUT = 30.0

# The user-facing files, in the order they are written; the PRD comes from the tracker.
# PROMPT_<role>.md: the instructions of the workflow's roles (`ralph workflow`).
WORKFLOW_PROMPTS = ("PROMPT_planner.md", "PROMPT_executor.md", "PROMPT_reviewer.md",
                    "PROMPT_questioner.md")
_PROJECT_FILES = ("PROMPT_build.md", "PROMPT_plan.md", "PROMPT_judge.md", "PROMPT_review.md",
                  *WORKFLOW_PROMPTS, "PROMPT_nu.md", "PROMPT.md", "AGENTS.md", "<prd>",
                  "progress.md", "FEEDBACK.md")
_PRD_MARKER = "@PRD_FILE@"
_GATES_MARKER = "@GATES_PROPOSAL@\ncommands = []\n"
_COMMENT_WIDTH = 90  # + "# ": the width of the template's comments
NO_GATE_EXAMPLE = ["pytest -q", "ruff check ."]


class ScaffoldError(RalphError):
    """The scaffold could not be written (unwritable root, a file in the way, git failing)."""


@dataclass
class ScaffoldResult:
    """What `scaffold` did, as paths relative to the root (directories end with `/`).

    `created`: did not exist and now do. `updated`: existed and were rewritten (`force`) or
    appended to (.gitignore). `kept`: existed and were left as they are. `git`: the root is
    inside a git repository (after `git init` if one was run). `proposed_gate`: the test
    command found (`alternatives`: the others) when ralph.toml has no gate; None when none
    was found or the kept ralph.toml already has gates (`gates_configured`).
    """

    root: Path
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    git: bool = False
    git_initialized: bool = False
    warnings: list[str] = field(default_factory=list)
    proposed_gate: ProposedGate | None = None
    alternatives: list[ProposedGate] = field(default_factory=list)
    gates_configured: bool = False

    @property
    def config_written(self) -> bool:
        """Whether this run wrote ralph.toml (so it holds the proposal, commented out)."""
        return CONFIG_FILE in self.created or CONFIG_FILE in self.updated

    def to_dict(self) -> dict[str, Any]:
        """The JSON form `ralph init --json` prints."""
        proposal: dict[str, Any] | None = None
        if self.proposed_gate is not None:
            proposal = {**self.proposed_gate.to_dict(),
                        "alternatives": [gate.to_dict() for gate in self.alternatives]}
        return {"root": str(self.root), "created": self.created, "updated": self.updated,
                "kept": self.kept, "git": self.git, "git_initialized": self.git_initialized,
                "proposed_gate": proposal}


def template(name: str) -> str:
    """The text of a scaffolded file, from the package's `templates/<name>.tmpl`."""
    return files("ralph").joinpath("templates", f"{name}.tmpl").read_text(encoding="utf-8")


def config_template(tracker: Tracker = "md", detection: Detection | None = None) -> str:
    """The ralph.toml `ralph init` writes: every key with its default, files.prd per tracker,
    and in [gates] the detected test command commented out (or a note that none was found)."""
    return (template(CONFIG_FILE).replace(_PRD_MARKER, PRD_FILES[tracker])
            .replace(_GATES_MARKER, gates_comment(detection)))


def gates_comment(detection: Detection | None) -> str:
    """The `[gates] commands` key with the comment lines above it, each line ending in a
    newline: the proposed command (or, with none found, examples) commented out inside the
    array, so that uncommenting that one line enables it.
    """
    proposal = detection.proposal if detection is not None else None
    if detection is None or proposal is None:
        lines = _comment("`ralph init` found no test command to propose (it looks for a "
                         "Makefile test target, pytest, a package.json test script, Cargo.toml "
                         "and go.mod). Add yours, for example by uncommenting these:")
        commands = NO_GATE_EXAMPLE
    else:
        text = f"Proposed by `ralph init`: {proposal.reason}."
        if detection.alternatives:
            text += " Also found: " + "; ".join(
                f"`{gate.command}` ({gate.reason})" for gate in detection.alternatives) + "."
        text += (" To make the test suite decide whether a task is done, uncomment the "
                 "command below:")
        lines = _comment(text)
        commands = [proposal.command]
    lines += ["commands = [", *(f"  # {_toml_string(c)}," for c in commands), "]"]
    return "".join(f"{line}\n" for line in lines)


def _comment(text: str) -> list[str]:
    """`text` as `# ` lines, never breaking inside a `quoted command`."""
    glue = "\x00"
    protected = "`".join(part.replace(" ", glue) if index % 2 else part
                         for index, part in enumerate(text.split("`")))
    return ["# " + line.replace(glue, " ")
            for line in textwrap.wrap(protected, _COMMENT_WIDTH, break_long_words=False,
                                      break_on_hyphens=False)]


def _toml_string(value: str) -> str:
    escaped = []
    for char in value:
        if char in ('"', "\\"):
            escaped.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            escaped.append(f"\\u{ord(char):04x}")
        else:
            escaped.append(char)
    return '"' + "".join(escaped) + '"'


def scaffold(root: Path, tracker: Tracker = "md", force: bool = False, *,
             git_init: bool = False, git_timeout: float = GIT_INIT_TIMEOUT) -> ScaffoldResult:
    """Write the project files and `.ralph/` under `root`, keeping what exists unless `force`.

    With `git_init`, a root outside any git repository gets `git init` first (so a failing
    git leaves nothing written). Raises ScaffoldError on the first file or directory that
    cannot be written; the files written before it are complete.
    """
    if tracker not in TRACKERS:
        raise ScaffoldError(f"unknown tracker '{tracker}': use md or json")
    if not root.is_dir():
        raise ScaffoldError(f"cannot scaffold in {root}: not a directory")
    result = ScaffoldResult(root=root, git=in_git_repository(root))
    if git_init and not result.git:
        run_git_init(root, timeout=git_timeout)
        result.git = result.git_initialized = True

    prd = PRD_FILES[tracker]
    detection = detect_test_commands(root)
    _write_file(result, CONFIG_FILE, config_template(tracker, detection), force)
    for name in _PROJECT_FILES:
        source = prd if name == "<prd>" else name
        _write_file(result, source, template(source), force)
    _make_dir(result, RUNTIME_DIR)
    # Runtime state, not a scaffold file: --force must not reset attempts and blocks.
    _write_file(result, STATE_FILE, '{"version": 1}\n', force=False)
    for sub in RUNTIME_SUBDIRS:
        _make_dir(result, f"{RUNTIME_DIR}/{sub}")
    _update_gitignore(result)

    if CONFIG_FILE in result.kept:
        warnings, config = _check_kept_config(root, prd)
        result.warnings.extend(warnings)
        result.gates_configured = config is not None and bool(config.gates.commands)
    if not result.gates_configured:
        # Proposed, and the files that could not be read for it named; with gates already
        # configured neither matters.
        result.proposed_gate = detection.proposal
        result.alternatives = list(detection.alternatives)
        result.warnings[:0] = detection.warnings
    return result


def _write_file(result: ScaffoldResult, name: str, text: str, force: bool) -> None:
    path = result.root / name
    exists = os.path.lexists(path)
    if exists and not force:
        result.kept.append(name)
        return
    try:
        if path.is_symlink():
            # --force replaces the link, never its target: init writes only inside the root
            # (atomic_write_text would follow the link, maybe to a file shared elsewhere).
            path.unlink()
        atomic_write_text(path, text)
    except OSError as exc:
        raise ScaffoldError(f"cannot write {name} in {result.root}: "
                            f"{exc.strerror or exc}") from None
    (result.updated if exists else result.created).append(name)


def _make_dir(result: ScaffoldResult, name: str) -> None:
    path = result.root / name
    shown = f"{name}/"
    if path.is_dir():
        result.kept.append(shown)
        return
    if os.path.lexists(path):
        raise ScaffoldError(f"cannot create {shown} in {result.root}: a file is in the way")
    try:
        path.mkdir()
    except OSError as exc:
        raise ScaffoldError(f"cannot create {shown} in {result.root}: "
                            f"{exc.strerror or exc}") from None
    result.created.append(shown)


def _gitignore_key(line: str) -> str:
    """A .gitignore line reduced so `/.ralph/logs`, `.ralph/logs/` and `.ralph/logs` match."""
    return line.strip().lstrip("/").rstrip("/")


def _update_gitignore(result: ScaffoldResult) -> None:
    """Append the runtime entries the .gitignore lacks; its other lines stay byte for byte."""
    name = ".gitignore"
    path = result.root / name
    try:
        # surrogateescape: a line that is not UTF-8 is written back exactly as it was.
        existing: str | None = path.read_bytes().decode("utf-8", "surrogateescape")
    except FileNotFoundError:
        existing = None
    except OSError as exc:
        raise ScaffoldError(f"cannot read {name} in {result.root}: "
                            f"{exc.strerror or exc}") from None
    lines = existing.splitlines() if existing else []
    present = {_gitignore_key(line) for line in lines}
    missing = [entry for entry in GITIGNORE_ENTRIES if _gitignore_key(entry) not in present]
    if not missing:
        result.kept.append(name)
        return
    newline = "\r\n" if existing and "\r\n" in existing else "\n"
    text = existing or ""
    if text and not text.endswith("\n"):
        text += newline
    if lines and lines[-1].strip():
        text += newline  # a blank line between the user's entries and ours
    block = ([GITIGNORE_HEADER] if GITIGNORE_HEADER not in lines else []) + missing
    text += newline.join(block) + newline
    try:
        atomic_write_bytes(path, text.encode("utf-8", "surrogateescape"))
    except OSError as exc:
        raise ScaffoldError(f"cannot write {name} in {result.root}: "
                            f"{exc.strerror or exc}") from None
    (result.created if existing is None else result.updated).append(name)


def _check_kept_config(root: Path, prd: str) -> tuple[list[str], Config | None]:
    """Warnings about a ralph.toml that was kept (invalid, or naming a different PRD), and
    the configuration it holds (None when invalid)."""
    try:
        config = load_config(root)
    except ConfigError as exc:
        return [f"the existing {CONFIG_FILE} is invalid: {exc}"], None
    if config.files.prd != prd:
        return [f"the existing {CONFIG_FILE} names {config.files.prd!r} as the PRD, not "
                f"{prd!r}: set files.prd there, or run `ralph init --force`"], config
    return [], config


def in_git_repository(root: Path) -> bool:
    """Whether `root` or one of its parents holds `.git` (a directory, or a worktree's file)."""
    return any((directory / ".git").exists() for directory in (root, *root.parents))


def run_git_init(root: Path, *, timeout: float = GIT_INIT_TIMEOUT) -> None:
    """`git init` in `root`, in its own process group, stopped (with its children) on timeout.

    Raises ScaffoldError with one line saying why it failed.
    """
    try:
        proc = subprocess.Popen(["git", "init", "--quiet"], cwd=root, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
    except FileNotFoundError:
        raise ScaffoldError("git init failed: git is not installed (not found on PATH); "
                            "install git, or run `ralph init` without --git-init") from None
    except OSError as exc:
        raise ScaffoldError(f"git init failed in {root}: {exc.strerror or exc}") from None
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise ScaffoldError(f"git init in {root} did not finish within {timeout:g} s") from None
    except BaseException:
        _kill_group(proc)
        raise
    if proc.returncode != 0:
        lines = [line.strip() for line in err.decode("utf-8", "replace").splitlines()
                 if line.strip()]
        why = lines[-1] if lines else f"exit status {proc.returncode}"
        raise ScaffoldError(f"git init failed in {root}: {why}")


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()

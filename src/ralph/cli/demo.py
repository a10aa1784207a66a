"""`ralph demo`: the loop end to end, on a scratch project, with no model involved.

It creates a git repository holding a small Python package and a three-task PRD whose gate
is the project's test suite, and runs the loop with the built-in deterministic replay agent
(`ralph.testing.fake_agent` playing a recorded plan). The replay's first attempt at task 2
is wrong on purpose: the gate catches it, Ralph reopens the task, and the second attempt
fixes it. At the end it prints a summary and where the logs and events are.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from ralph.loop import LoopService, RunOutcome

PRD = """# Calculator

A tiny calculator package, built by the Ralph demo's replay agent.

## Tasks

- [ ] 1. Add `add(a, b)` to calc
  - `calc.add(2, 3) == 5`, tested in tests/test_add.py
- [ ] 2. Add `divide(a, b)` that refuses to divide by zero
  - `calc.divide(6, 3) == 2`
  - `calc.divide(1, 0)` raises ValueError
  - Depends on: 1
- [ ] 3. Add `mean(values)` built on add and divide
  - `calc.mean([1, 2, 3]) == 2`; `calc.mean([])` raises ValueError
  - Depends on: 2
"""

_ADD = '''"""A tiny calculator."""


def add(a: float, b: float) -> float:
    return a + b
'''
_DIVIDE_WRONG = _ADD + '''

def divide(a: float, b: float) -> float | None:
    if b == 0:
        return None  # wrong: the acceptance criteria ask for ValueError
    return a / b
'''
_DIVIDE = _ADD + '''

def divide(a: float, b: float) -> float:
    if b == 0:
        raise ValueError("cannot divide by zero")
    return a / b
'''
_MEAN = _DIVIDE + '''

def mean(values: list[float]) -> float:
    if not values:
        raise ValueError("mean of nothing")
    total = 0.0
    for value in values:
        total = add(total, value)
    return divide(total, len(values))
'''
_TEST = '''import unittest

import calc


class {name}(unittest.TestCase):
{body}
'''
TEST_ADD = _TEST.format(name="TestAdd", body="""    def test_add(self) -> None:
        self.assertEqual(calc.add(2, 3), 5)
""")
TEST_DIVIDE = _TEST.format(name="TestDivide", body="""    def test_divide(self) -> None:
        self.assertEqual(calc.divide(6, 3), 2)

    def test_divide_by_zero(self) -> None:
        with self.assertRaises(ValueError):
            calc.divide(1, 0)
""")
TEST_MEAN = _TEST.format(name="TestMean", body="""    def test_mean(self) -> None:
        self.assertEqual(calc.mean([1, 2, 3]), 2)

    def test_mean_of_nothing(self) -> None:
        with self.assertRaises(ValueError):
            calc.mean([])
""")

REPLAY_PLAN: dict[str, Any] = {"tasks": {
    "1": [{"write": {"calc/__init__.py": _ADD, "tests/test_add.py": TEST_ADD},
           "append": {"progress.md": "\n- Task 1: add() with a test.\n"},
           "tick": True, "print": ["Added add() and its test."], "exit_signal": False}],
    "2": [{"write": {"calc/__init__.py": _DIVIDE_WRONG, "tests/test_divide.py": TEST_DIVIDE},
           "tick": True, "print": ["Added divide(); returns None on zero."],
           "exit_signal": False},
          {"write": {"calc/__init__.py": _DIVIDE},
           "append": {"progress.md": "\n- Task 2: divide() raises ValueError on zero.\n"},
           "tick": True, "print": ["divide() now raises ValueError on zero."],
           "exit_signal": False}],
    "3": [{"write": {"calc/__init__.py": _MEAN, "tests/test_mean.py": TEST_MEAN},
           "append": {"progress.md": "\n- Task 3: mean() on add() and divide().\n"},
           "tick": True, "print": ["Added mean()."], "exit_signal": True}],
}}
REPLAY_NOTE = ("agent: [bold]replay[/bold], Ralph's built-in deterministic replay agent "
               "(no model is called: it applies recorded changes, one plan step per attempt)")


def gate_command() -> str:
    """The project's test suite: pytest when it is installed, else the stdlib's unittest
    (`make demo` installs Ralph without its dev tools). Neither names the tests' directory:
    a gate's test paths are protected, and the replay agent adds a test with each task."""
    python = sys.executable
    if importlib.util.find_spec("pytest") is not None:
        return f"{python} -m pytest -q -p no:cacheprovider"
    return f"{python} -m unittest -q"


def create_project(root: Path, plan_path: Path) -> None:
    """The scratch project: scaffolded by `ralph init`, then the demo's package and PRD."""
    from ralph.scaffold import scaffold

    root.mkdir(parents=True, exist_ok=True)
    _git(root, "init", "-q")
    _git(root, "config", "user.name", "Ralph demo")
    _git(root, "config", "user.email", "demo@localhost")
    scaffold(root, "md", False)
    (root / "calc").mkdir(exist_ok=True)
    (root / "calc" / "__init__.py").write_text('"""A tiny calculator."""\n')
    (root / "tests").mkdir(exist_ok=True)
    (root / "tests" / "__init__.py").write_text("")
    (root / "tests" / "test_smoke.py").write_text(_TEST.format(
        name="TestSmoke", body="    def test_imports(self) -> None:\n"
                               "        self.assertTrue(calc.__doc__)\n"))
    (root / "PRD.md").write_text(PRD)
    plan_path.write_text(json.dumps(REPLAY_PLAN))
    argv = [sys.executable, "-m", "ralph.testing.fake_agent", "--plan", str(plan_path)]
    (root / "ralph.toml").write_text(
        "# The Ralph demo's configuration (see `ralph init` for every key).\n\n"
        "[loop]\ndefault_agent = \"replay\"\nmax_iterations = 8\n\n"
        f"[agents.replay]\nargv = {json.dumps(argv)}\ntimeout_seconds = 120\n\n"
        f"[gates]\ncommands = [{json.dumps(gate_command())}]\ntimeout_seconds = 300\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "The demo project, before Ralph")


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, timeout=60,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)


def demo(
    directory: Annotated[Path | None, typer.Option(
        "--dir", metavar="PATH",
        help="Where to create the scratch project (default: a new temp dir).")] = None,
    cleanup: Annotated[bool, typer.Option(
        "--cleanup", help="Remove the scratch project afterwards.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only the summary.")] = False,
) -> None:
    """Run the loop on a scratch project with the built-in replay agent."""
    import asyncio

    from rich.console import Console
    from rich.markup import escape

    from ralph.cli.display import RunDisplay
    from ralph.loop import LoopService

    # Off a terminal rich assumes 80 columns; the summary table reads better wider.
    console = Console(highlight=False, soft_wrap=True,
                      width=None if sys.stdout.isatty() else 120)
    base = Path(tempfile.mkdtemp(prefix="ralph-demo-")) if directory is None else directory
    if directory is not None and directory.exists() and any(directory.iterdir()):
        raise typer.BadParameter(f"{directory} is not empty", param_hint="--dir")
    root = base / "calc"
    try:
        create_project(root, base / "replay-plan.json")
        console.print(f"[bold]Ralph demo[/bold]: a scratch project in {root}")
        console.print(f"gate: {escape(gate_command())}")
        display = None if quiet else RunDisplay(replay_note=REPLAY_NOTE)
        service = LoopService(root, observer=display)
        try:
            outcome = asyncio.run(service.run())
            rows = _summary(service, outcome)
        finally:
            if display is not None:
                display.close()
            service.close()
        _print_summary(console, outcome, rows, None if cleanup else root)
    finally:
        if cleanup:
            shutil.rmtree(base, ignore_errors=True)
    if outcome.reason != "complete":
        raise typer.Exit(1)


def _summary(service: LoopService, outcome: RunOutcome) -> list[dict[str, Any]]:
    """One row per task, from the run's iteration.finished events in the store."""
    rows: dict[str, dict[str, Any]] = {}
    for frame in service.store.read(topic="iteration.finished",
                                    stream=f"runs/{outcome.run_id}"):
        meta = frame.meta
        row = rows.setdefault(meta["task_id"], {"task": meta["task_id"],
                                                "title": meta["task_title"], "attempts": 0})
        row["attempts"] += 1
        row["gates"] = "pass" if meta["gates_ok"] else "fail"
        row["verdict"] = "verified done" if meta["verified"] else meta["status"]
        row["commit"] = (meta["commit"] or "")[:10]
    return list(rows.values())


def _print_summary(console: Console, outcome: RunOutcome, rows: list[dict[str, Any]],
                   root: Path | None) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"run {outcome.run_id}: {outcome.reason} ({outcome.message})")
    for column in ("task", "title", "attempts", "gates (last)", "verdict", "commit"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["task"], escape(row["title"]), str(row["attempts"]), row["gates"],
                      row["verdict"], row["commit"])
    console.print(table)
    if root is None:
        console.print("the scratch project is removed (--cleanup)")
        return
    store = root / ".ralph" / "store"
    console.print(f"logs:     {root / '.ralph' / 'logs'}")
    console.print(f"attempts: {root / '.ralph' / 'attempts'} (receipts in .ralph/receipts)")
    console.print(f"events:   ralph store cat --store {store} --stream runs/{outcome.run_id}")
    console.print(f"history:  git -C {root} log --oneline")

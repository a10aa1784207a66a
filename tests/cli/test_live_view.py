"""The live view of `ralph step` and `ralph run` (stderr): the iteration header, the agent's
lines and tool calls as they happen, gates with a failing one's last lines, the verdict with
duration, tokens and cost, log and commit; a summary table after a run. On a terminal (a real
pseudo-terminal here, through pexpect) a live line shows what runs and for how long; off one,
every line is `HH:MM:SS <text>`, without escape codes or a spinner. `--quiet` shows nothing,
`--verbose` adds tool results, reasoning and the agent's start and end.

Also the silence warning (`loop.silence_warning_seconds`): `agent.silent` events while the
agent prints nothing, backing off, and the line the view shows for them."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect  # type: ignore[import-untyped]  # (no types-pexpect in the dev deps)

from tests.cli.helpers import RALPH, TIMEOUT, Result
from tests.loop import conftest as loop_fixtures
from tests.loop.conftest import Project, step_with_events
from tests.loop.test_cli_loop import set_loop
from tests.loop.test_cost_budget import use_fake_claude

project = loop_fixtures.project  # the loop tests' scratch project (a fixture)

RALPH_BIN = str(Path(sys.executable).with_name("ralph"))
ONE_TASK = "# P\n\n## Tasks\n\n- [ ] 1. The only task\n  - it works\n"
TICK: dict[str, Any] = {"tick": True, "print": ["ticked it"]}
_STAMP = re.compile(r"^\d\d:\d\d:\d\d +\S")
_SPINNER = re.compile("[\u2800-\u28ff]")  # rich's spinners are braille dots


def ralph(root: Path, *args: str) -> Result:
    proc = subprocess.run([*RALPH, *args], cwd=root, stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=TIMEOUT, check=False)
    return Result(proc.returncode, proc.stdout.decode(), proc.stderr.decode(), proc.stdout)


def gated_step(go: Path) -> dict[str, Any]:
    """Print a line, then wait until the test creates `go`, then print another, tick and
    end: what the view shows before `go` exists was shown while the agent still ran."""
    return {"tick": True, "shell": ["echo 'first progress line'",
                                    f"while [ ! -e {go} ]; do sleep 0.05; done",
                                    "echo 'second progress line'"]}


@contextlib.contextmanager
def terminal(root: Path, *args: str) -> Iterator[pexpect.spawn]:
    """`ralph ARGS...` on a pseudo-terminal; killed (by pid) and reaped at the end."""
    child = pexpect.spawn(RALPH_BIN, list(args), cwd=str(root), encoding="utf-8",
                          codec_errors="replace", dimensions=(50, 220), timeout=TIMEOUT,
                          env={**os.environ, "TERM": "xterm-256color", "COLUMNS": "220"})
    try:
        yield child
    finally:
        if child.isalive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
        child.close(force=True)


def read_to_end(child: pexpect.spawn) -> str:
    child.expect(pexpect.EOF, timeout=TIMEOUT)
    return str(child.before)


# -- on a terminal -----------------------------------------------------------------------------


def test_a_terminal_sees_the_agent_live_then_the_summary(project: Project,
                                                         tmp_path: Path) -> None:
    project.prd(ONE_TASK)
    project.config(gates=["true"])
    project.commit("one task")
    go = tmp_path / "go"
    project.plan({"default": gated_step(go)})
    try:
        with terminal(project.root, "run") as child:
            child.expect(r"run run_\w+ with agent fake, up to 10 iterations")
            child.expect(r"iteration 1 \(1/10 of this run\)  task 1: The only task  "
                         r"\(attempt 1-1\)")
            child.expect("first progress line")
            # The agent is still running: it waits for `go`, which does not exist yet.
            assert not go.exists()
            child.expect(r"task 1: agent working  \d+\.\d s")
            child.expect(r"task 1: agent working  [1-9]\d*\.\d s")  # the clock goes on
            assert "second progress line" not in str(child.before)
            go.touch()
            child.expect("second progress line")
            child.expect(r"gate true: ok \(exit 0, \d+\.\d s\)")
            child.expect(r"verified done  \(\d+\.\d s\)")
            child.expect(r"log \.ralph/logs/000001\.log  commit [0-9a-f]{10}")
            child.expect(r"run ended: complete \(the only task is verified done\); "
                         r"1/1 tasks done")
            child.expect(r"run run_\w+: complete")  # the summary table's title
            child.expect("tokens in")
            child.expect("all agents")
            child.expect(r"tasks: 1 done, 0 blocked, 0 open of 1; iterations: 1; "
                         r"duration: \d+\.\d s; stopped: the only task is verified done")
            rest = read_to_end(child)
            child.close()
            assert child.exitstatus == 0, rest
    finally:
        go.touch()  # an agent left behind by a failure ends too


def test_a_terminal_gets_styles_and_quiet_gets_nothing(project: Project) -> None:
    project.plan({"default": TICK})
    with terminal(project.root, "step") as child:
        out = read_to_end(child)
        child.close()
    assert child.exitstatus == 0, out
    assert "\x1b[" in out  # styled on a terminal
    assert "verified done" in out
    with terminal(project.root, "run", "--quiet") as child:
        out = read_to_end(child)
        child.close()
    assert child.exitstatus == 0
    assert out == ""  # no line, no live line, no summary


# -- off a terminal ----------------------------------------------------------------------------


class PipedRalph:
    """`ralph ARGS...` with pipes; stderr lines collected as they come."""

    def __init__(self, root: Path, *args: str) -> None:
        self.proc = subprocess.Popen([*RALPH, *args], cwd=root, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.err: list[str] = []
        self.out = b""
        self._threads = [threading.Thread(target=self._read_err, daemon=True),
                         threading.Thread(target=self._read_out, daemon=True)]
        for thread in self._threads:
            thread.start()

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace")
            self.err.append(line)
            self.lines.put(line)

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        self.out = self.proc.stdout.read()

    def wait_line(self, text: str) -> str:
        while True:
            try:
                line = self.lines.get(timeout=TIMEOUT)
            except queue.Empty:
                raise AssertionError(f"no line with {text!r}: {self.err}") from None
            if text in line:
                return line

    def finish(self) -> int:
        code = self.proc.wait(timeout=TIMEOUT)
        for thread in self._threads:
            thread.join(timeout=TIMEOUT)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.finish()


def test_a_pipe_gets_plain_timestamped_lines_as_they_happen(project: Project,
                                                             tmp_path: Path) -> None:
    go = tmp_path / "go"
    project.plan({"tasks": {"1": [gated_step(go)], "2": [TICK], "3": [{"print": ["no"]}]}})
    project.config(gates=["true"])
    project.commit("gate")
    piped = PipedRalph(project.root, "run", "--max-iterations", "3", "--json")
    try:
        line = piped.wait_line("first progress line")
        assert not go.exists()  # shown while the agent still waits: flushed line by line
        assert re.fullmatch(r"\d\d:\d\d:\d\d     first progress line\n", line)
        go.touch()
        code = piped.finish()
    finally:
        go.touch()
        piped.kill()
    err = "".join(piped.err)
    assert code == 1, err
    assert "\x1b" not in err and not _SPINNER.search(err)
    assert not re.search(r"agent working  \d", err)  # the live line: terminals only
    view, _, table = err.partition("\nrun run_")
    assert table, err  # the summary table follows the view
    for text in view.splitlines():
        assert _STAMP.match(text), text
    assert re.search(r"^\d\d:\d\d:\d\d iteration 1 \(1/3 of this run\)  task 1: First task",
                     view, re.MULTILINE)
    assert "iteration limit reached" in table
    assert "tasks: 2 done, 0 blocked, 1 open of 3; iterations: 3" in table
    outcome = json.loads(piped.out)
    assert (outcome["reason"], outcome["done"], outcome["blocked"], outcome["open"]) == (
        "max_iterations", 2, 0, 1)
    assert outcome["tokens_in"] == 0 and outcome["cost_usd"] is None


def test_a_failing_gate_shows_its_last_20_lines(project: Project) -> None:
    (project.root / "gate.sh").write_text(
        'for i in $(seq 1 30); do echo "gate says $i"; done\nexit 3\n')
    project.config(gates=["true", "sh gate.sh"])
    project.commit("gate")
    project.plan({"default": TICK})
    result = ralph(project.root, "step")
    assert result.code == 1
    lines = [line[9:] for line in result.err.splitlines()]
    at = next(i for i, line in enumerate(lines)
              if re.fullmatch(r"  gate sh gate\.sh: failed \(exit 3, \d+\.\d s\)", line))
    tail = lines[at + 1:at + 21]
    assert tail == [f"    | gate says {i}" for i in range(11, 31)]
    assert "| gate says 10" not in result.err
    assert "| " not in lines[at + 21]
    assert re.search(r"gate true: ok \(exit 0", result.err)
    assert "| " not in "".join(line for line in lines[:at])  # a passing gate shows no output
    assert "not done: gate 'sh gate.sh' exited with 3" in result.err


# -- tool calls, usage, --verbose (an agent whose output is parsed: the fake claude) -------------


def test_tool_calls_text_and_usage_with_and_without_verbose(project: Project) -> None:
    use_fake_claude(project)
    plain = ralph(project.root, "step")
    assert plain.code == 0, plain.err
    lines = [line[9:] for line in plain.err.splitlines()]
    assert "    → Bash: echo work > work-1.txt" in lines
    assert "    Did task 1." in lines
    assert any(re.fullmatch(r"  verified done  \(\d+\.\d s, 1,000 in / 200 out tokens, "
                            r"\$0\.2500\)", line) for line in lines), plain.err
    assert "←" not in plain.err and "(thinking)" not in plain.err
    assert "started: " not in plain.err and "agent finished" not in plain.err

    verbose = ralph(project.root, "step", "--verbose")
    assert verbose.code == 0, verbose.err
    lines = [line[9:] for line in verbose.err.splitlines()]
    assert "    → Bash: echo work > work-2.txt" in lines
    assert "    ← wrote work-2.txt" in lines and "    ← second line of the result" in lines
    assert "    (thinking) The task wants a file, then the box ticked." in lines
    assert any(re.fullmatch(r"  started: \S+ \S+fake_claude\.py .*", line) for line in lines)
    assert any(re.fullmatch(r"  agent finished \(exit 0, \d+\.\d s\)", line) for line in lines)
    assert any("used 1,000 in / 200 out tokens, $0.2500" in line for line in lines)
    order = [next(i for i, line in enumerate(lines) if text in line)
             for text in ("iteration 2", "started: ", "(thinking)", "→ Bash", "← wrote",
                          "Did task 2.", "agent finished", "verified done")]
    assert order == sorted(order), verbose.err


def test_a_run_summary_lists_tokens_and_cost_per_agent(project: Project) -> None:
    use_fake_claude(project)
    result = ralph(project.root, "run", "--json")
    assert result.code == 0, result.err
    table = result.err[result.err.index("\nrun run_"):]
    assert re.search(r"agent claude\s*│\s*3,000\s*│\s*600\s*│\s*\$0\.7500", table), table
    assert re.search(r"all agents\s*│\s*3,000\s*│\s*600\s*│\s*\$0\.7500", table), table
    assert "tasks: 3 done, 0 blocked, 0 open of 3; iterations: 3" in table
    outcome = result.json()
    assert (outcome["tokens_in"], outcome["tokens_out"], outcome["cost_usd"]) == (
        3000, 600, 0.75)
    assert outcome["agents"]["claude"]["tokens_in"] == 3000


# -- wording -----------------------------------------------------------------------------------


def test_a_step_says_how_its_iteration_went_and_nothing_about_a_run(project: Project) -> None:
    project.plan({"default": {"print": ["nothing done"]}})
    result = ralph(project.root, "step")
    assert result.code == 1
    text = result.err.lower()
    for word in ("run stopped", "run ended", "max_iterations", "iteration limit", "tokens in"):
        assert word not in text, result.err
    assert "not done: the tracker does not mark the task done" in result.err


def test_a_single_task_run_says_the_only_task(project: Project) -> None:
    project.prd(ONE_TASK)
    project.commit("one task")
    project.plan({"default": TICK})
    result = ralph(project.root, "run")
    assert result.code == 0, result.err
    assert "run ended: complete (the only task is verified done); 1/1 tasks done" in result.err
    again = ralph(project.root, "step")
    assert again.code == 0
    assert "nothing to do: the only task is done" in again.err


# -- the silence warning -----------------------------------------------------------------------


def _silent(frames: list[Any]) -> list[dict[str, Any]]:
    return [f.meta for f in frames if f.topic == "agent.silent"]


async def test_a_silent_agent_is_reported_with_a_back_off(project: Project) -> None:
    project.config()
    set_loop(project, silence_warning_seconds=1)
    project.commit("silence")
    project.plan({"default": {"tick": True, "sleep": 3.5}})
    result, frames = await step_with_events(project)
    assert result.verified
    warnings = _silent(frames)
    assert len(warnings) >= 2, warnings
    assert warnings[0]["seconds"] >= 1 and warnings[1]["seconds"] >= warnings[0]["seconds"]
    assert warnings[1]["seconds"] >= 2
    assert [w["next_warning_s"] for w in warnings[:2]] == [2, 4]  # twice as long each time
    assert all(w["iteration"] == 1 and w["run_id"] == result.run_id for w in warnings)
    topics = [f.topic for f in frames]
    assert topics.index("agent.output") < topics.index("agent.silent")
    assert max(i for i, t in enumerate(topics) if t == "agent.silent") < topics.index(
        "agent.finished")


async def test_an_agent_that_keeps_talking_is_not_reported(project: Project) -> None:
    chatty = ("\n[agents.chatty]\nargv = [\"/bin/sh\", \"-c\", "
              "\"for i in 1 2 3 4 5 6 7; do echo tick $i; sleep 0.3; done\"]\n")
    project.config(chatty)
    set_loop(project, silence_warning_seconds=1, default_agent="chatty")
    project.commit("chatty")
    result, frames = await step_with_events(project)
    outputs = [f.meta["content"] for f in frames if f.topic == "agent.output"]
    assert outputs == [f"tick {i}" for i in range(1, 8)]
    assert result.agent_status == "ok"
    assert _silent(frames) == []


async def test_output_resets_the_back_off(project: Project) -> None:
    """Two silences of 1.6 s, with a line between: each is warned about at 1 s, the second
    as the first (without the reset its next warning would wait for 2 s of silence)."""
    pauses = ("\n[agents.pausing]\nargv = [\"/bin/sh\", \"-c\", "
              "\"echo one; sleep 1.6; echo two; sleep 1.6; echo three\"]\n")
    project.config(pauses)
    set_loop(project, silence_warning_seconds=1, default_agent="pausing")
    project.commit("pausing")
    _, frames = await step_with_events(project)
    after_output: list[tuple[str | None, dict[str, Any]]] = []
    last = None
    for frame in frames:
        if frame.topic == "agent.output":
            last = frame.meta["content"]
        elif frame.topic == "agent.silent" and last not in [a for a, _ in after_output]:
            after_output.append((last, frame.meta))
    assert [a for a, _ in after_output] == ["one", "two"], after_output
    assert [m["next_warning_s"] for _, m in after_output] == [2, 2]


def test_the_view_says_the_agent_printed_nothing(project: Project) -> None:
    project.config()
    set_loop(project, silence_warning_seconds=1)
    project.commit("silence")
    project.plan({"default": {"tick": True, "sleep": 2.5}})
    result = ralph(project.root, "step")
    assert result.code == 0, result.err
    assert re.search(r"^\d\d:\d\d:\d\d   the agent printed nothing for \d+\.\d s; next "
                     r"warning after 2\.0 s$", result.err, re.MULTILINE), result.err


async def test_silence_warning_0_turns_it_off(project: Project) -> None:
    project.config()
    set_loop(project, silence_warning_seconds=0)
    project.commit("no warnings")
    project.plan({"default": {"tick": True, "sleep": 1.5}})
    _, frames = await step_with_events(project)
    assert _silent(frames) == []

"""Tokens and cost: per iteration (the step result, `iteration.finished`), per run (RunOutcome,
`run.stopped`), in `ralph status --json` (`cost`: the last run and all runs), and the budgets
`loop.max_cost_usd` / `loop.max_tokens` that end a run after the iteration in flight.

Usage needs an adapter that reports it: FAKE_CLAUDE below is a `claude` adapter agent whose
program prints claude's stream-json (the shape of tests/agents/recorded/claude-success.stdout):
a tool call and its result, a thought, a text, and the final `result` event with `usage` and
`total_cost_usd`. Other test files use it too (`use_fake_claude`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ralph.store import Frame
from tests.bridge.client import BridgeProcess
from tests.loop.conftest import Project, step_with_events
from tests.loop.test_cli_loop import RUN_OUTCOME_FIELDS, check_fields, events, set_loop
from tests.loop.test_control import RunningRalph, gated, status, wait_for_topic

RALPH = [sys.executable, "-m", "ralph"]
TIMEOUT = 120

# A claude CLI stand-in: the prompt on stdin; options --tokens-in, --tokens-out, --cost
# (USD, or "none" for no total_cost_usd), --tick (tick the task in PRD.md), --sleep S (between
# its events, to watch them arrive). As a judge it says JUDGE_SIGNAL: true; as a reviewer SHIP.
FAKE_CLAUDE = r'''
import argparse, json, os, re, sys, time
parser = argparse.ArgumentParser()
parser.add_argument("--tokens-in", type=int, default=1000)
parser.add_argument("--tokens-out", type=int, default=200)
parser.add_argument("--cost", default="0.25")
parser.add_argument("--tick", action="store_true")
parser.add_argument("--sleep", type=float, default=0.0)
args = parser.parse_args()
prompt = sys.stdin.read()
session = "sess-%d" % os.getpid()

def say(event):
    event.setdefault("session_id", session)
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()
    time.sleep(args.sleep)

def assistant(*blocks):
    say({"type": "assistant", "message": {"role": "assistant", "model": "claude-test",
                                          "content": list(blocks)}})

say({"type": "system", "subtype": "init", "model": "claude-test", "cwd": os.getcwd()})
match = re.search(r"^- Task id: (\S+)\s*$", prompt, re.MULTILINE)
if "## Your task for this iteration" in prompt and match:
    task = match.group(1)
    assistant({"type": "thinking", "thinking": "The task wants a file, then the box ticked."})
    assistant({"type": "tool_use", "id": "call_1", "name": "Bash",
               "input": {"command": "echo work > work-%s.txt" % task}})
    with open("work-%s.txt" % task, "w") as handle:
        handle.write("work\n")
    say({"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "call_1",
         "content": "wrote work-%s.txt\nsecond line of the result" % task}]}})
    if args.tick:
        prd = open("PRD.md").read()
        prd = re.sub(r"^(\s*- )\[ \]( %s\. )" % re.escape(task), r"\1[x]\2", prd, count=1,
                     flags=re.MULTILINE)
        tmp = "PRD.md.fake-claude"
        open(tmp, "w").write(prd)
        os.replace(tmp, "PRD.md")
    answer = "Did task %s." % task
elif "JUDGE_SIGNAL" in prompt:
    answer = "Looks right.\nJUDGE_SIGNAL: true"
else:
    answer = "Fine.\nSHIP"
assistant({"type": "text", "text": answer})
result = {"type": "result", "subtype": "success", "is_error": False, "result": answer,
          "num_turns": 2, "usage": {"input_tokens": args.tokens_in,
                                    "cache_creation_input_tokens": 0,
                                    "cache_read_input_tokens": 0,
                                    "output_tokens": args.tokens_out}}
if args.cost != "none":
    result["total_cost_usd"] = float(args.cost)
say(result)
'''


def fake_claude_section(tmp: Path, name: str = "claude", *, tokens_in: int = 1000,
                        tokens_out: int = 200, cost: float | None = 0.25, tick: bool = True,
                        sleep: float = 0.0) -> str:
    """An `[agents.<name>]` section (adapter claude) running FAKE_CLAUDE with these figures."""
    script = tmp / "fake_claude.py"
    script.write_text(FAKE_CLAUDE)
    argv = [sys.executable, str(script), "--tokens-in", str(tokens_in), "--tokens-out",
            str(tokens_out), "--cost", "none" if cost is None else repr(cost),
            "--sleep", repr(sleep)]
    if tick:
        argv.append("--tick")
    return (f'\n[agents.{name}]\nadapter = "claude"\nargv = {json.dumps(argv)}\n'
            "timeout_seconds = 60\n")


def use_fake_claude(project: Project, *, extra: str = "", gates: list[str] | None = None,
                    **figures: Any) -> None:
    """ralph.toml: the fake claude as the default agent (`fake` stays defined), committed."""
    project.config(fake_claude_section(project.plan_path.parent, **figures) + extra,
                   gates=gates)
    set_loop(project, default_agent="claude")
    project.commit("the fake claude")


def ralph(project: Project, *args: str, timeout: float = TIMEOUT
          ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RALPH, *args], cwd=project.root, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout, check=False)


FOUR_TASKS = ("# P\n\n## Tasks\n\n- [ ] 1. First task\n- [ ] 2. Second task\n"
              "- [ ] 3. Third task\n- [ ] 4. Fourth task\n")


def _of(events_: list[Frame], topic: str) -> list[Frame]:
    return [f for f in events_ if f.topic == topic]


# -- per iteration -----------------------------------------------------------------------------


async def test_an_iteration_records_its_tokens_and_cost(project: Project) -> None:
    use_fake_claude(project, gates=["test -f work-1.txt"])
    result, frames = await step_with_events(project)
    assert result.verified, result.reason
    assert (result.tokens_in, result.tokens_out, result.cost_usd) == (1000, 200, 0.25)
    assert set(result.usage) == {"claude"}
    spend = result.usage["claude"]
    assert (spend.tokens_in, spend.tokens_out, spend.cost_usd, spend.agent_runs) == (
        1000, 200, 0.25, 1)
    usage = _of(frames, "agent.usage")
    assert len(usage) == 1
    assert (usage[0].meta["input_tokens"], usage[0].meta["output_tokens"],
            usage[0].meta["cost_usd"], usage[0].meta["model"]) == (1000, 200, 0.25,
                                                                   "claude-test")
    finished = _of(frames, "iteration.finished")[-1].meta
    assert (finished["tokens_in"], finished["tokens_out"], finished["cost_usd"]) == (
        1000, 200, 0.25)
    assert finished["usage"]["claude"]["tokens_in"] == 1000
    attempt = json.loads((project.root / ".ralph/attempts/1/1-1.json").read_text())
    assert (attempt["tokens_in"], attempt["cost_usd"]) == (1000, 0.25)


async def test_the_judge_spend_is_counted_under_its_own_agent(project: Project) -> None:
    judge = fake_claude_section(project.plan_path.parent, "checker", tokens_in=300,
                                tokens_out=40, cost=0.05)
    use_fake_claude(project, extra=judge + '\n[judge]\nenabled = true\nagent = "checker"\n')
    result, frames = await step_with_events(project)
    assert result.verified and result.judge_ok is True, result.reason
    assert set(result.usage) == {"claude", "checker"}
    assert (result.usage["checker"].tokens_in, result.usage["checker"].cost_usd) == (300, 0.05)
    assert (result.tokens_in, result.tokens_out) == (1300, 240)
    assert result.cost_usd == pytest.approx(0.30)
    roles = [f.meta.get("role") for f in _of(frames, "agent.usage")]
    assert roles == [None, "judge"]


async def test_an_agent_without_a_reported_cost_leaves_the_cost_unknown(
        project: Project) -> None:
    use_fake_claude(project, cost=None)
    result, _ = await step_with_events(project)
    assert (result.tokens_in, result.tokens_out) == (1000, 200)
    assert result.cost_usd is None  # never guessed
    assert result.usage["claude"].unpriced == 1


async def test_a_command_agent_reports_no_usage(project: Project) -> None:
    project.plan({"default": {"tick": True}})
    result, frames = await step_with_events(project)
    assert (result.tokens_in, result.tokens_out, result.cost_usd, result.usage) == (
        None, None, None, {})
    assert _of(frames, "agent.usage") == []


# -- per run and all runs ----------------------------------------------------------------------


def test_a_run_adds_up_its_iterations_and_status_keeps_every_run(project: Project) -> None:
    use_fake_claude(project)
    first = ralph(project, "run", "--json", "--max-iterations", "1")
    assert first.returncode == 1, first.stderr
    one = json.loads(first.stdout)
    assert (one["iterations"], one["tokens_in"], one["tokens_out"], one["cost_usd"]) == (
        1, 1000, 200, 0.25)

    second = ralph(project, "run", "--json")
    assert second.returncode == 0, second.stderr
    outcome = json.loads(second.stdout)
    check_fields(outcome, RUN_OUTCOME_FIELDS)
    assert (outcome["reason"], outcome["iterations"], outcome["done"]) == ("complete", 2, 3)
    assert (outcome["blocked"], outcome["open"]) == (0, 0)
    assert (outcome["tokens_in"], outcome["tokens_out"]) == (2000, 400)
    assert outcome["cost_usd"] == pytest.approx(0.5)
    assert outcome["duration_seconds"] > 0
    assert set(outcome["agents"]) == {"claude"}
    assert outcome["agents"]["claude"]["tokens_in"] == 2000
    assert outcome["agents"]["claude"]["agent_runs"] == 2

    stopped = events(project.root, "run.stopped")[-1].meta
    assert stopped["run_id"] == outcome["run_id"]
    for key in ("tokens_in", "tokens_out", "cost_usd", "blocked", "open", "done", "total",
                "agents"):
        assert stopped[key] == outcome[key], key

    status = ralph(project, "status", "--json")
    assert status.returncode == 0, status.stderr
    cost = json.loads(status.stdout)["cost"]
    assert set(cost) == {"last_run", "all_runs"}
    last, every = cost["last_run"], cost["all_runs"]
    assert last["run_id"] == outcome["run_id"] and last["iterations"] == 2
    assert (last["total"]["tokens_in"], last["total"]["tokens_out"]) == (2000, 400)
    assert last["total"]["cost_usd"] == pytest.approx(0.5)
    assert every["iterations"] == 3
    assert (every["total"]["tokens_in"], every["total"]["tokens_out"]) == (3000, 600)
    assert every["total"]["cost_usd"] == pytest.approx(0.75)
    assert every["agents"]["claude"]["agent_runs"] == 3
    state = project.state()
    assert state["spend_last_run"]["run_id"] == outcome["run_id"]
    assert state["spend_all"]["total"]["tokens_in"] == 3000


def test_a_fresh_project_reports_no_spend(project: Project) -> None:
    status = ralph(project, "status", "--json")
    assert status.returncode == 0, status.stderr
    cost = json.loads(status.stdout)["cost"]
    assert cost["last_run"] is None
    assert cost["all_runs"]["total"]["tokens_in"] == 0
    assert cost["all_runs"]["total"]["cost_usd"] is None


# -- budgets -----------------------------------------------------------------------------------


def test_the_cost_budget_ends_the_run_after_the_iteration_in_flight(project: Project) -> None:
    use_fake_claude(project)
    set_loop(project, max_cost_usd=0.4)
    project.commit("budget")
    done = ralph(project, "run", "--json")
    assert done.returncode == 1, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["reason"] == "budget"
    assert "loop.max_cost_usd" in outcome["message"] and "$0.5000" in outcome["message"]
    # The second iteration crossed the budget; it finished (verified and committed) first.
    assert (outcome["iterations"], outcome["done"], outcome["total"]) == (2, 2, 3)
    assert outcome["cost_usd"] == pytest.approx(0.5)
    finished = events(project.root, "iteration.finished")
    assert [f.meta["status"] for f in finished] == ["done", "done"]
    assert finished[-1].meta["commit"]
    stopped = events(project.root, "run.stopped")[-1].meta
    assert stopped["reason"] == "budget" and "loop.max_cost_usd" in stopped["message"]
    assert "run ended: budget used up" in done.stderr
    assert "loop.max_cost_usd" in done.stderr
    assert "- [ ] 3. Third task" in project.read_prd()


def test_the_token_budget_ends_the_run(project: Project) -> None:
    use_fake_claude(project, tokens_in=900, tokens_out=300)
    set_loop(project, max_tokens=2000)
    project.commit("budget")
    done = ralph(project, "run", "--json")
    assert done.returncode == 1, done.stderr
    outcome = json.loads(done.stdout)
    assert (outcome["reason"], outcome["iterations"]) == ("budget", 2)
    assert "loop.max_tokens" in outcome["message"] and "2,400 tokens" in outcome["message"]
    assert (outcome["tokens_in"], outcome["tokens_out"]) == (1800, 600)


def test_a_budget_counts_this_run_only(project: Project) -> None:
    """Earlier runs' spend does not count against a new run's budget."""
    project.prd(FOUR_TASKS)
    use_fake_claude(project)
    assert ralph(project, "run", "--quiet", "--max-iterations", "1").returncode == 1
    set_loop(project, max_cost_usd=0.3)
    project.commit("budget")
    done = ralph(project, "run", "--json")
    outcome = json.loads(done.stdout)
    # 0.25 spent before; this run stops at its own 0.50 (two iterations), not after one.
    assert (outcome["reason"], outcome["iterations"]) == ("budget", 2), done.stderr
    assert outcome["cost_usd"] == pytest.approx(0.5)
    assert (outcome["done"], outcome["open"]) == (3, 1)


def test_a_budget_used_up_by_the_last_task_still_completes_the_run(project: Project) -> None:
    """The iteration that verified the last task also crossed the budget: the run is
    complete (exit 0), not stopped for its budget with nothing left to do."""
    project.prd("# P\n\n## Tasks\n\n- [ ] 1. Only task\n")
    use_fake_claude(project)
    set_loop(project, max_cost_usd=0.2)
    project.commit("budget")
    done = ralph(project, "run", "--json")
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert (outcome["reason"], outcome["iterations"], outcome["done"]) == ("complete", 1, 1)
    assert "budget" not in done.stderr


def test_the_bridge_reports_a_budget_stop_as_stopped_naming_the_budget(
        project: Project) -> None:
    use_fake_claude(project)
    set_loop(project, max_cost_usd=0.2)
    project.commit("budget")
    with BridgeProcess(project.root) as bridge:
        run_id = bridge.call("run")["runId"]
        stopped = bridge.wait_event("run_stopped", runId=run_id)
        finished = [e for e in bridge.events if e["type"] == "iteration_finished"]
    assert stopped["reason"] == "stopped"
    assert stopped["message"] and "loop.max_cost_usd" in stopped["message"]
    assert len(finished) == 1
    assert (finished[0]["tokensIn"], finished[0]["tokensOut"], finished[0]["costUsd"]) == (
        1000, 200, 0.25)


def test_status_last_run_is_the_active_run_from_its_start(project: Project,
                                                          tmp_path: Path) -> None:
    """During a run's first iteration, `cost.last_run` is that run's (nothing spent yet),
    not the run before it."""
    first, go = gated(tmp_path)
    project.plan({"tasks": {"1": [{"tick": True}], "2": [first], "3": [{"tick": True}]}})
    step = ralph(project, "step", "--json")
    assert step.returncode == 0, step.stderr
    before = status(project.root)["cost"]["last_run"]["run_id"]
    with RunningRalph(project.root, "run", "--json", "--max-iterations", "1") as run:
        wait_for_topic(project.root, "iteration.started", 2, run)
        now = status(project.root)
        assert now["running"] is True and now["activeRunId"] not in (None, before)
        last = now["cost"]["last_run"]
        assert last["run_id"] == now["activeRunId"]
        assert last["iterations"] == 0
        assert last["total"]["tokens_in"] == 0
        go.touch()
        code, out, err = run.wait()
    assert code == 1, err
    outcome = json.loads(out)
    after = status(project.root)["cost"]["last_run"]
    assert (after["run_id"], after["iterations"]) == (outcome["run_id"], 1)

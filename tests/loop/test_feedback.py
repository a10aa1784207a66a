"""What the next attempt learns about the last one, and what every prompt carries.

A retry's prompt (`.ralph/context/<task>/<task>-2/prompt.md`) says, most useful first: why
Ralph did not verify it, each failing gate's command with the end of its output (from the
content store, longer than the event's tail), a judge's or reviewer's no, protected paths put
back, other tasks' ticks reopened, and the agent's own last message. Every prompt names the
gate commands (or says there are none) and carries the session notes (`ralph notes`), newest
first within `loop.notes_chars`, with the exact command to add one. A command agent learns
where it is from RALPH_* variables in its environment."""

from __future__ import annotations

import json
import re
import shlex
import subprocess

from ralph.notes import add_note, list_notes
from ralph.store import Store
from ralph.testing import misbehaving
from tests.loop.conftest import Project, step_with_events
from tests.loop.test_cli_loop import set_loop

GATE_SCRIPT = 'for i in $(seq 1 60); do echo "gate line $i"; done\nexit 3\n'


def prompt_of(project: Project, task_id: str, attempt: int) -> str:
    return (project.root / ".ralph" / "context" / task_id / f"{task_id}-{attempt}" /
            "prompt.md").read_text()


def last_attempt_section(prompt: str) -> str:
    """The "Your last attempt at this task" part of a prompt's anchor."""
    start = prompt.index("### Your last attempt at this task")
    end = prompt.index("Work on this task only.", start)
    return prompt[start:end]


def store_of(project: Project) -> Store:
    return Store(project.root / ".ralph" / "store")


# -- the last attempt --------------------------------------------------------------------------


async def test_a_failing_gate_and_the_last_message_reach_the_retry(project: Project) -> None:
    (project.root / "gate.sh").write_text(GATE_SCRIPT)
    project.config(gates=["true", "sh gate.sh"])
    project.commit("gate")
    project.plan({"tasks": {"1": [{"tick": True, "print": ["I believe it works",
                                                          "my final words"]}]}})
    first, events = await step_with_events(project)
    assert not first.verified
    await step_with_events(project)
    first_prompt = prompt_of(project, "1", 1)
    assert "### Your last attempt at this task" not in first_prompt  # nothing to say yet
    section = last_attempt_section(prompt_of(project, "1", 2))
    assert "- Ralph did not verify it: gate 'sh gate.sh' exited with 3." in section
    assert "The gate `sh gate.sh` exited with 3. The end of its output:" in section
    assert "`true`" not in section  # a gate that passed is not mentioned
    # The end of the output comes from the content store: more than the event's 20 lines.
    event_tail = [f for f in events if f.topic == "gate.finished"][1].meta["output_tail"]
    assert event_tail.splitlines() == [f"gate line {i}" for i in range(41, 61)]
    shown = re.findall(r"gate line (\d+)", section)
    assert shown == [str(i) for i in range(21, 61)]
    assert "> my final words" in section and "> I believe it works" in section
    # most useful first
    order = [section.index(s) for s in ("Ralph did not verify it", "The gate `sh gate.sh`",
                                        "Your last message was")]
    assert order == sorted(order)


async def test_put_backs_and_reopened_ticks_come_in_order(project: Project) -> None:
    (project.root / "gate.sh").write_text("echo 'the check failed'\nexit 1\n")
    project.config(gates=["sh gate.sh"])
    project.commit("gate")
    cheat = {**misbehaving.rewrite_gate("gate.sh"), "tick_also": ["3"],
             "print": ["all green now"]}
    project.plan({"tasks": {"1": [cheat, {"print": ["second try"]}]}})
    first, _ = await step_with_events(project)
    assert not first.verified
    await step_with_events(project)
    section = last_attempt_section(prompt_of(project, "1", 2))
    parts = ["Ralph did not verify it: the agent changed protected paths: gate.sh (modified)",
             "The gate `sh gate.sh` exited with 1.", "the check failed",
             "Ralph put back your changes to protected paths: gate.sh (modified)",
             "Ralph reopened task 3: marked done during the iteration of task 1",
             "Your last message was", "> all green now"]
    at = [section.find(part) for part in parts]
    assert -1 not in at, (parts, section)
    assert at == sorted(at), section


async def test_a_reviewers_no_reaches_the_retry(project: Project) -> None:
    project.config("\n[review]\nenabled = true\n", gates=["true"])
    project.commit("review")
    project.plan({"tasks": {"1": [{"tick": True, "print": ["done, I think"]}]},
                  "review": ["BLOCK", "SHIP"]})
    first, events = await step_with_events(project)
    assert (first.verified, first.review_ok) == (False, False)
    assert first.reason == "the reviewer said BLOCK"
    assert [f.meta["ok"] for f in events if f.topic == "review.finished"] == [False]
    second, _ = await step_with_events(project)
    assert second.verified and second.review_ok is True
    section = last_attempt_section(prompt_of(project, "1", 2))
    assert "- Ralph did not verify it: the reviewer said BLOCK." in section
    assert "- The reviewer said no: the reviewer said BLOCK" in section
    # In its own words too.
    assert "It wrote:\n  > review looked at the change\n  > BLOCK" in section
    assert section.index("Ralph did not verify it") < section.index("The reviewer said no")


async def test_a_judges_no_reaches_the_retry(project: Project) -> None:
    project.config("\n[judge]\nenabled = true\n", gates=["true"])
    project.commit("judge")
    project.plan({"tasks": {"1": [{"tick": True}]}, "judge": [False]})
    first, _ = await step_with_events(project)
    assert first.judge_ok is False and not first.verified
    await step_with_events(project)
    section = last_attempt_section(prompt_of(project, "1", 2))
    assert "- The judge said no: the judge said JUDGE_SIGNAL: false" in section
    assert "  > judge looked at the change" in section


async def test_an_agent_that_failed_is_told_so(project: Project) -> None:
    project.plan({"tasks": {"1": [{"print": ["crashing now"], "exit_code": 3}, {}]}})
    first, _ = await step_with_events(project)
    assert first.status == "agent_failed"
    await step_with_events(project)
    section = last_attempt_section(prompt_of(project, "1", 2))
    assert "Ralph did not verify it: the agent failed" in section
    assert "Your run ended badly: failed" in section
    assert "> crashing now" in section


async def test_a_verified_task_leaves_no_notes_for_later(project: Project) -> None:
    project.config(gates=["true"])
    project.commit("gate")
    project.plan({"tasks": {"1": [{"print": ["no"]}, {"tick": True}]}})
    await step_with_events(project)
    assert project.state()["tasks"]["1"]["notes"]
    second, _ = await step_with_events(project)
    assert second.verified
    assert "1" not in project.state()["tasks"]  # done: its notes went with its entry


# -- every prompt ------------------------------------------------------------------------------


async def test_every_prompt_names_the_gates(project: Project) -> None:
    project.config(gates=["pytest -q", "ruff check ."])
    project.commit("gates")
    await step_with_events(project)
    prompt = prompt_of(project, "1", 1)
    assert "- Gates: after you, Ralph runs these in the project root" in prompt
    assert "  - `pytest -q`\n  - `ruff check .`" in prompt


async def test_a_prompt_says_when_no_gates_are_configured(project: Project) -> None:
    await step_with_events(project)
    prompt = prompt_of(project, "1", 1)
    assert "- Gates: none are configured; Ralph checks that you marked the task done" in prompt


async def test_session_notes_are_in_every_prompt_newest_first(project: Project) -> None:
    with store_of(project) as store:
        add_note(store, "learning", "the tests need a local database")
        add_note(store, "decision", "we use sqlite", iteration=1)
    project.plan({"default": {"tick": True}})
    await step_with_events(project)
    await step_with_events(project)
    for task_id in ("1", "2"):
        prompt = prompt_of(project, task_id, 1)
        assert "## Notes from earlier iterations (newest first)" in prompt
        newest = prompt.index("- [decision, iteration 1] we use sqlite")
        older = prompt.index("- [learning] the tests need a local database")
        assert newest < older


def _set_notes_chars(project: Project, chars: int) -> None:
    text = (project.root / "ralph.toml").read_text().replace(
        "[loop]\n", f"[loop]\nnotes_chars = {chars}\n", 1)
    (project.root / "ralph.toml").write_text(text)
    project.commit("notes budget")


def _notes_section(prompt: str) -> str:
    start = prompt.index("## Notes from earlier iterations")
    end = prompt.find("\n## ", start + 1)
    return prompt[start:end if end >= 0 else len(prompt)]


async def test_notes_are_bounded_by_notes_chars(project: Project) -> None:
    _set_notes_chars(project, 1000)
    with store_of(project) as store:
        for i in range(30):
            add_note(store, "learning", f"note number {i:02d} " + "x" * 40)
    await step_with_events(project)
    section = _notes_section(prompt_of(project, "1", 1))
    shown = [int(n) for n in re.findall(r"- \[learning\] note number (\d+)", section)]
    assert shown and shown == sorted(shown, reverse=True)  # newest first
    assert shown == list(range(29, 29 - len(shown), -1))  # the newest ones, none skipped
    assert len(shown) < 30
    hidden = re.search(r"\n(- \((\d+) older notes not shown\))\n", section)
    assert hidden and int(hidden.group(2)) == 30 - len(shown)
    assert "(none yet)" not in section
    assert len(section) - len(hidden.group(1)) <= 1000


async def test_notes_too_long_for_the_budget_are_counted_not_called_none(
        project: Project) -> None:
    with store_of(project) as store:
        add_note(store, "learning", "a note that cannot fit " + "x" * 5000)
        add_note(store, "learning", "a newer note that cannot fit either " + "y" * 5000)
    await step_with_events(project)
    section = _notes_section(prompt_of(project, "1", 1))
    assert "- (1 older note not shown)" in section  # the newest is shown, cut
    assert "a newer note that cannot fit either yyy" in section and "…" in section
    assert "(none yet)" not in section  # there are notes: they did not fit


async def test_a_budget_too_small_for_the_how_to_leaves_the_section_out(
        project: Project) -> None:
    _set_notes_chars(project, 1)
    with store_of(project) as store:
        add_note(store, "learning", "a note that cannot fit")
    await step_with_events(project)
    assert "Notes from earlier iterations" not in prompt_of(project, "1", 1)


async def test_no_notes_yet_says_so_and_notes_chars_0_leaves_the_section_out(
        project: Project) -> None:
    await step_with_events(project)
    assert "- (none yet)" in prompt_of(project, "1", 1)
    _set_notes_chars(project, 0)
    await step_with_events(project)
    assert "Notes from earlier iterations" not in prompt_of(project, "1", 2)


async def test_the_command_in_the_prompt_adds_a_note(project: Project) -> None:
    await step_with_events(project)
    prompt = prompt_of(project, "1", 1)
    match = re.search(r"`([^`]* notes add [^`]*) --type learning \"\.\.\.\"`", prompt)
    assert match, prompt
    command = match.group(1) + " --type learning " + shlex.quote("run make setup first")
    done = subprocess.run(["/bin/sh", "-c", command], cwd="/", capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL, check=False)
    assert done.returncode == 0, done.stderr
    with store_of(project) as store:
        notes = list_notes(store)
    assert [(n.type, n.text) for n in notes] == [("learning", "run make setup first")]
    await step_with_events(project)
    assert "- [learning] run make setup first" in prompt_of(project, "1", 2)


# -- the agent's environment -------------------------------------------------------------------


async def test_a_command_agent_learns_where_it_is_from_its_environment(
        project: Project) -> None:
    project.plan({"tasks": {"1": [{"shell": ["env | grep ^RALPH_ > env.txt"]}]}})
    first, _ = await step_with_events(project)
    second, _ = await step_with_events(project)

    def env_of() -> dict[str, str]:
        lines = (project.root / "env.txt").read_text().splitlines()
        return dict(line.split("=", 1) for line in lines)

    env = env_of()  # written by the second attempt
    root = project.root
    assert env["RALPH_TASK_ID"] == "1"
    assert env["RALPH_TASK_TITLE"] == "First task"
    assert env["RALPH_ITERATION"] == "2"
    assert env["RALPH_ATTEMPT"] == "2"
    assert env["RALPH_RUN_ID"] == second.run_id != first.run_id
    assert env["RALPH_PROMPT_FILE"] == str(root / ".ralph/context/1/1-2/prompt.md")
    assert env["RALPH_STORE"] == str(root / ".ralph" / "store")
    assert env["RALPH_PROJECT_ROOT"] == str(root)
    assert env["RALPH_ROLE"] == "agent"
    # what the variable names is what the agent was given
    assert (root / env["RALPH_PROMPT_FILE"]).read_text().count("- Task id: 1") == 1


async def test_the_agents_own_env_wins_over_the_context(project: Project) -> None:
    project.config('\n[agents.fake.env]\nRALPH_TASK_TITLE = "mine"\n')
    project.commit("env")
    project.plan({"tasks": {"1": [{"shell": ["env | grep ^RALPH_ > env.txt"]}]}})
    await step_with_events(project)
    env = dict(line.split("=", 1)
               for line in (project.root / "env.txt").read_text().splitlines())
    assert env["RALPH_TASK_TITLE"] == "mine" and env["RALPH_TASK_ID"] == "1"
    assert json.loads((project.root / ".ralph/state.json").read_text())["last"]["task_id"] == "1"


async def test_a_tiny_prompt_budget_keeps_the_anchor_whole(project: Project) -> None:
    """`loop.context_chars` at its least (1,000) and a retry after a gate that printed a lot:
    what went wrong last time takes at most a quarter of the prompt (whole notes, most
    useful first), the session notes at most a quarter too, and the prompt stays within its
    budget with the task's anchor in it."""
    (project.root / "gate.sh").write_text(GATE_SCRIPT)
    (project.root / "PROMPT_build.md").write_text("# Build\n\nDo the task below.\n")
    project.config(gates=["sh gate.sh"])
    set_loop(project, context_chars=1000)
    project.commit("tiny budget")
    with store_of(project) as store:
        add_note(store, "learning", "an old note " + "o" * 60)
        add_note(store, "decision", "the newest note " + "n" * 2000)
    project.plan({"tasks": {"1": [{"tick": True, "print": ["my final words " + "w" * 3000]}]}})
    first, _ = await step_with_events(project)
    assert not first.verified
    await step_with_events(project)
    prompt = prompt_of(project, "1", 2)
    assert len(prompt) <= 1000
    assert "- Task id: 1" in prompt
    assert "Work on this task only." in prompt  # the anchor is whole, nothing cut from it
    assert "truncated to fit the prompt budget" not in prompt
    section = last_attempt_section(prompt)
    assert "- Ralph did not verify it: gate 'sh gate.sh' exited with 3." in section
    assert "gate line" not in section and "my final words" not in section  # did not fit
    # A quarter of 1,000 holds not even the notes' how-to: the section is left out.
    assert "Notes from earlier iterations" not in prompt

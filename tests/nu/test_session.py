"""Named sessions (`ralph nu`) on the loop service with the scripted fake session agent
(ralph.testing.fake_nu_agent): notes, resolution, completion claimed then accepted or
rejected, numbering that continues across runs, and `--iterations 0`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from ralph.loop import RunOutcome
from ralph.notes import NoteError, add_note, list_notes, open_notes
from ralph.nu.errors import NuError
from ralph.nu.options import NuOptions
from ralph.nu.record import claim, read_record
from ralph.nu.service import prepare, with_model
from ralph.store import FileStore, Frame, Store
from tests.loop.conftest import git, new_repository

SPEC = "# Spec\n\n- Task A: write a.txt\n- Task B: write b.txt\n"
BREAK_DOWN = {"notes": [["remaining", "Task A"], ["remaining", "Task B"]]}
DO_ONE = {"take": True, "finish": True}


class Session:
    """A project with a spec and the fake session agent as agent `fake`."""

    def __init__(self, root: Path, plan_path: Path) -> None:
        self.root = root
        self.plan_path = plan_path

    def plan(self, *steps: dict[str, Any]) -> None:
        self.plan_path.write_text(json.dumps({"steps": list(steps)}))

    def config(self, gates: list[str] | None = None) -> None:
        argv = [sys.executable, "-m", "ralph.testing.fake_nu_agent", "--plan",
                str(self.plan_path)]
        (self.root / "ralph.toml").write_text(
            f'[loop]\ndefault_agent = "fake"\n\n[agents.fake]\nargv = {json.dumps(argv)}\n'
            f"timeout_seconds = 60\n\n[gates]\ncommands = {json.dumps(gates or [])}\n")
        git(self.root, "add", "-A")
        git(self.root, "commit", "-q", "-m", "config")

    async def run(self, iterations: int = 0, name: str = "demo",
                  events: list[Frame] | None = None) -> RunOutcome:
        with FileStore(self.root / ".ralph" / "store", create=True) as store:
            setup = prepare(self.root, NuOptions(name=name, agent="fake", iterations=iterations),
                            store, observer=events.append if events is not None else None)
            try:
                return await setup.service.run("fake", setup.max_iterations)
            finally:
                setup.service.close()

    def store(self) -> FileStore:
        return FileStore(self.root / ".ralph" / "store")

    def prompt(self, attempt: int, name: str = "demo") -> str:
        path = self.root / ".ralph" / "context" / f"nu-{name}" / f"nu-{name}-{attempt}"
        return (path / "prompt.md").read_text()


@pytest.fixture
def session(tmp_path: Path) -> Session:
    root = tmp_path / "proj"
    new_repository(root)
    (root / "specs").mkdir()
    (root / "specs" / "SPEC.md").write_text(SPEC)
    made = Session(root, tmp_path / "plan.json")
    made.config()
    return made


def frames(store: Store, name: str = "demo") -> list[Frame]:
    return list(store.read(stream=f"sessions/{name}"))


async def test_a_claim_with_open_notes_is_rejected_then_one_without_is_accepted(
        session: Session) -> None:
    session.plan(BREAK_DOWN, {**DO_ONE, "write": {"a.txt": "a"}, "done": True},
                 {**DO_ONE, "write": {"b.txt": "b"}, "done": True})
    outcome = await session.run()
    assert (outcome.reason, outcome.iterations) == ("complete", 3), outcome
    assert outcome.message == "session demo is verified complete"
    with session.store() as store:
        record = read_record(store, "demo")
        assert sorted(record.completed) == [1, 2, 3] and sorted(record.claims) == [2, 3]
        assert record.accepted == {3} and list(record.rejected) == [2]
        assert "1 note is still open: remaining" in record.rejected[2]
        assert "(Task B)" in record.rejected[2]
        control = [f.meta for f in frames(store) if f.topic == "ralph.demo.control"]
        assert [c["action"] for c in control] == ["session_complete", "completion_rejected",
                                                  "session_complete", "completion_accepted"]
        assert [c["iteration"] for c in control] == [2, 2, 3, 3]
        assert open_notes(list_notes(store, session="demo")) == []
        done = [f.meta for f in frames(store) if f.topic == "ralph.demo.iteration"
                and f.meta["action"] == "complete"]
        assert [(d["n"], d["status"], d["verified"]) for d in done] == [
            (1, "success", False), (2, "success", False), (3, "success", True)]
        assert all({"timestamp", "run_id", "iteration", "iteration_id", "loop_status",
                    "reason", "commit"} <= set(d) for d in done)
    # The iteration after the rejection is told why, in its prompt.
    third = session.prompt(3)
    assert "Ralph's feedback on the last iteration" in third
    assert "completion claimed, but 1 note is still open" in third
    assert "Ralph's feedback" not in session.prompt(2)  # nothing to tell after iteration 1
    log = git(session.root, "log", "--format=%s").splitlines()
    assert log[:3] == ["ralph: nu-demo demo - Iteration #3",
                       "ralph: nu-demo demo - Iteration #2 (attempt 2, not verified: "
                       f"{record.rejected[2]})",
                       "config"]  # iteration 1 only wrote notes: nothing to commit
    assert (session.root / "b.txt").exists() and not git(session.root, "status", "--short")


async def test_the_prompt_is_the_template_filled_in(session: Session) -> None:
    session.plan(BREAK_DOWN)
    await session.run(iterations=1)
    prompt = session.prompt(1)
    store = str(session.root / ".ralph" / "store")
    assert prompt.startswith("You are iteration 1 of the named session `demo`")
    assert SPEC.strip() in prompt and "- Spec: ./specs/SPEC.md" in prompt
    assert f"notes list --store {store} --name demo --open --json" in prompt
    assert f"nu done --store {store} --name demo" in prompt
    assert "--iteration 1 --type completed --resolves ID" in prompt
    assert "No notes yet" in prompt
    assert "{" not in prompt.split("## State commands")[0].replace("{spec}", "")
    # The next one shows the notes the first one left, with their ids.
    session.plan(BREAK_DOWN, {"notes": []})
    await session.run(iterations=1)
    second = session.prompt(2)
    with session.store() as opened:
        ids = [n.id for n in list_notes(opened, session="demo")]
    assert "REMAINING:" in second and all(f"[{i}]" in second for i in ids)


async def test_a_project_template_is_used_and_a_spec_may_mention_braces(
        session: Session) -> None:
    (session.root / "PROMPT_nu.md").write_text("Mine: {name} #{iteration}\n{spec}\n{unknown}\n")
    (session.root / "specs" / "SPEC.md").write_text("Use {name} literally.\n")
    session.config()
    session.plan(BREAK_DOWN)
    await session.run(iterations=1)
    assert session.prompt(1) == "Mine: demo #1\nUse {name} literally.\n\n{unknown}\n"


async def test_numbering_continues_across_runs(session: Session) -> None:
    session.plan(BREAK_DOWN, {"notes": [["learning", "x"]]})
    first = await session.run(iterations=1)
    second = await session.run(iterations=2)
    assert (first.reason, second.reason) == ("max_iterations", "max_iterations")
    with session.store() as store:
        record = read_record(store, "demo")
        assert sorted(record.started) == [1, 2, 3]
        assert {record.started[n].meta["run_id"] for n in (2, 3)} == {second.run_id}
        assert record.started[1].meta["run_id"] == first.run_id


async def test_sessions_are_separate(session: Session) -> None:
    session.plan(BREAK_DOWN)
    await session.run(iterations=1, name="one")
    await session.run(iterations=1, name="two")
    with session.store() as store:
        assert read_record(store, "one").last == 1 and read_record(store, "two").last == 1
        assert len(list_notes(store, session="two")) == 2


async def test_an_iteration_that_claims_nothing_is_no_failure_and_nothing_blocks(
        session: Session) -> None:
    session.plan(BREAK_DOWN, {"notes": [["learning", "still going"]]})
    outcome = await session.run(iterations=5)  # more than loop.max_attempts_per_task
    assert (outcome.reason, outcome.iterations, outcome.blocked) == ("max_iterations", 5, 0)
    state = json.loads((session.root / ".ralph" / "state.json").read_text())
    assert state["tasks"]["nu-demo"]["failures"] == 0
    assert state["tasks"]["nu-demo"]["blocked"] is None
    assert state["no_progress_streak"] == 0  # a note is progress


async def test_no_progress_ends_an_unlimited_session(session: Session) -> None:
    session.plan({"print": ["nothing"]})
    outcome = await session.run()
    assert outcome.reason == "no_progress" and outcome.iterations == 3, outcome


async def test_failing_gates_reject_a_claim_and_say_why(session: Session) -> None:
    session.config(gates=["test -f b.txt"])
    session.plan({**BREAK_DOWN, "done": True}, {"finish_all": True, "done": True},
                 {"write": {"b.txt": "b"}, "done": True})
    outcome = await session.run()
    assert (outcome.reason, outcome.iterations) == ("complete", 3), outcome
    with session.store() as store:
        record = read_record(store, "demo")
    assert record.rejected[1].startswith("completion claimed, but 2 notes are still open")
    assert record.rejected[2] == "gate 'test -f b.txt' exited with 1"
    assert "The gate `test -f b.txt` exited with 1" in session.prompt(3)


async def test_a_verified_session_stays_complete_until_a_note_reopens_it(
        session: Session) -> None:
    session.plan({**BREAK_DOWN, "finish_all": True, "done": True}, {"finish_all": True,
                                                                      "done": True})
    assert (await session.run()).reason == "complete"
    again = await session.run()
    assert (again.reason, again.iterations) == ("complete", 0)
    with session.store() as store:
        add_note(store, "remaining", "One more thing", session="demo")
    reopened = await session.run()
    assert (reopened.reason, reopened.iterations) == ("complete", 1)
    with session.store() as store:
        assert read_record(store, "demo").accepted == {1, 2}


async def test_a_claim_needs_a_running_iteration(session: Session) -> None:
    with session.store() as store:
        with pytest.raises(NuError, match="no iteration of session 'demo' is running"):
            claim(store, "demo", session.root / ".ralph" / "loop.lock")
        with pytest.raises(NoteError, match="invalid session name"):
            claim(store, "no spaces", session.root / ".ralph" / "loop.lock")


@pytest.mark.parametrize(("options", "error", "match"), [
    (NuOptions(name="a b"), NoteError, "invalid session name 'a b': use letters, digits"),
    (NuOptions(name="x", spec="specs/none.md", agent="fake"), NuError,
     "spec file specs/none.md not found"),
    (NuOptions(name="x", agent="nobody"), Exception, "unknown agent 'nobody'"),
    (NuOptions(name="x", agent="fake", iterations=-1), NuError, "iterations must be 0"),
])
def test_what_cannot_start(session: Session, options: NuOptions, error: type[Exception],
                           match: str) -> None:
    with session.store() as store, pytest.raises(error, match=match):
        prepare(session.root, options, store)


def test_a_custom_prompt_without_spec_needs_no_spec_file(session: Session) -> None:
    with session.store() as store:
        setup = prepare(session.root, NuOptions(name="x", spec="none.md", agent="fake",
                                                prompt="Just {name}"), store)
        setup.service.close()


async def test_a_verdict_the_agent_appends_itself_counts_for_nothing(session: Session) -> None:
    session.plan({**BREAK_DOWN, "finish_all": True, "forge": True}, {"notes": []})
    outcome = await session.run(iterations=1)
    assert (outcome.reason, outcome.iterations) == ("max_iterations", 1), outcome
    with session.store() as store:
        assert read_record(store, "demo").accepted == {1}  # the forged frame, ignored
    # Nor in a later run: the loop's own record of the iteration says it was not verified.
    again = await session.run(iterations=1)
    assert (again.reason, again.iterations) == ("max_iterations", 1)


def test_the_model_replaces_the_one_an_opencode_command_line_names() -> None:
    assert with_model(["opencode", "run"], "a/b") == ["opencode", "run", "--model", "a/b"]
    assert with_model(["opencode", "run", "-m", "x/y", "-q"], "a/b") == [
        "opencode", "run", "-m", "a/b", "-q"]
    assert with_model(["opencode", "--model=x/y"], "a/b") == ["opencode", "--model=a/b"]


def test_a_model_that_cannot_reach_a_command_agent_is_said(session: Session) -> None:
    with session.store() as store:
        setup = prepare(session.root, NuOptions(name="x", agent="fake", model="a/b"), store)
        setup.service.close()
    assert setup.warnings == ["--model does not reach agent 'fake': its command line is its "
                              "own ([agents.fake] argv in ralph.toml)"]

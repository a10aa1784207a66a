"""The bridge's extensions to the protocol: `agent_output` events (the agent's output,
coalesced and held to a budget of characters per second), `task_blocked`, `blocked` and
`cost` in `status`, tokens and cost in `iteration_finished`, and a budget stop's message;
every documented field is still there. OutputCoalescer is also tested alone, with a clock
the test moves."""

from __future__ import annotations

import itertools
import re
import time
from typing import Any

from ralph.bridge.coalesce import BUDGET_CHARS_PER_S, FLUSH_S, OutputCoalescer
from ralph.bridge.models import AgentOutput
from ralph.store import Frame, Store
from tests.bridge.client import BridgeProcess
from tests.loop.conftest import Project
from tests.loop.test_cli_loop import set_loop
from tests.loop.test_cost_budget import use_fake_claude

OUTPUT_FIELDS = {"type", "ts", "runId", "iteration", "kind", "content", "role"}
BLOCKED_FIELDS = {"type", "ts", "runId", "task_id", "reason"}
# The documented fields (vscode-bridge-protocol v1); ours come on top.
STARTED_FIELDS = {"type", "ts", "runId", "iteration", "agent", "task_id", "title"}
FINISHED_DOCUMENTED = {"type", "ts", "runId", "iteration", "agent", "task_id", "exitSignal",
                       "returnCode", "repoClean", "gatesOk", "judgeOk", "reviewOk", "blocked",
                       "attemptId", "receiptsDir", "contextDir", "durationSeconds", "logPath"}
FINISHED_OURS = {"tokensIn", "tokensOut", "costUsd"}
STATUS_DOCUMENTED = {"version", "cwd", "prd", "progress", "agents", "prompt", "done", "total",
                     "next", "running", "paused", "activeRunId", "last"}
SKIPPED = re.compile(r"\[\.\.\. ([\d,]+) characters of output skipped here; the iteration's "
                     r"log has all of it\]")
TICK = {"tick": True, "print": ["done"]}


# -- OutputCoalescer with a clock the test moves -----------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


_seq = itertools.count(1)


def out(content: str, *, kind: str = "text", iteration: int = 1, role: str | None = None,
        run_id: str = "run_a", **meta: Any) -> Frame:
    n = next(_seq)
    body = {"run_id": run_id, "iteration": iteration, "kind": kind, "content": content,
            **meta}
    if role is not None:
        body["role"] = role
    return Frame(id=f"{n:025d}", seq=n, ts=f"2026-01-02T03:04:{n % 60:02d}.000Z",
                 topic="agent.output", stream=f"runs/{run_id}", meta=body, hash=None)


def coalescer(**options: Any) -> tuple[OutputCoalescer, list[AgentOutput], Clock]:
    sent: list[AgentOutput] = []
    clock = Clock()

    async def send(event: AgentOutput) -> None:
        sent.append(event)

    return OutputCoalescer(send, clock=clock, **options), sent, clock


async def test_lines_of_one_kind_become_one_event() -> None:
    c, sent, _ = coalescer()
    first = out("line 1")
    for frame in (first, out("line 2"), out("line 3")):
        await c.add(frame)
    assert sent == [] and c.pending
    await c.flush()
    assert len(sent) == 1
    event = sent[0].model_dump()
    assert event == {"type": "agent_output", "ts": first.ts, "runId": "run_a", "iteration": 1,
                     "kind": "text", "content": "line 1\nline 2\nline 3", "role": None}
    assert not c.pending
    await c.flush()
    assert len(sent) == 1  # nothing held: nothing sent


async def test_streamed_pieces_are_joined_as_they_are() -> None:
    c, sent, _ = coalescer()
    for piece in ("Hel", "lo, ", "world"):
        await c.add(out(piece, delta=True))
    await c.flush()
    assert [e.content for e in sent] == ["Hello, world"]


async def test_another_kind_role_iteration_or_run_starts_a_new_event() -> None:
    c, sent, _ = coalescer()
    frames = [out("a"), out("b"),
              out('{"command": "ls -la"}', kind="tool_use", tool="Bash"),
              out("judging", role="judge"), out("next", iteration=2),
              out("other run", iteration=2, run_id="run_b")]
    for frame in frames:
        await c.add(frame)
    await c.flush()
    assert [(e.kind, e.content, e.role, e.iteration, e.runId) for e in sent] == [
        ("text", "a\nb", None, 1, "run_a"), ("tool_use", "Bash: ls -la", None, 1, "run_a"),
        ("text", "judging", "judge", 1, "run_a"), ("text", "next", None, 2, "run_a"),
        ("text", "other run", None, 2, "run_b")]


async def test_a_full_event_is_sent_at_once() -> None:
    c, sent, _ = coalescer(max_chars=10)
    await c.add(out("12345"))
    assert sent == []
    await c.add(out("67890"))  # 11 characters with the newline: at least max_chars
    assert [e.content for e in sent] == ["12345\n67890"]
    assert not c.pending


async def test_held_text_is_due_after_flush_s() -> None:
    c, _, clock = coalescer()
    assert not c.due()
    await c.add(out("x"))
    assert not c.due()
    start = clock.now
    clock.now = start + FLUSH_S / 2
    await c.add(out("y"))  # more text does not postpone it
    assert not c.due()
    clock.now = start + FLUSH_S
    assert c.due()


async def test_output_beyond_the_budget_is_skipped_and_counted() -> None:
    c, sent, clock = coalescer(budget_per_s=100, max_chars=10_000)
    await c.add(out("a" * 250))  # the bucket holds one second's worth: 100
    await c.flush()
    assert sent[0].content == "a" * 100 + (
        "\n[... 150 characters of output skipped here; the iteration's log has all of it]")
    clock.now += 0.5  # half a second refills half the bucket
    await c.add(out("b" * 100))
    await c.flush()
    assert sent[1].content == "b" * 50 + (
        "\n[... 50 characters of output skipped here; the iteration's log has all of it]")
    clock.now += 60  # a long pause: the bucket is full again, not fuller
    await c.add(out("c" * 150))
    await c.add(out("d" * 10))  # nothing left this second
    await c.flush()
    assert sent[2].content == "c" * 100 + (  # all of "d" skipped: no empty line for it
        "\n[... 60 characters of output skipped here; the iteration's log has all of it]")


async def test_a_second_with_nothing_allowed_says_only_what_was_skipped() -> None:
    c, sent, _ = coalescer(budget_per_s=10)
    await c.add(out("z" * 10))
    await c.flush()
    await c.add(out("z" * 500))
    await c.flush()
    assert sent[1].content == (
        "[... 500 characters of output skipped here; the iteration's log has all of it]")


async def test_the_rest_of_an_excerpt_counts_as_skipped() -> None:
    """A store event carries the beginning of a long text (`chars` says how long it is):
    the editor is told how much of it is only in the log."""
    c, sent, _ = coalescer()
    await c.add(out("the beginning", chars=5000))
    await c.add(out("a short line", chars=12))
    await c.add(out('{"command": "make"}', kind="tool_use", tool="Bash", chars=19))
    await c.flush()
    assert sent[0].content == ("the beginning\na short line\n[... 4,987 characters of output "
                               "skipped here; the iteration's log has all of it]")
    assert sent[1].content == "Bash: make"  # a summary, not an excerpt: nothing skipped


async def test_a_flood_is_bounded_by_the_budget_and_every_character_is_accounted_for() -> None:
    c, sent, clock = coalescer(budget_per_s=1000, max_chars=4000)
    total = 0
    for i in range(2000):  # 20 simulated seconds of 100 lines/s of 120 characters
        line = f"{i:06d}" + "x" * 114
        total += len(line)
        await c.add(out(line))
        clock.now += 0.01
        if c.due():
            await c.flush()
    await c.flush()
    delivered = skipped = 0
    for event in sent:
        text = event.content
        for match in SKIPPED.finditer(text):
            skipped += int(match[1].replace(",", ""))
        text = SKIPPED.sub("", text)
        delivered += len(text.replace("\n", ""))
    assert delivered + skipped == total
    assert delivered <= 1000 * (20 + 1)  # a second's bucket, then the rate
    assert delivered >= 1000 * 19  # and the budget is used, not wasted
    # what got through comes in order
    numbers = [int(n) for e in sent for n in re.findall(r"^(\d{6})x", e.content, re.M)]
    assert numbers == sorted(numbers) and len(numbers) > 100


# -- through a real bridge ---------------------------------------------------------------------


def outputs(bridge: BridgeProcess) -> list[dict[str, Any]]:
    return [e for e in bridge.events if e["type"] == "agent_output"]


def test_many_lines_come_as_few_events_in_order(project: Project) -> None:
    lines = [f"line {i:03d}" for i in range(300)]
    project.plan({"tasks": {"1": [{"tick": True, "print": lines}]}})
    with BridgeProcess(project.root) as bridge:
        bridge.wait_event("bridge_started")
        result = bridge.call("step")
        finished = bridge.wait_event("iteration_finished")
        events = outputs(bridge)
    assert result["task_id"] == "1"
    assert events, bridge.events
    for event in events:
        assert set(event) == OUTPUT_FIELDS
        assert event["runId"] == finished["runId"] and event["iteration"] == 1
        assert (event["kind"], event["role"]) == ("text", None)
    said = "\n".join(e["content"] for e in events).splitlines()
    assert said == ["fake agent working on task 1", *lines]
    assert len(events) <= len(said) // 10  # coalesced: a few events, not one a line
    types = [e["type"] for e in bridge.events]
    assert types.index("iteration_started") < types.index("agent_output")
    assert max(i for i, t in enumerate(types) if t == "agent_output") < types.index(
        "iteration_finished")


def test_megabytes_of_output_reach_the_editor_within_the_budget(project: Project) -> None:
    project.plan({"tasks": {"1": [{"print_bytes": 5_000_000}]}})
    started = time.monotonic()
    with BridgeProcess(project.root) as bridge:
        bridge.call("step", timeout=120)
        bridge.wait_event("iteration_finished", timeout=120)
        elapsed = time.monotonic() - started
        assert bridge.call("ping")["ok"] is True
        events = outputs(bridge)
    with Store(project.root / ".ralph" / "store") as store:
        recorded = [f.meta for f in store.read(topic="agent.output")]
    # The store's events carry an excerpt and the whole text's length (`chars`): the log
    # has the rest. What reaches the editor is the excerpts, within the budget.
    total = sum(int(meta["chars"]) for meta in recorded)
    assert total >= 4_990_000
    delivered = skipped = 0
    for event in events:
        for match in SKIPPED.finditer(event["content"]):
            skipped += int(match[1].replace(",", ""))
        delivered += len(SKIPPED.sub("", event["content"]))
    assert skipped > 0 and any(SKIPPED.search(e["content"]) for e in events)
    # Every character is sent or said to be skipped (what was sent also holds the newlines
    # that join consecutive events' texts: at most one per event of the store).
    assert total <= delivered + skipped <= total + len(recorded) + len(events)
    assert delivered <= BUDGET_CHARS_PER_S * (elapsed + 1)
    assert len(events) < len(recorded)
    log = project.root / ".ralph" / "logs" / "000001.log"
    assert log.stat().st_size >= 4_990_000  # the log has all of it


def test_a_judges_output_carries_its_role(project: Project) -> None:
    project.config("\n[judge]\nenabled = true\n", gates=["true"])
    project.commit("judge")
    project.plan({"tasks": {"1": [TICK]}, "judge": [True]})
    with BridgeProcess(project.root) as bridge:
        bridge.wait_event("bridge_started")
        assert bridge.call("step")["judge_ok"] is True
        bridge.wait_event("iteration_finished")
        events = outputs(bridge)
    by_role = {e["role"]: e["content"] for e in events}
    assert set(by_role) == {None, "judge"}
    assert "judge looked at the change" in by_role["judge"]
    assert "JUDGE_SIGNAL: true" in by_role["judge"]
    assert "judge" not in by_role[None]


def test_tool_calls_and_usage_of_a_parsed_agent(project: Project) -> None:
    use_fake_claude(project)
    with BridgeProcess(project.root) as bridge:
        bridge.wait_event("bridge_started")
        bridge.call("step")
        finished = bridge.wait_event("iteration_finished")
        events = outputs(bridge)
    kinds = [(e["kind"], e["content"]) for e in events]
    assert ("tool_use", "Bash: echo work > work-1.txt") in kinds
    assert ("tool_result", "wrote work-1.txt\nsecond line of the result") in kinds
    assert ("reasoning", "The task wants a file, then the box ticked.") in kinds
    assert ("text", "Did task 1.") in kinds
    assert set(finished) == FINISHED_DOCUMENTED | FINISHED_OURS
    assert (finished["tokensIn"], finished["tokensOut"], finished["costUsd"]) == (
        1000, 200, 0.25)


def test_a_blocked_task_an_event_and_in_status(project: Project) -> None:
    project.config()
    set_loop(project, max_attempts_per_task=1)
    project.commit("one attempt")
    project.plan({"tasks": {"1": [{"print": ["cannot do it"]}]}})
    with BridgeProcess(project.root) as bridge:
        bridge.wait_event("bridge_started")
        result = bridge.call("step")
        blocked = bridge.wait_event("task_blocked")
        finished = bridge.wait_event("iteration_finished")
        status = bridge.call("status")
    assert result["blocked"] is True and finished["blocked"] is True
    assert set(blocked) == BLOCKED_FIELDS
    assert (blocked["runId"], blocked["task_id"]) == (finished["runId"], "1")
    assert blocked["reason"].startswith("1 attempt failed; last: ")
    assert set(status) >= STATUS_DOCUMENTED
    assert status["blocked"] == [{"task_id": "1", "title": "First task",
                                  "reason": blocked["reason"]}]
    assert status["next"]["task_id"] == "3"  # 2 waits on the blocked 1
    # a command agent reports no usage: null, not 0
    assert (finished["tokensIn"], finished["tokensOut"], finished["costUsd"]) == (
        None, None, None)
    assert status["cost"]["last_run"]["iterations"] == 1
    assert status["cost"]["all_runs"]["total"]["tokens_in"] == 0


def test_status_cost_and_every_documented_field_after_a_run(project: Project) -> None:
    use_fake_claude(project)
    with BridgeProcess(project.root) as bridge:
        bridge.wait_event("bridge_started")
        run_id = bridge.call("run", {"maxIterations": 5})["runId"]
        stopped = bridge.wait_event("run_stopped", runId=run_id)
        status = bridge.call("status")
        events = [e for e in bridge.events if e.get("runId") == run_id]
    assert stopped == {"type": "run_stopped", "ts": stopped["ts"], "runId": run_id,
                       "reason": "complete", "message": "all 3 tasks are verified done"}
    started = next(e for e in events if e["type"] == "run_started")
    assert set(started) == {"type", "ts", "runId", "agent", "maxIterations", "startIteration"}
    for event in events:
        if event["type"] == "iteration_started":
            assert set(event) == STARTED_FIELDS
        if event["type"] == "iteration_finished":
            assert set(event) == FINISHED_DOCUMENTED | FINISHED_OURS
            assert (event["tokensIn"], event["costUsd"]) == (1000, 0.25)
    assert set(status) == STATUS_DOCUMENTED | {"blocked", "cost", "prd_error"}
    assert status["blocked"] == [] and status["prd_error"] is None
    last_run = status["cost"]["last_run"]
    assert last_run["run_id"] == run_id and last_run["iterations"] == 3
    assert (last_run["total"]["tokens_in"], last_run["total"]["tokens_out"]) == (3000, 600)
    assert last_run["total"]["cost_usd"] == 0.75
    assert last_run["agents"]["claude"]["agent_runs"] == 3
    assert status["cost"]["all_runs"]["total"]["tokens_in"] == 3000


def test_odd_frames_in_a_run_stream_do_not_stop_the_events(project: Project) -> None:
    """Anyone may append to a run's stream: frames the bridge cannot make events of (a count
    that is not a number, a run.started without maxIterations) are skipped, and the events
    after them still reach the client."""
    stream = "runs/run_fake"
    base = {"run_id": "run_fake"}
    with BridgeProcess(project.root) as bridge:
        bridge.wait_event("bridge_started")
        with Store(project.root / ".ralph" / "store") as store:
            store.append("loop.error", {**base, "message": "first"}, stream=stream)
            store.append("agent.output", {**base, "iteration": "x", "kind": "text",
                                          "content": "odd", "chars": "abc"}, stream=stream)
            store.append("run.started", {**base, "agent": "fake", "startIteration": 1,
                                         "mode": "run"}, stream=stream)
            store.append("loop.error", {**base, "message": "second"}, stream=stream)
        second = bridge.wait_event("error", message="second")
        assert bridge.call("ping")["ok"] is True
        errors = [e for e in bridge.events if e["type"] == "error"]
        assert [e["message"] for e in errors] == ["first", "second"]
        assert second["runId"] == "run_fake"
        assert not any(e["type"] == "run_started" for e in bridge.events)
        assert bridge.call("status")["running"] is False

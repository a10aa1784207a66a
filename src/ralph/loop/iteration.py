"""One iteration of the Golden Ralph Loop: a fresh agent on one task, then the verdict.

The orchestrator decides: the task is done only if the tracker marks it done, every gate
passed, and the enabled judge and reviewer said yes. The agent's EXIT_SIGNAL is recorded as
a hint and never decides anything.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shlex
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson

from ralph.agents import adapter_for
from ralph.agents.base import AgentError
from ralph.agents.runner import AgentOutcome, run_agent
from ralph.config import Config, ResolvedAgent
from ralph.errors import RalphError
from ralph.fsutil import atomic_write_bytes, atomic_write_text
from ralph.git import Git, WorkTree
from ralph.loop.checks import CheckResult, judge_verdict, review_verdict
from ralph.loop.errors import AgentUnusable, LoopError, NothingToDo
from ralph.loop.events import EventSink
from ralph.loop.gates import GateReceipt, run_gates, tail_lines
from ralph.loop.models import IterationStatus, LastIteration
from ralph.loop.paths import RUNTIME_PATHS, ProjectPaths
from ralph.loop.plan import SessionPlan
from ralph.loop.prompt import Memory, build_prompt, notes_section
from ralph.loop.protect import Change, Guard, describe, put_back, put_back_note
from ralph.loop.ratelimit import backoff_seconds, wait_for_start_slot
from ralph.loop.results import StepResult
from ralph.loop.state import InFlight, LoopState, save_state
from ralph.loop.status import StatusSource, stale_blocks
from ralph.loop.usage import RunSpend, SpendByAgent
from ralph.loop.worktree import (
    agent_paths,
    attempt_message,
    covered,
    gate_changes,
    ralph_files,
    remember_gate_outputs,
    tree_is_clean,
    untracked_outputs,
)
from ralph.notes import NoteFeed
from ralph.store import Store
from ralph.store.frame import format_ts
from ralph.tracker import Snapshot, Task, TaskStatus, Tracker, TrackerError
from ralph.wording import counted, every_task

log = logging.getLogger("ralph.loop")

RUNTIME = list(RUNTIME_PATHS)
DIFF_CHARS = 100_000  # the diff shown to the judge and the reviewer
# Agent run outcomes no retry can fix: the run stops instead of spending attempts on them.
UNUSABLE = ("auth_error", "config_error")
# What the next attempt is told about the last one (state.json keeps it: bounded).
MAX_GATE_NOTES = 3  # failing gates shown
FEEDBACK_TAIL_LINES = 40  # of each one's output
FEEDBACK_TAIL_CHARS = 3000
LAST_WORDS_CHARS = 1500  # of the agent's own last message
CHECK_WORDS_CHARS = 1500  # of what a judge or reviewer that said no wrote
NOTE_CHARS = 3500  # one note
NOTES_CHARS = 12000  # all of them


def now_ts() -> str:
    return format_ts(time.time_ns() // 1_000_000)


@dataclass
class LoopContext:
    """What an iteration works with; `state` is saved after every change that matters."""

    paths: ProjectPaths
    config: Config
    store: Store
    git: Git
    state: LoopState
    server: tuple[str, str] | None = None  # (agent name, url) of the run's agent server
    # Where the tracker comes from: one that keeps its last parse for the service's life
    # (ralph.tracker.filecache), shared with `status`.
    source: StatusSource | None = None
    notes: NoteFeed | None = None  # the session notes for the prompts, read as they come
    plan: SessionPlan | None = None  # a named session's (`ralph nu`): its tracker and prompt

    def save(self, *, durable: bool = True) -> None:
        save_state(self.paths.state, self.state, durable=durable)

    def tracker(self) -> Tracker:
        if self.plan is not None:
            return self.plan.tracker()
        if self.source is None:
            self.source = StatusSource(self.paths, self.config.files)
        return self.source.tracker()


def nothing_to_do(tasks: Snapshot) -> NothingToDo:
    done = tasks.done
    if done == len(tasks):
        return NothingToDo(f"nothing to do: {every_task(done)} done", complete=True)
    blocked = [t.id for t in tasks if t.status == "blocked"]
    return NothingToDo(f"no task is ready: {done} of {len(tasks)} done; blocked: "
                       f"{', '.join(blocked) or 'none'}; the rest wait on them", complete=False)


class Iteration:
    """Runs one iteration; `run()` returns its StepResult (also appended as an event)."""

    def __init__(self, ctx: LoopContext, *, run_id: str, agent: ResolvedAgent,
                 emit: EventSink) -> None:
        self.ctx = ctx
        self.run_id = run_id
        self.agent = agent
        self.emit = emit
        self._record: _Record | None = None

    # -- the whole ---------------------------------------------------------------------

    async def run(self) -> StepResult:
        ctx = self.ctx
        tracker = ctx.tracker()
        tasks = tracker.snapshot()
        self._forget_stale_blocks(tasks)
        task = tasks.next_task()
        if task is None:
            raise nothing_to_do(tasks)
        iteration, attempt_id = self._take_numbers(task)
        plan = ctx.plan
        number = plan.begin(iteration, self.run_id) if plan is not None else None
        # A session's claims are frames of its own iteration: nothing to reopen after a death.
        tracker_copy = self._keep_tracker_copy(tracker) if plan is None else None
        self.emit = self.emit.tagged(iteration=iteration)  # every event of it says which
        started = now_ts()
        clock = time.monotonic()
        # A session's iteration is known by its title (a recovery's commit message uses it).
        title = plan.title(number) if plan is not None and number is not None else task.title
        ctx.state.in_flight = InFlight(iteration=iteration, iteration_id=f"{iteration:06d}",
                                       run_id=self.run_id, task_id=task.id,
                                       task_title=title, attempt_id=attempt_id,
                                       started_at=started, pid=_pid(),
                                       tracker_copy=tracker_copy)
        ctx.save(durable=False)  # a process that dies from here on leaves it to recover
        self.emit("iteration.started", {"iteration": iteration, "iteration_id": f"{iteration:06d}",
                                        "agent": self.agent.name, "task_id": task.id,
                                        "title": task.title, "kind": task.kind,
                                        "attempt_id": attempt_id})
        record = _Record(iteration=iteration, task=task, attempt_id=attempt_id, started=started,
                         tasks_before=tasks, session_number=number)
        self._record = record
        try:
            await self._work(tracker, record)
        except asyncio.CancelledError:
            record.status = "stopped"
            record.reason = "stopped before the iteration finished"
            await self._end_without_verdict(tracker, record, clock)
            raise
        except AgentUnusable as exc:
            # Not an attempt: nothing is counted or blocked, and the run stops. The agent
            # that could not work changed nothing; a judge or reviewer that could not work
            # leaves the worker's change, which is kept as this attempt's work.
            record.status = "error"
            record.reason = str(exc)
            if record.outcome is None and isinstance(exc.outcome, AgentOutcome):
                record.outcome = exc.outcome
                record.return_code = exc.outcome.exit_code
            await self._end_without_verdict(tracker, record, clock)
            raise
        except (RalphError, OSError) as exc:
            # The orchestrator could not go on (a missing prompt file, a log it cannot
            # write): record the iteration as such, so that nothing is left in flight, and
            # keep what the agent did (a later start must not find it as a stranger's change).
            record.status = "error"
            record.reason = str(exc)
            await self._end_without_verdict(tracker, record, clock)
            if isinstance(exc, OSError):
                raise LoopError(f"iteration {iteration}: {exc}") from exc
            raise
        return self._finish(record, clock)

    async def _end_without_verdict(self, tracker: Tracker, rec: _Record, clock: float) -> None:
        """Keep what the iteration left, then record it, even if a second stop cuts the
        keeping short (the next start's recovery then finishes it)."""
        try:
            await self._keep_unfinished_work(tracker, rec)
            rec.repo_clean = await self._clean_now(rec)
        finally:
            self._finish(rec, clock)

    def _keep_tracker_copy(self, tracker: Tracker) -> str | None:
        """The tracker file as the iteration starts, kept (as one runtime file) for a later
        start to tell what the iteration marked done if this process dies during it."""
        copy = self.ctx.paths.tracker_at_start(tracker.path.suffix)
        try:
            text = tracker.text()
            copy.parent.mkdir(parents=True, exist_ok=True)
            # Written in place, not by rename: state.json names it only once it is whole.
            copy.write_text(text, encoding="utf-8")
        except (OSError, TrackerError) as exc:
            log.warning("could not keep a copy of the tracker for recovery: %s", exc)
            return None
        return self.ctx.paths.relative(copy)

    def _take_numbers(self, task: Task) -> tuple[int, str]:
        """The next iteration number and the task's next attempt id. Numbers whose files
        exist are taken (state.json was reset after damage, say): the log and attempt
        record of an earlier iteration are never overwritten."""
        ctx = self.ctx
        ctx.state.iteration_count += 1
        while ctx.paths.log(ctx.state.iteration_count).exists():
            ctx.state.iteration_count += 1
        task_state = ctx.state.task(task.id)
        task_state.attempts += 1
        while ctx.paths.attempt_file(task.id, f"{task.id}-{task_state.attempts}").exists():
            task_state.attempts += 1
        return ctx.state.iteration_count, f"{task.id}-{task_state.attempts}"

    async def _work(self, tracker: Tracker, rec: _Record) -> None:
        ctx, task = self.ctx, rec.task
        paths = ctx.paths
        before = await ctx.git.snapshot(exclude=RUNTIME)
        rec.before = before
        if ctx.state.in_flight is not None:  # saved with the agent's process group below
            ctx.state.in_flight.head = before.head
        if ctx.plan is not None and rec.session_number is not None:
            prompt = ctx.plan.prompt(rec.session_number, ctx.state.task(task.id).notes)
        else:
            prompt = build_prompt(
                self._template(task), task, branch=before.branch,
                git_status=before.short(), memory=self._memory(),
                budget=ctx.config.loop.context_chars,
                progress_tail=ctx.config.loop.progress_tail_chars,
                notes=ctx.state.task(task.id).notes, gates=ctx.config.gates.commands,
                session_notes=self._session_notes())
        rec.context_dir = paths.context_dir(task.id, rec.attempt_id)
        rec.context_dir.mkdir(parents=True, exist_ok=True)
        rec.guard = await Guard.begin(ctx.config, ctx.git, paths.root, before,
                                      rec.context_dir / "protected",
                                      outputs=ctx.state.gate_outputs)
        prompt_file = rec.context_dir / "prompt.md"
        prompt_file.write_text(prompt, encoding="utf-8")  # a new file nobody reads yet
        rec.log_path = paths.log(rec.iteration)
        outcome = await self._agent(prompt, prompt_file, rec.log_path, "agent", rec)
        rec.outcome = outcome
        rec.exit_signal = outcome.exit_signal
        rec.return_code = outcome.exit_code
        after = await ctx.git.snapshot(exclude=RUNTIME)
        rec.after = after
        # Files or commits; files the gates made and the agent only made again do not count.
        rec.progress_by_agent = after.head != before.head or bool(
            agent_paths(before, after, ctx.state.gate_outputs))
        # Before the gates: they judge the task's own work, on inputs the agent left alone.
        await self._put_back_protected(rec, after)
        self._undo_other_tracker_edits(tracker, rec)
        if ctx.config.git.auto_commit:  # what the gates create is not the agent's work
            await self._stage_agent_work(rec, after)
        await self._verify(tracker, rec, outcome)
        await self._settle(tracker, rec)

    # -- the agent --------------------------------------------------------------------------

    async def _agent(self, prompt: str, prompt_file: Path, log_path: Path,
                     role: str, rec: _Record) -> AgentOutcome:
        """Run the agent, waiting out rate limits (which count as neither failure nor
        attempt): the hourly cap first, then backoff or the CLI's reset time. What each
        run used is added to the iteration's spend."""
        spend = rec.spend
        loop_cfg = self.ctx.config.loop
        retries = 0
        while True:
            await wait_for_start_slot(self.ctx.state, loop_cfg.rate_limit_per_hour, self.emit)
            if loop_cfg.rate_limit_per_hour:  # the starts it counts must outlive this process
                self.ctx.save()
            outcome = await run_agent(self.agent, prompt, cwd=self.ctx.paths.root,
                                      prompt_file=prompt_file, log_path=log_path,
                                      emit=self._role_emit(role), on_start=self._started,
                                      attach=self._attach(),
                                      context_env=self._context_env(rec, prompt_file, role),
                                      silence_warning_s=loop_cfg.silence_warning_seconds)
            if outcome.usage is not None:
                spend.add_usage(self.agent.name, outcome.usage)
            if outcome.status in UNUSABLE:
                raise AgentUnusable(unusable_message(self.agent, outcome), outcome)
            if outcome.status != "rate_limited":
                return outcome
            if retries >= loop_cfg.rate_limit_max_retries:
                self.emit("agent.rate_limited", {"reason": outcome.message, "wait_seconds": None,
                                                 "retry": None, "role": role})
                return replace(outcome, status="error", message=(
                    f"still rate limited after {retries} retries "
                    f"(loop.rate_limit_max_retries): {outcome.message}"))
            wait = backoff_seconds(retries, retry_after_s=outcome.retry_after_s,
                                   reset_at=outcome.reset_at,
                                   cap_s=loop_cfg.rate_limit_max_wait_seconds)
            self.emit("agent.rate_limited", {"reason": outcome.message, "wait_seconds": wait,
                                             "retry": retries + 1, "role": role})
            retries += 1
            await asyncio.sleep(wait)

    def _context_env(self, rec: _Record, prompt_file: Path, role: str) -> dict[str, str]:
        """Where the agent is, in its environment (a command agent may have no other way
        to know): docs/agents.md lists them."""
        paths = self.ctx.paths
        env = {"RALPH_TASK_ID": rec.task.id, "RALPH_TASK_TITLE": rec.task.title,
               "RALPH_ITERATION": str(rec.iteration),
               "RALPH_ATTEMPT": rec.attempt_id.rsplit("-", 1)[-1],
               "RALPH_RUN_ID": self.run_id, "RALPH_PROMPT_FILE": str(prompt_file),
               "RALPH_STORE": self.ctx.store.location, "RALPH_PROJECT_ROOT": str(paths.root),
               "RALPH_ROLE": role}
        if self.ctx.plan is not None and rec.session_number is not None:
            env |= self.ctx.plan.env(rec.session_number)
        return env

    def _attach(self) -> tuple[str, str] | None:
        """(url, title) when this agent runs attached to the run's server."""
        server = self.ctx.server
        rec = self._record
        if server is None or server[0] != self.agent.name or rec is None:
            return None
        if self.ctx.plan is not None and rec.session_number is not None:
            return server[1], self.ctx.plan.title(rec.session_number)
        return server[1], f"{self.ctx.paths.root.name} - Iteration #{rec.iteration}"

    def _edited(self) -> None:
        if self._record is not None:
            self._record.edited = True

    def _started(self, pgid: int) -> None:
        """Record the agent's process group, so that if this process dies the next start can
        end the agent it left behind."""
        flight = self.ctx.state.in_flight
        if flight is not None:
            flight.agent_pgid = pgid
            self.ctx.save(durable=False)

    def _role_emit(self, role: str) -> EventSink:
        return self.emit if role == "agent" else self.emit.tagged(role=role)

    # -- verification -----------------------------------------------------------------------

    async def _verify(self, tracker: Tracker, rec: _Record, outcome: AgentOutcome) -> None:
        ctx, task = self.ctx, rec.task
        try:
            after = tracker.snapshot()
        except TrackerError as exc:
            rec.reason = f"the tracker could not be read after the agent ran: {exc}"
            return
        claimed = after.is_done(task.id)
        rec.claimed = claimed
        if outcome.status != "ok":
            rec.status = "agent_failed"
            rec.reason = f"the agent {_agent_failure(outcome)}"
            return
        receipts_dir = ctx.paths.receipts_dir(task.id, rec.attempt_id)
        rec.receipts = await run_gates(ctx.config.gates.commands, cwd=ctx.paths.root,
                                       timeout_s=ctx.config.gates.timeout_seconds,
                                       receipts_dir=receipts_dir, emit=self.emit,
                                       on_start=self._started)
        rec.receipts_dir = receipts_dir
        rec.gates_ok = all(r.ok for r in rec.receipts)
        failed = [r for r in rec.receipts if not r.ok]
        if rec.protected:  # the gates ran on the inputs as they were, for the record
            rec.reason = (f"the agent changed protected paths: {describe(rec.protected)} "
                          "(put back)")
        elif not claimed:
            rec.reason = ("no completion was claimed (`ralph nu done`)" if ctx.plan is not None
                          else "the tracker does not mark the task done")
        elif ctx.plan is not None and (unsettled := ctx.plan.unsettled()) is not None:
            rec.reason = unsettled
        elif failed:
            first = failed[0]
            how = "timed out" if first.timed_out else f"exited with {first.exit_code}"
            rec.reason = f"gate '{first.command}' {how}"
        if rec.reason is None and ctx.config.judge.enabled:
            result = await self._check("judge", task, rec)
            rec.judge_ok = result.ok
            rec.reason = result.reason
        if rec.reason is None and ctx.config.review.enabled:
            result = await self._check("review", task, rec)
            rec.review_ok = result.ok
            rec.reason = result.reason
        rec.verified = rec.reason is None
        rec.status = "done" if rec.verified else "not_done"

    async def _check(self, role: str, task: Task, rec: _Record) -> CheckResult:
        ctx = self.ctx
        section = ctx.config.judge if role == "judge" else ctx.config.review
        prompt_name = section.prompt or (ctx.config.files.judge if role == "judge"
                                         else ctx.config.files.review)
        template = _read(ctx.paths.root / prompt_name, required=True)
        # The agent's work as staged (with its own commits): not what the gates made since.
        base = rec.before.head if rec.before is not None else None
        diff = await ctx.git.diff(base=base, max_bytes=DIFF_CHARS, cached=rec.stage_done)
        context = ctx.plan.check_context() if ctx.plan is not None else ""
        prompt = (f"{template.rstrip()}\n\n## Task {task.id}: {task.title}\n\n"
                  + "".join(f"- {a}\n" for a in task.acceptance) + context
                  + f"\n## The change\n\n```diff\n{diff}\n```\n")
        assert rec.context_dir is not None
        prompt_file = rec.context_dir / f"{role}_prompt.md"
        atomic_write_text(prompt_file, prompt, durable=False)
        checker = ctx.config.agent(section.agent) if section.agent else self.agent
        runner = Iteration(ctx, run_id=self.run_id, agent=checker, emit=self.emit)
        outcome = await runner._agent(prompt, prompt_file, ctx.paths.log(rec.iteration, f".{role}"),
                                      role, rec)
        result = judge_verdict(outcome) if role == "judge" else review_verdict(outcome)
        if not result.ok:  # the next attempt hears why, in the checker's own words
            who = "The judge" if role == "judge" else "The reviewer"
            words = outcome.tail.strip()[-CHECK_WORDS_CHARS:]
            rec.checks_said.append(f"{who} said no: {result.reason}."
                                   + (f" It wrote:\n{_quote(words)}" if words else ""))
        self.emit(f"{role}.finished", {"ok": result.ok, "reason": result.reason,
                                       "agent": checker.name, "exit_code": outcome.exit_code})
        return result

    # -- consequences -----------------------------------------------------------------------

    async def _settle(self, tracker: Tracker, rec: _Record) -> None:
        """Reopen or block in the tracker, record in progress.md, commit, update counters."""
        ctx, task = self.ctx, rec.task
        task_state = ctx.state.task(task.id)
        if ctx.plan is not None:
            self._settle_session(ctx.plan, rec)
        elif rec.verified:
            # Done: nothing of it is needed any more (its attempts are in .ralph/attempts),
            # and state.json, written several times an iteration, stays small.
            del ctx.state.tasks[task.id]
            self.emit("task.done", {"task_id": task.id, "title": task.title,
                                    "attempt_id": rec.attempt_id})
        else:
            if rec.claimed:
                self._reopen(tracker, [task], rec.reason or "not verified")
            task_state.notes = self._notes_for_next_attempt(rec)
            task_state.failures += 1
            if task_state.failures >= ctx.config.loop.max_attempts_per_task:
                reason = (f"{counted(task_state.failures, 'attempt')} failed; last: "
                          f"{rec.reason}")
                self._mark(tracker, task, "blocked", reason)
                task_state.blocked = reason
                rec.blocked = True
                self._note(f"Ralph blocked task {task.id} ({task.title}): {reason}.")
                self.emit("task.blocked", {"task_id": task.id, "reason": reason})
        rec.progress_made = rec.verified or rec.progress_by_agent
        # A block moves the run on to another task: that is a change, not a stall.
        ctx.state.no_progress_streak = 0 if rec.progress_made or rec.blocked else (
            ctx.state.no_progress_streak + 1)
        await self._commit(rec)
        rec.repo_clean = await self._repo_clean(rec)

    def _settle_session(self, plan: SessionPlan, rec: _Record) -> None:
        """A named session is one long task: an iteration that claimed nothing is not a
        failed attempt (it did one of the spec's tasks), and nothing is ever blocked (the
        iteration limit, the no-progress streak, budgets and stop end it). A claim is
        judged: accepted, the session is complete; rejected, why is recorded and told to the
        next iteration, with what failing gates said."""
        task_state = self.ctx.state.task(rec.task.id)
        if rec.session_number is not None:
            if rec.claimed:
                plan.judged(rec.session_number, rec.verified, rec.reason)
            # Notes are the session's progress as much as files and commits are.
            rec.progress_by_agent |= plan.noted(rec.session_number)
        if rec.verified:
            del self.ctx.state.tasks[rec.task.id]
            self.emit("task.done", {"task_id": rec.task.id, "title": rec.task.title,
                                    "attempt_id": rec.attempt_id})
            return
        # A rejected claim needs no reopening: the rejection frame is its record.
        told = rec.claimed or rec.gates_ok is False or rec.protected or (
            rec.outcome is not None and rec.outcome.status != "ok")
        notes = self._notes_for_next_attempt(rec) if told else []
        # "Not verified" says nothing to an iteration that claimed nothing: what went wrong
        # (a gate, a put back path, the agent's end) follows it.
        task_state.notes = notes if rec.claimed else notes[1:]

    def _notes_for_next_attempt(self, rec: _Record) -> list[str]:
        """What the next attempt's prompt tells the agent about this one, most useful
        first: why it was not verified, the failing gates with the end of their output,
        what the judge and reviewer said, what was put back or reopened, and the agent's
        own last words. Bounded: each note and the whole (state.json keeps them)."""
        notes = [f"Ralph did not verify it: {rec.reason or 'not verified'}."]
        for receipt in [r for r in rec.receipts if not r.ok][:MAX_GATE_NOTES]:
            how = "timed out" if receipt.timed_out else f"exited with {receipt.exit_code}"
            tail = self._gate_output_tail(receipt)
            shown = f" The end of its output:\n```\n{tail}\n```" if tail else ""
            notes.append(f"The gate `{receipt.command}` {how}.{shown}")
        notes += rec.checks_said
        if rec.protected:
            notes.append(f"Ralph put back your changes to protected paths: "
                         f"{describe(rec.protected, limit=20)}. The gates judge your work "
                         "with them as they are: change the code, not what checks it.")
        for task_id, why in rec.reopened[:5]:
            notes.append(f"Ralph reopened task {task_id}: {why}.")
        if rec.outcome is not None and rec.outcome.status != "ok":
            notes.append(f"Your run ended badly: {_agent_failure(rec.outcome)}.")
        said = rec.outcome.tail.strip() if rec.outcome is not None else ""
        if said:
            notes.append("Your last message was:\n" + _quote(said[-LAST_WORDS_CHARS:]))
        return _bounded(notes)

    def _gate_output_tail(self, receipt: GateReceipt) -> str:
        """The end of a gate's output for the next prompt: from the content store (more
        than the receipt's own short tail), else that tail."""
        if receipt.output_hash is not None:
            try:
                data = self.ctx.store.cas_get(receipt.output_hash)
            except (RalphError, OSError):
                return receipt.output_tail
            return tail_lines(data, lines=FEEDBACK_TAIL_LINES, chars=FEEDBACK_TAIL_CHARS)
        return receipt.output_tail

    # -- the tree: protected paths, the tracker, staging, commits ----------------------------

    async def _put_back_protected(self, rec: _Record, after: WorkTree) -> None:
        """Whatever the agent changed under a protected path goes back to its content at the
        start of the iteration (recorded, with the agent's diff in the content store); new
        cache files there (`__pycache__/`) are only removed."""
        if rec.guard is None or rec.before is None:
            return
        changes = await rec.guard.changes(rec.before, after)
        if not changes:
            return
        rec.protected = await put_back(rec.guard, changes, self.emit, task_id=rec.task.id,
                                       attempt_id=rec.attempt_id)
        rec.reverted = {c.path for c in changes}  # only once all of it is back
        if rec.protected:
            self._note(put_back_note(rec.protected, rec.attempt_id, rec.task.id))

    def _undo_other_tracker_edits(self, tracker: Tracker, rec: _Record) -> None:
        """Blocks the agent took off are put back, and ticks of other tasks reopened (a task
        is verified only in an iteration of its own): the gates see the task's own tree."""
        try:
            tasks_now = tracker.snapshot()
        except TrackerError:
            return  # reported where the tracker is read next
        kept = self._keep_blocks(tracker, tasks_now)
        self._reopen(tracker, tasks_now.done_since(rec.tasks_before, {rec.task.id, *kept}),
                     f"marked done during the iteration of task {rec.task.id}; a task is "
                     "verified only in an iteration of its own")

    async def _stage_agent_work(self, rec: _Record, after: WorkTree) -> None:
        """Stage what the agent changed, taken now, before the gates, so that what they
        create stays out of the commit."""
        assert rec.before is not None
        state = self.ctx.state
        rec.staged = [p for p in agent_paths(rec.before, after, state.gate_outputs)
                      if p not in rec.reverted]
        await self.ctx.git.stage([*rec.staged, *self._ralph_edits(rec)],
                                 exclude=self._never_staged(after))
        rec.stage_done = True
        if state.in_flight is not None:  # a later start commits the index as it is
            # Saved with the next save (a gate's, judge's or reviewer's start, or the end):
            # until a gate runs, staging the agent's work again gives the same index.
            state.in_flight.staged = True

    def _never_staged(self, tree: WorkTree) -> list[str]:
        """Ralph's runtime files, and the gates' earlier outputs (an agent's own `git add
        -A` may have staged them)."""
        return [*RUNTIME, *untracked_outputs(tree, self.ctx.state.gate_outputs)]

    def _ralph_edits(self, rec: _Record) -> list[str]:
        """The files Ralph itself edited in this iteration (the tracker, progress.md)."""
        return ralph_files(self.ctx.config, self.ctx.paths.root) if rec.edited else []

    async def _commit(self, rec: _Record) -> None:
        """Commit what was staged for this iteration, with Ralph's own edits since."""
        ctx = self.ctx
        if not ctx.config.git.auto_commit or not (rec.staged or rec.edited):
            return
        await ctx.git.stage(self._ralph_edits(rec), exclude=RUNTIME)
        task: Task | tuple[str, str] = rec.task
        status = None if rec.verified else rec.status
        if ctx.plan is not None and rec.session_number is not None:
            # A session's iteration that claimed nothing did its one task: no "not verified".
            task = (rec.task.id, ctx.plan.title(rec.session_number))
            if not rec.claimed and rec.status == "not_done":
                status = None
        rec.commit = await ctx.git.commit_staged(attempt_message(
            ctx.config, task, rec.iteration, rec.attempt_id.rsplit("-", 1)[-1],
            status, rec.reason))

    async def _repo_clean(self, rec: _Record) -> bool:
        """No change is left uncommitted but the gates' outputs. After gates (or a judge or
        reviewer) ran, one look at the tree finds what they created or changed, remembered
        as gate outputs; without them the answer follows from what was staged."""
        ctx = self.ctx
        if rec.receipts or rec.judge_ok is not None or rec.review_ok is not None:
            post = await ctx.git.snapshot(exclude=RUNTIME, untracked="normal")
            if rec.after is not None:
                made, changed = gate_changes(rec.after, post, rec.reverted)
                remember_gate_outputs(ctx.state, made, changed)
            return tree_is_clean(post, ctx.state)
        if rec.after is None:
            return False
        if not ctx.config.git.auto_commit:
            return rec.after.clean and not rec.edited
        done = set(rec.staged) | rec.reverted
        return all(p in done or covered(p, ctx.state.gate_outputs)
                   for _, p in rec.after.changes)

    async def _clean_now(self, rec: _Record) -> bool:
        """`repo_clean` of an iteration that ended without a verdict, as the tree is: nothing
        uncommitted but the gates' outputs and Ralph's runtime files."""
        if rec.before is None:  # it ended before looking at the tree: nothing changed it
            return (await self.ctx.git.snapshot(exclude=RUNTIME)).clean
        post = await self.ctx.git.snapshot(exclude=RUNTIME, untracked="normal")
        return tree_is_clean(post, self.ctx.state)

    async def _keep_unfinished_work(self, tracker: Tracker, rec: _Record) -> None:
        """An iteration that ends without a verdict (stopped, an orchestrator error, an
        agent that cannot work): what it left marked done is reopened, protected paths are
        put back, and the rest of what the agent did is committed as this attempt's work,
        so that the next start finds a clean tree (best effort: a failure here is reported,
        and the next start's recovery or the user takes over). Once the agent's work was
        staged (the gates may have run since), the index is committed as it is."""
        self._reopen_unverified(tracker, rec)
        ctx = self.ctx
        if rec.before is None or rec.commit is not None:
            return
        try:
            if not rec.stage_done:
                after = await ctx.git.snapshot(exclude=RUNTIME)
                await self._put_back_protected(rec, after)  # finds nothing if done already
                rec.after = after
                if ctx.config.git.auto_commit:
                    await self._stage_agent_work(rec, after)
            await self._commit(rec)
            if rec.stage_done and rec.after is not None:  # the gates may have run since
                post = await ctx.git.snapshot(exclude=RUNTIME, untracked="normal")
                remember_gate_outputs(ctx.state, *gate_changes(rec.after, post, rec.reverted))
        except (RalphError, OSError) as exc:
            log.warning("could not commit what the %s iteration %d left: %s", rec.status,
                        rec.iteration, exc)

    def _forget_stale_blocks(self, tasks: Snapshot) -> None:
        """A task the user reopened in the tracker starts over: its block and failure count
        go (blocks an agent took off were put back after its iteration)."""
        for tid in stale_blocks(tasks, self.ctx.state):
            entry = self.ctx.state.task(tid)
            entry.blocked = None
            entry.failures = 0
            self.emit("task.unblocked", {"task_id": tid,
                                         "reason": "the tracker no longer marks it blocked"})

    def _keep_blocks(self, tracker: Tracker, tasks: Snapshot) -> list[str]:
        """Blocks the agent took off in the tracker are put back (only the user unblocks);
        the ids of those tasks."""
        restored = stale_blocks(tasks, self.ctx.state)
        for tid in restored:
            task = tasks.get(tid)
            assert task is not None  # stale_blocks names tasks of the tracker only
            self._mark(tracker, task, "blocked", self.ctx.state.task(tid).blocked)
        return restored

    def _reopen_unverified(self, tracker: Tracker, rec: _Record) -> None:
        """The iteration ends without a verdict: nothing it left marked done stands (the
        task verified before a later step failed, a commit say, keeps its verdict)."""
        plan = self.ctx.plan
        if plan is not None:  # a claim is a frame of its iteration: it gets its verdict
            number = rec.session_number
            if number is not None and not rec.verified and plan.claimed(number):
                plan.judged(number, False, f"the iteration ended before its claim was "
                                           f"verified ({rec.status})")
            return
        keep = {rec.task.id} if rec.verified else set()
        try:
            ticked = tracker.snapshot().done_since(rec.tasks_before, keep)
        except TrackerError as exc:
            log.warning("could not read the tracker to check what was marked done: %s", exc)
            return
        self._reopen(tracker, ticked, f"the iteration ended before it was verified "
                                      f"({rec.status})")

    def _reopen(self, tracker: Tracker, tasks: list[Task], reason: str) -> None:
        """Reopen `tasks` in the tracker; a tracker the agent broke is reported, not fatal."""
        if tasks:
            self._edited()
        if self._record is not None:  # for the next attempt's prompt
            self._record.reopened += [(t.id, reason) for t in tasks if t.id != self._record.task.id]
        try:
            reopen_tasks(tracker, tasks, reason=reason, emit=self.emit,
                         progress=self.ctx.paths.root / self.ctx.config.files.progress)
        except TrackerError as exc:
            log.warning("could not reopen tasks in the tracker: %s", exc)
            self.emit("loop.error", {"message": f"could not update the tracker: {exc}"})

    def _mark(self, tracker: Tracker, task: Task, status: TaskStatus, reason: str | None) -> None:
        """Update the tracker; a tracker the agent broke is reported, not fatal (state.json
        keeps the block either way)."""
        self._edited()
        try:
            tracker.set_status(task.id, status, reason)
        except TrackerError as exc:
            log.warning("could not mark task %s %s in the tracker: %s", task.id, status, exc)
            self.emit("loop.error", {"message": f"could not update the tracker: {exc}"})

    def _template(self, task: Task) -> str:
        """The prompt file for the task's kind: build and plan have their own, the other
        kinds (docs, hotfix, review) use the general PROMPT.md."""
        files = self.ctx.config.files
        name = {"build": files.prompt, "plan": files.plan}.get(task.kind, files.general)
        return _read(self.ctx.paths.root / name, required=True)

    def _session_notes(self) -> str:
        """The notes section of the prompt: what agents and people left with `ralph notes`
        (a store that cannot be read leaves it out, with a warning)."""
        # At most a quarter of the prompt's budget: the memory needs room too.
        budget = min(self.ctx.config.loop.notes_chars, self.ctx.config.loop.context_chars // 4)
        if budget <= 0:
            return ""
        if self.ctx.notes is None:
            self.ctx.notes = NoteFeed(self.ctx.store)
        try:
            notes = self.ctx.notes.notes()
        except (RalphError, OSError) as exc:
            log.warning("could not read the notes for the prompt: %s", exc)
            return ""
        return notes_section(notes, budget=budget,
                             add_command=f"{ralph_command()} notes add --store "
                                         f"{shlex.quote(str(self.ctx.paths.store))}")

    def _memory(self) -> Memory:
        root, files = self.ctx.paths.root, self.ctx.config.files
        return Memory(agents=_read(root / files.agents), feedback=_read(root / files.feedback),
                      progress=_read_tail(root / files.progress,
                                          self.ctx.config.loop.progress_tail_chars),
                      prd=self._tracker_text(),
                      prd_name=files.prd, progress_name=files.progress)

    def _tracker_text(self) -> str:
        """The tracker file's text as the iteration's start read it (not read again)."""
        try:
            return self.ctx.tracker().text()
        except TrackerError as exc:
            raise LoopError(str(exc)) from None

    def _note(self, line: str) -> None:
        self._edited()
        note_progress(self.ctx.paths.root / self.ctx.config.files.progress, line)

    # -- finishing ----------------------------------------------------------------------------

    def _finish(self, rec: _Record, clock: float) -> StepResult:
        ctx = self.ctx
        paths = ctx.paths
        finished = now_ts()
        repo_clean = rec.repo_clean
        result = StepResult(
            iteration=rec.iteration, agent=self.agent.name, task_id=rec.task.id,
            exit_signal=rec.exit_signal, return_code=rec.return_code,
            log_path=paths.relative(rec.log_path) if rec.log_path else None,
            progress_made=rec.progress_made, no_progress_streak=ctx.state.no_progress_streak,
            gates_ok=rec.gates_ok is True, repo_clean=repo_clean, judge_ok=rec.judge_ok,
            review_ok=rec.review_ok, blocked=rec.blocked, attempt_id=rec.attempt_id,
            receipts_dir=paths.relative(rec.receipts_dir) if rec.receipts_dir else None,
            context_dir=paths.relative(rec.context_dir) if rec.context_dir else None,
            task_title=rec.task.title, iteration_id=f"{rec.iteration:06d}", run_id=self.run_id,
            status=rec.status, verified=rec.verified, reason=rec.reason,
            agent_status=rec.outcome.status if rec.outcome else None, commit=rec.commit,
            started_at=rec.started, finished_at=finished,
            duration_seconds=round(time.monotonic() - clock, 3),
            gates_ran=rec.receipts_dir is not None, **rec.spend_fields())
        body = result.model_dump(mode="json")
        body["gates"] = [r.to_dict() for r in rec.receipts]
        attempt_file = paths.attempt_file(rec.task.id, rec.attempt_id)
        try:
            attempt_file.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(attempt_file, orjson.dumps(body, option=orjson.OPT_INDENT_2),
                               durable=False)
        except OSError as exc:  # the event below still records the attempt
            log.warning("could not write %s: %s", attempt_file, exc.strerror or exc)
        self.emit("iteration.finished", result.model_dump(mode="json"))
        if ctx.plan is not None and rec.session_number is not None:
            try:
                ctx.plan.finished(rec.session_number, result)
            except (RalphError, OSError) as exc:  # the loop's own record stands
                log.warning("could not record the end of session iteration %d: %s",
                            rec.session_number, exc)
        ctx.state.in_flight = None
        ctx.state.last = last_iteration(result)
        count_spend(ctx.state, self.run_id, rec.spend)
        ctx.save()
        return result


def count_spend(state: LoopState, run_id: str, spend: SpendByAgent) -> None:
    """Add an iteration's spend to its run's and to all runs' (state.json: bounded)."""
    run = state.spend_last_run
    if run is None or run.run_id != run_id:
        run = state.spend_last_run = RunSpend(run_id=run_id)
    for into in (run, state.spend_all):
        into.add(spend)
        into.iterations += 1


def reopen_tasks(tracker: Tracker, tasks: list[Task], *, reason: str, progress: Path,
                 emit: EventSink) -> None:
    """Mark each task open again, with why in progress.md and a `task.reopened` event."""
    for task in tasks:
        tracker.set_status(task.id, "open", None)
        note_progress(progress, f"Ralph reopened task {task.id} ({task.title}): {reason}.")
        emit("task.reopened", {"task_id": task.id, "reason": reason})


def note_progress(path: Path, line: str) -> None:
    """One dated line appended to progress.md (never rewritten: the user's text stays)."""
    with path.open("a", encoding="utf-8") as handle:
        handle.write(f"\n- {now_ts()} {line}\n")


def last_iteration(result: StepResult) -> LastIteration:
    return LastIteration(iteration_id=result.iteration_id, iteration=result.iteration,
                         run_id=result.run_id, task_id=result.task_id,
                         task_title=result.task_title, status=result.status,
                         exit_code=result.return_code, started_at=result.started_at,
                         finished_at=result.finished_at, verified=result.verified,
                         reason=result.reason)


@dataclass
class _Record:
    """What an iteration found out so far (filled in as it goes)."""

    iteration: int
    task: Task
    attempt_id: str
    started: str
    tasks_before: Snapshot  # the tracker's tasks as the iteration started
    session_number: int | None = None  # a named session's own number for the iteration
    status: IterationStatus = "not_done"
    reason: str | None = None
    outcome: AgentOutcome | None = None
    exit_signal: bool | None = None
    return_code: int | None = None
    log_path: Path | None = None
    context_dir: Path | None = None
    receipts_dir: Path | None = None
    receipts: tuple[GateReceipt, ...] | list[GateReceipt] = ()
    gates_ok: bool | None = None
    judge_ok: bool | None = None
    review_ok: bool | None = None
    claimed: bool = False
    verified: bool = False
    blocked: bool = False
    progress_by_agent: bool = False
    progress_made: bool = False
    edited: bool = False  # Ralph itself changed the tracker or progress.md
    before: WorkTree | None = None  # the tree before the agent and after it
    after: WorkTree | None = None
    guard: Guard | None = None
    protected: list[Change] = field(default_factory=list)  # protected paths put back
    reverted: set[str] = field(default_factory=set)  # those and the cache files removed
    staged: list[str] = field(default_factory=list)  # the agent's changes, staged
    stage_done: bool = False
    commit: str | None = None
    repo_clean: bool = False
    spend: SpendByAgent = field(default_factory=SpendByAgent)  # the agents' tokens and cost
    checks_said: list[str] = field(default_factory=list)  # a judge's or reviewer's no
    reopened: list[tuple[str, str]] = field(default_factory=list)  # other tasks, and why

    def spend_fields(self) -> dict[str, Any]:
        """The step result's usage fields: None where no agent run reported usage."""
        total = self.spend.total
        used = total.agent_runs > 0
        return {"tokens_in": total.tokens_in if used else None,
                "tokens_out": total.tokens_out if used else None,
                "cost_usd": total.cost_usd,
                "usage": {name: asdict(spend) for name, spend in self.spend.agents.items()}}


def unusable_message(agent: ResolvedAgent, outcome: AgentOutcome) -> str:
    """One line naming the agent, what the CLI said, and the fix."""
    said = outcome.message.strip().splitlines()[-1][:300] if outcome.message.strip() else (
        f"exit code {outcome.exit_code}")
    if outcome.status == "auth_error":
        hint = adapter_for(agent.adapter).login_hint
        return f"agent '{agent.name}' could not authenticate: {said}; {hint}"
    return (f"agent '{agent.name}': the CLI rejected its configuration: {said}; check "
            f"[agents.{agent.name}] in ralph.toml")


def ralph_command() -> str:
    """How an agent runs this Ralph: the `ralph` beside this interpreter (a venv's), else
    the interpreter with `-m ralph` (shell-quoted)."""
    beside = Path(sys.executable).with_name("ralph")
    if beside.is_file() and os.access(beside, os.X_OK):
        return shlex.quote(str(beside))
    return f"{shlex.quote(sys.executable)} -m ralph"


def _quote(text: str) -> str:
    return "\n".join(f"> {line}" for line in text.splitlines())


def _bounded(notes: list[str]) -> list[str]:
    """Each note cut to NOTE_CHARS, and as many as fit in NOTES_CHARS, in order."""
    kept: list[str] = []
    size = 0
    for note in notes:
        cut = note if len(note) <= NOTE_CHARS else note[:NOTE_CHARS - 1] + "…"
        if size + len(cut) > NOTES_CHARS:
            break
        kept.append(cut)
        size += len(cut)
    return kept


def _agent_failure(outcome: AgentOutcome) -> str:
    if outcome.status == "timeout":
        return outcome.message
    if outcome.status == "auth_error":
        return f"could not authenticate: {outcome.message}"
    return f"failed ({outcome.message or f'exit code {outcome.exit_code}'})"


def _read(path: Path, *, required: bool = False) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if required:
            raise LoopError(f"{path.name} is missing: run `ralph init` or set it in "
                            "ralph.toml [files]") from None
        return ""
    except OSError as exc:
        raise LoopError(f"cannot read {path}: {exc.strerror}") from None


def _read_tail(path: Path, chars: int) -> str:
    """The whole lines at the end of a file that can hold `chars` characters (and more):
    progress.md only grows, and the prompt shows only its end."""
    size = 4 * chars + 4  # bytes: at least chars + 1 characters of UTF-8
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            length = handle.tell()
            if length <= size:
                handle.seek(0)
                return handle.read().decode("utf-8", "replace")
            handle.seek(length - size)
            tail = handle.read().decode("utf-8", "replace")
            newline = tail.find("\n")
            kept = tail[newline + 1:] if newline >= 0 else ""
            # The prompt keeps the last lines that fit in `chars`: they are all in `kept` if
            # what follows its first line is longer than that (long lines may need it all).
            second = kept.find("\n")
            if second < 0 or len(kept[second + 1:].rstrip()) <= chars:
                handle.seek(0)
                return handle.read().decode("utf-8", "replace")
            return kept
    except FileNotFoundError:
        return ""
    except OSError as exc:
        raise LoopError(f"cannot read {path}: {exc.strerror}") from None


def _pid() -> int:
    return os.getpid()


__all__ = ["AgentError", "Iteration", "LoopContext", "nothing_to_do"]

"""One role call: the role's prompt run as an agent session, its answer validated (one
retry), and its claims checked against the session's files.

`RoleCaller.call` records the call (`workflow.role_call`, with the files' snapshot from
before its first try) and its result (`workflow.role_result`, and a `workflow.violation`
per contract violation). A result is `ok` only when the output is valid and the files bear
every claim out; otherwise the output is kept in the record but not used. A call cancelled
(a stop) ends its agent session's whole process tree and records `workflow.role_stopped`:
it has no result, so a resumed session runs it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ralph.config import Config
from ralph.errors import RalphError
from ralph.fsutil import atomic_write_bytes
from ralph.loop.events import EventSink
from ralph.sessions import SessionService
from ralph.store.ids import IdGenerator
from ralph.workflow.answers import InvalidOutput, parse_output, validate_output
from ralph.workflow.checks import Violation, check_side_effects
from ralph.workflow.contracts import AnyOutput, RoleInput, role_of
from ralph.workflow.prompts import build_prompt, load_instructions, retry_prompt
from ralph.workflow.record import RoleCall
from ralph.workflow.session_dir import PLAN, PROGRESS, QUESTIONS, TASKS, SessionDir
from ralph.workflow.snapshot import Snapshot, snapshot
from ralph.workflow.tree_guard import TreeGuard

Outcome = Literal["ok", "invalid", "violation", "agent_failed"]
_ids = IdGenerator()


@dataclass
class RoleResult:
    """How a role call ended. `output` is set whenever a valid output was read, even if the
    files contradict it (it is then not used: `ok` is False)."""

    outcome: Outcome
    output: AnyOutput | None = None
    problems: list[str] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    message: str = ""
    not_started: bool = False  # the agent could not be launched: no attempt was made

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"

    @classmethod
    def from_record(cls, role: str, result: dict[str, Any]) -> RoleResult:
        """The result a `workflow.role_result` recorded (a call finished before a stop or a
        crash is not run again)."""
        output = result.get("output")
        return cls(result.get("outcome", "agent_failed"),
                   validate_output(role, output) if isinstance(output, dict) else None,
                   list(result.get("problems") or []),
                   [Violation(str(v.get("claim")), str(v.get("found")))
                    for v in result.get("violations") or []],
                   str(result.get("message") or ""))

    def why(self) -> str:
        """One line: what made the result unusable."""
        if self.violations:
            first = self.violations[0]
            more = f" (and {len(self.violations) - 1} more)" if len(self.violations) > 1 else ""
            return f"contract violation: claimed {first.claim}; found {first.found}{more}"
        if self.problems:
            more = f" (and {len(self.problems) - 1} more)" if len(self.problems) > 1 else ""
            return f"invalid output after a retry: {self.problems[0]}{more}"
        return self.message or self.outcome


class RoleCaller:
    """Runs roles for one workflow session."""

    def __init__(self, root: Path, config: Config, session: SessionDir,
                 sessions: SessionService, emit: EventSink, agents: dict[str, str]) -> None:
        self.root = root
        self.config = config
        self.session = session
        self.sessions = sessions
        self.emit = emit
        self.agents = agents

    async def call(self, step: int, role_input: RoleInput, *, context: str | None = None,
                   again: RoleCall | None = None, before: str | None = None) -> RoleResult:
        """Run the role whose input `role_input` is. `again`: the same call, recorded
        before and never finished (its process stopped or died): run again against the
        snapshot taken before its first try. `before`: the content hash of a recorded
        snapshot to check a new call against (a failed step run again)."""
        role = role_of(role_input)
        mode = getattr(role_input, "mode", None)
        mode_text = str(mode) if mode else None
        instructions = load_instructions(self.root, role, self.config)
        call_id = again.call_id if again is not None else "call_" + _ids.next()[0]
        recorded = again.snapshot_hash if again is not None else before
        start = (self._recorded_snapshot(recorded) if recorded is not None
                 else snapshot(self.session))
        given = role_input.model_dump(mode="json", by_alias=True, exclude_none=True)
        tree = await TreeGuard.begin(self.config, self.root, self.session,
                                     self.root / ".ralph" / "workflows"
                                     / self.session.session_id / "guard" / call_id)
        result = await self._tries(step, call_id, role, mode_text, role_input, given,
                                   instructions, context, start)
        found = await tree.check(role) if tree is not None else []
        result.violations = [*result.violations, *found]
        if result.outcome == "ok" and found:
            result.outcome = "violation"
        if not result.ok and role != "planner":
            self._put_back(start, role, role_input)
        return self._finish(step, call_id, role, result)

    async def _tries(self, step: int, call_id: str, role: str, mode_text: str | None,
                     role_input: RoleInput, given: dict[str, Any], instructions: str,
                     context: str | None, start: Snapshot) -> RoleResult:
        """The agent run (and its one retry): the result before the tree is looked at."""
        agent = self.agents[role]
        problems: InvalidOutput | None = None
        for attempt in (1, 2):
            prompt = (build_prompt(role, role_input, instructions, additional_context=context)
                      if problems is None else
                      retry_prompt(role, role_input, instructions, problems,
                                   additional_context=context))
            meta = {"step": step, "call_id": call_id, "role": role, "mode": mode_text,
                    "agent": agent, "input": given, "try": attempt, "agent_session": None}
            text, failure = await self._run_agent(prompt, role, mode_text, meta, start)
            if failure is not None:
                return RoleResult("agent_failed", message=failure,
                                  not_started=meta["agent_session"] is None)
            try:
                output = parse_output(role, text)
            except InvalidOutput as exc:
                if problems is None:
                    problems = exc
                    continue
                return RoleResult("invalid", problems=exc.lines(),
                                  message="the output is invalid after a retry")
            after = snapshot(self.session)
            violations = check_side_effects(start, after, role, role_input, output)
            return RoleResult("violation" if violations else "ok", output,
                              violations=violations)
        raise AssertionError("unreachable")  # pragma: no cover

    def _put_back(self, start: Snapshot, role: str, role_input: RoleInput) -> None:
        """A result not used leaves no trace in the files the orchestrator decides from:
        plan.md, tasks.md, progress.md, plan.questions.md and the instructions file are put
        back as they were before the call (the executor's report, the reviewer's review
        stay, as the record of the attempt)."""
        now = snapshot(self.session)
        keys = [PLAN, TASKS, PROGRESS, now.instructions_key]
        if role != "questioner":
            keys.append(QUESTIONS)
        restored = []
        for key in keys:
            if now.files.get(key) == start.files.get(key):
                continue
            path = (self.session.path / key).resolve() if not key.startswith("../") \
                else self.session.instructions
            text = start.text(key)
            if key in start.files and text is not None:
                atomic_write_bytes(path, text.encode("utf-8"))
            elif key not in start.files:
                path.unlink(missing_ok=True)
            else:
                continue  # not text before: left as it is
            restored.append(key)
        if restored:
            self.emit("workflow.note", {"message": f"the {role}'s result is not used: "
                                                   f"{', '.join(restored)} put back as "
                                                   "they were before it"})

    async def _run_agent(self, prompt: str, role: str, mode: str | None,
                         meta: dict[str, Any], before: Snapshot) -> tuple[str, str | None]:
        """Launch and wait for the agent session; (its final text, None) or ("", why it
        failed). Records the call once its session is launched."""
        what = f"{role} {mode}" if mode else role
        task = meta["input"].get("TASK_ID")
        title = f"workflow {self.session.session_id}: {what}" + (f" {task}" if task else "")
        try:
            agent_session = await self.sessions.launch(prompt, self.agents[role], title=title,
                                                       cwd=self.root)
        except RalphError as exc:
            self._record_call(meta, before)
            return "", f"the {role}'s agent could not start: {exc}"
        meta["agent_session"] = agent_session
        self._record_call(meta, before)
        try:
            info = await self.sessions.wait(agent_session)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await asyncio.shield(self.sessions.stop(agent_session, by="workflow"))
            self.emit("workflow.role_stopped", {"step": meta["step"],
                                                "call_id": meta["call_id"], "role": role})
            raise
        if info.status != "completed":
            code = f", exit {info.exit_code}" if info.exit_code is not None else ""
            return "", (f"the {role}'s agent session {agent_session} ended {info.status}"
                        f"{code}: {info.message or 'no message'}")
        return self.sessions.text(info.final_text_hash), None

    def _record_call(self, meta: dict[str, Any], before: Snapshot) -> None:
        content = json.dumps(before.to_json()) if meta["try"] == 1 else None
        self.emit("workflow.role_call", meta, content=content)

    def _recorded_snapshot(self, content_hash: str) -> Snapshot:
        data = json.loads(self.sessions.store.cas_get(content_hash))
        return Snapshot.from_json(self.session, data)

    def _finish(self, step: int, call_id: str, role: str, result: RoleResult) -> RoleResult:
        for violation in result.violations:
            self.emit("workflow.violation", {"call_id": call_id, "role": role,
                                             "claim": violation.claim,
                                             "found": violation.found})
        if result.outcome == "invalid":
            self.emit("workflow.violation", {
                "call_id": call_id, "role": role,
                "claim": f"an output matching the {role}'s contract",
                "found": "; ".join(result.problems)})
        self.emit("workflow.role_result", {
            "step": step, "call_id": call_id, "role": role, "outcome": result.outcome,
            "output": (result.output.model_dump(mode="json", by_alias=True)
                       if result.output is not None else None),
            "problems": result.problems,
            "violations": [{"claim": v.claim, "found": v.found} for v in result.violations],
            "message": result.message or (result.why() if not result.ok else "")})
        return result


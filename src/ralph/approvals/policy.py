"""The approval policy an agent session runs under, and how one request is decided by it.

`auto`: nothing asks (the agent's own unattended settings). `ask`: the rules first, then a
person, from any face, within `timeout_s` (no answer denies). `deny`: the rules, and every
call no rule allows is denied. Every decision, whoever made it, is a
`session.approval_answered` frame. The policy is written to the session's folder
(`approvals.json`) for the agent's hook process, which runs outside Ralph's process.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ralph.approvals.desk import ApprovalAnswer, ApprovalDesk, ApprovalRequest, NotPending
from ralph.approvals.rules import ApprovalMode, ApprovalRules
from ralph.fsutil import atomic_write_bytes

POLICY_FILE = "approvals.json"
DENY_MODE_MESSAGE = ("approvals are 'deny' for this session: only the tools ralph.toml's "
                     "[approvals] allow lists may run")


@dataclass(frozen=True)
class ApprovalPolicy:
    mode: ApprovalMode
    allow: tuple[str, ...]
    deny: tuple[str, ...]
    timeout_s: float

    @property
    def rules(self) -> ApprovalRules:
        return ApprovalRules.parse(self.allow, self.deny)

    def decide_now(self, desk: ApprovalDesk, tool_use_id: str, tool_name: str,
                   tool_input: Any, cwd: Path | None = None
                   ) -> tuple[ApprovalRequest, ApprovalAnswer | None]:
        """Record the request, and its answer when a rule or the mode gives it (None: it
        waits for a person, see `decide`). Synchronous: the hook needs no event loop for
        the calls the rules decide (most of them, the reading tools). `cwd`: the session's
        directory, which paths in rules are relative to."""
        request = desk.request(tool_use_id, tool_name, tool_input)
        by_rule = self.rules.decide(tool_name, tool_input, None if cwd is None else str(cwd))
        try:
            if by_rule is not None:
                return request, desk.answer(tool_use_id, by_rule.decision,
                                            f"rule {by_rule.rule}", by="rule",
                                            rule=by_rule.rule)
            if self.mode != "ask":
                return request, desk.answer(tool_use_id, "deny", DENY_MODE_MESSAGE, by="mode")
        except NotPending:  # answered meanwhile by someone else: that answer counts
            answer = desk.answers().get(tool_use_id)
            if answer is None:
                raise
            return request, answer
        return request, desk.answers().get(tool_use_id)

    async def decide(self, desk: ApprovalDesk, tool_use_id: str, tool_name: str,
                     tool_input: Any, cwd: Path | None = None) -> ApprovalAnswer:
        """Record the request and its answer: by rule, by the mode, or by whoever answers
        (a person; the timeout denies)."""
        request, answer = self.decide_now(desk, tool_use_id, tool_name, tool_input, cwd)
        return answer if answer is not None else await desk.wait(request, self.timeout_s)


def reason(answer: ApprovalAnswer) -> str:
    """What the agent (and the model, for a denial) is told of a decision."""
    who = f"rule {answer.rule}" if answer.rule else answer.by
    verb = "allowed" if answer.decision == "allow" else "denied"
    text = f"{verb} by {who} (Ralph)"
    if answer.message and not answer.rule:
        text += f": {answer.message}"
    return text


@dataclass(frozen=True)
class PolicyFile:
    """What the hook (or bridge) process needs: the policy, the store, the session and its
    directory. Given to it inline, on its command line (`encode`): a file in the project
    would be the agent's to rewrite."""

    policy: ApprovalPolicy
    store: Path
    session_id: str
    folder: Path
    cwd: Path | None = None

    def encode(self) -> str:
        return orjson.dumps({
            "session_id": self.session_id, "store": str(self.store),
            "folder": str(self.folder), "cwd": None if self.cwd is None else str(self.cwd),
            "mode": self.policy.mode, "allow": list(self.policy.allow),
            "deny": list(self.policy.deny), "timeout_seconds": self.policy.timeout_s}).decode()

    def write(self) -> Path:
        """The policy in the session's folder (for reading it back; the processes that
        decide get it inline)."""
        path = self.folder / POLICY_FILE
        atomic_write_bytes(path, self.encode().encode(), durable=False)
        return path

    @classmethod
    def load(cls, text_or_path: str) -> PolicyFile:
        """The policy from its encoding (`{...}`), else from the file it names."""
        text = text_or_path if text_or_path.lstrip().startswith("{") else \
            Path(text_or_path).read_text(encoding="utf-8")
        return cls.decode(text)

    @classmethod
    def read(cls, path: Path) -> PolicyFile:
        return cls.decode(path.read_text(encoding="utf-8"))

    @classmethod
    def decode(cls, text: str) -> PolicyFile:
        data = orjson.loads(text)
        mode = data["mode"]
        if mode not in ("auto", "ask", "deny"):
            raise ValueError(f"unknown approvals mode {mode!r}")
        policy = ApprovalPolicy(mode, tuple(data["allow"]), tuple(data["deny"]),
                                float(data["timeout_seconds"]))
        cwd = data.get("cwd")
        return cls(policy, Path(data["store"]), str(data["session_id"]), Path(data["folder"]),
                   None if cwd is None else Path(cwd))

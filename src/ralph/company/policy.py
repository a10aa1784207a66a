"""Who may read or approve what: AgentCompany's visibility policy (its rule ids and reasons,
which reviews and events record), and its enforcement: a denial is refused with
`Policy denied <read|approval>: <rule_id> (<reason>)` and recorded as a `policy.denied`
event in the log of the run the resource came from.

The rules, in order: approving needs a manager role (human, ceo, director, manager:
`approve.role`/`role_not_allowed`); then the resource's visibility decides: `org` is open to
all (`vis.org`), `managers` to manager roles (`vis.managers`), `team` to manager roles
(`vis.team.manager_override`) and to the producer's team (`vis.team.same_team`, else
`vis.team.mismatch`), `private_agent` to a human (`vis.private.human`) and to its producer
(`vis.private.owner`: `owner` / `not_owner`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ralph.company.events import envelope
from ralph.company.inbox import append_run_event
from ralph.company.layout import CompanyError

Action = Literal["read", "approve"]
MANAGER_ROLES = frozenset({"human", "ceo", "director", "manager"})


@dataclass(frozen=True)
class Actor:
    actor_id: str
    role: str
    team_id: str | None = None


@dataclass(frozen=True)
class Resource:
    resource_id: str
    visibility: str
    kind: str
    team_id: str | None = None
    producing_actor_id: str | None = None


@dataclass(frozen=True)
class Decision:
    allowed: bool
    rule_id: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """As reviews and events write it (keys in this order)."""
        return {"allowed": self.allowed, "rule_id": self.rule_id, "reason": self.reason}


def evaluate(actor: Actor, action: Action, resource: Resource) -> Decision:
    """The policy's decision on `actor` doing `action` to `resource`."""
    manager = actor.role in MANAGER_ROLES
    if action == "approve" and not manager:
        return Decision(False, "approve.role", "role_not_allowed")
    if resource.visibility == "org":
        return Decision(True, "vis.org", "org_visible")
    if resource.visibility == "managers":
        return (Decision(True, "vis.managers", "manager_visible") if manager
                else Decision(False, "vis.managers", "role_not_allowed"))
    if resource.visibility == "team":
        if manager:
            return Decision(True, "vis.team.manager_override", "manager_override")
        if actor.team_id and resource.team_id and actor.team_id == resource.team_id:
            return Decision(True, "vis.team.same_team", "same_team")
        return Decision(False, "vis.team.mismatch", "team_mismatch")
    if resource.visibility == "private_agent":
        if actor.role == "human":
            return Decision(True, "vis.private.human", "human_override")
        if resource.producing_actor_id and resource.producing_actor_id == actor.actor_id:
            return Decision(True, "vis.private.owner", "owner")
        return Decision(False, "vis.private.owner", "not_owner")
    # (schemas admit only the four visibilities; anything else is nobody's to see)
    return Decision(False, "vis.unknown", "unknown_visibility")


def enforce(root: Path, project_id: str, run_id: str | None, actor: Actor, action: Action,
            resource: Resource) -> Decision:
    """The decision if it allows; else a `policy.denied` event in the run's log (when
    `run_id` names a run of the project; the refusal does not depend on it) and a
    CompanyError whose `data` holds the decision."""
    decision = evaluate(actor, action, resource)
    if decision.allowed:
        return decision
    if run_id:
        append_run_event(root, project_id, run_id, envelope(run_id, "policy.denied", {
            "action": action,
            "resource_id": resource.resource_id,
            "resource_kind": resource.kind,
            "resource_visibility": resource.visibility,
            "policy": decision.to_dict(),
        }, actor=actor.actor_id, visibility="managers"), create=True)
    label = "approval" if action == "approve" else action
    raise CompanyError(f"Policy denied {label}: {decision.rule_id} ({decision.reason})",
                       action=action, resource_id=resource.resource_id,
                       resource_kind=resource.kind, project_id=project_id,
                       policy=decision.to_dict())

"""`agent.record_mistake`: a manager records a worker's mistake in the worker's
`mistakes.yaml` (a count and the last 20 observations per mistake key); once a key has been
seen `promote_threshold` times its prevention rule is written, once, into the worker's
`AGENTS.md` under `## Recurring Mistakes To Avoid`. Events (`evaluation.mistake_recorded`,
`evaluation.rule_promoted`) go into the log of the run named, when it has one."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ralph.company.events import envelope
from ralph.company.files import FileFormatError, read_text, read_yaml, write_yaml
from ralph.company.inbox import agent_files_lock, append_run_event, decision_lock
from ralph.company.layout import AGENTS, CompanyError, component, require_workspace
from ralph.company.patches import js_trim_end
from ralph.company.policy import MANAGER_ROLES
from ralph.company.workspace import now_iso
from ralph.fsutil import atomic_write_bytes

DEFAULT_THRESHOLD = 3
KEEP_OBSERVATIONS = 20
MISTAKES_HEADING = "## Recurring Mistakes To Avoid"
MISTAKES_MARKER = "<!-- managed: recurring-mistakes -->"
OPERATING_RULES = (
    "## Operating Rules",
    "- Follow the assigned task contract and milestone acceptance criteria.",
    "- Produce required evidence artifacts for coding milestones (patch/commit + tests).",
    "- Report blockers early with concrete evidence.",
)


def base_guidance(agent_id: str) -> list[str]:
    """The lines an agent's AGENTS.md starts with, up to its recurring mistakes section."""
    return [f"# AGENTS.md - {agent_id}", "", *OPERATING_RULES, "", MISTAKES_HEADING,
            MISTAKES_MARKER, ""]


def ensure_guidance(path: Path, initial: str) -> str:
    """The text of an AGENTS.md, written as `initial` first if there is none."""
    try:
        return read_text(path)
    except FileNotFoundError:
        atomic_write_bytes(path, initial.encode("utf-8"), follow_symlinks=False)
        return initial


def with_rule(guidance: str, key: str, rule: str, count: int) -> str | None:
    """`guidance` with the promoted rule of `key` as the first line under the recurring
    mistakes heading (the heading added at the end if missing); None if the rule is there
    (its exact `<!-- mistake:<key> -->` marker: a key that merely starts the same is
    another mistake)."""
    marker = f"<!-- mistake:{key} -->"
    if marker in guidance:
        return None
    line = f"- {marker} [{key}] {rule} (promoted after {count} repeats)"
    at = guidance.find(MISTAKES_HEADING)
    if at == -1:
        return f"{js_trim_end(guidance)}\n\n{MISTAKES_HEADING}\n{line}\n"
    end = guidance.find("\n", at + len(MISTAKES_HEADING))
    head_end = len(guidance) if end == -1 else end + 1
    return f"{guidance[:head_end]}{line}\n{guidance[head_end:]}"


def _js_string(value: Any, default: str) -> str:
    if value is None:
        return default
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _count(value: Any) -> int | float:
    finite = isinstance(value, int | float) and not isinstance(value, bool) \
        and math.isfinite(value)
    return value if finite else 0


def read_log(path: Path, agent_id: str) -> dict[str, Any]:
    """The mistakes log (a new one if there is none), its entries normalised as the
    original reads them."""
    try:
        raw = read_yaml(path)
    except FileNotFoundError:
        raw = None
    except FileFormatError as exc:
        raise CompanyError(f"The mistakes log of {agent_id} is not valid YAML: {exc.reason}",
                           worker_agent_id=agent_id) from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise CompanyError(f"The mistakes log of {agent_id} is not a mapping",
                           worker_agent_id=agent_id)
    now = now_iso()
    entries = raw.get("entries") if isinstance(raw.get("entries"), list) else []
    return {
        "schema_version": 1,
        "type": "agent_mistake_log",
        "agent_id": _js_string(raw.get("agent_id"), agent_id),
        "updated_at": _js_string(raw.get("updated_at"), now),
        "entries": [_entry(e if isinstance(e, dict) else {}, now) for e in entries or []],
    }


def _entry(entry: dict[str, Any], now: str) -> dict[str, Any]:
    observations = entry.get("observations")
    return {
        "key": _js_string(entry.get("key"), ""),
        "count": _count(entry.get("count")),
        "last_seen_at": _js_string(entry.get("last_seen_at"), now),
        "summary": _js_string(entry.get("summary"), ""),
        "prevention_rule": _js_string(entry.get("prevention_rule"), ""),
        "observations": observations if isinstance(observations, list) else [],
    }


def record_mistake(root: Path, worker_agent_id: str, manager_actor_id: str, manager_role: str,
                   mistake_key: str, summary: str, prevention_rule: str,
                   project_id: str | None = None, run_id: str | None = None,
                   task_id: str | None = None, milestone_id: str | None = None,
                   evidence_artifact_ids: list[str] | None = None,
                   promote_threshold: int = DEFAULT_THRESHOLD) -> dict[str, Any]:
    """`agent.record_mistake`: {worker_agent_id, mistake_key, count,
    promoted_to_agents_md, log_relpath, agents_md_relpath}."""
    if manager_role not in MANAGER_ROLES:
        raise CompanyError("Only manager+ roles can record worker mistakes",
                           manager_role=manager_role)
    for name, value in (("mistake_key", mistake_key), ("summary", summary),
                        ("prevention_rule", prevention_rule)):
        if not value.strip():
            raise CompanyError(f"{name} is required", **{name: value})
    if promote_threshold < 1:
        raise CompanyError("promote_threshold must be an integer >= 1",
                           promote_threshold=promote_threshold)
    require_workspace(root)
    agent = root / AGENTS / component(worker_agent_id, "worker_agent_id")
    if not (agent / "agent.yaml").is_file():
        raise CompanyError(f"Agent not found: {worker_agent_id}",
                           worker_agent_id=worker_agent_id)
    for name, given in (("project_id", project_id), ("run_id", run_id)):
        if given is not None:
            component(given, name)
    log_rel = f"{AGENTS}/{worker_agent_id}/mistakes.yaml"
    guidance_rel = f"{AGENTS}/{worker_agent_id}/AGENTS.md"
    evidence = list(evidence_artifact_ids or [])

    with decision_lock(root, agent_files_lock(worker_agent_id)):
        log = read_log(root / log_rel, worker_agent_id)
        at = now_iso()
        seen: dict[str, Any] = {"at": at, "observed_by": manager_actor_id}
        for name, optional in (("project_id", project_id), ("run_id", run_id),
                            ("task_id", task_id), ("milestone_id", milestone_id)):
            if optional is not None:
                seen[name] = optional
        seen["evidence_artifact_ids"] = evidence
        entry = next((e for e in log["entries"] if e["key"] == mistake_key), None)
        if entry is None:
            entry = {"key": mistake_key, "count": 1, "last_seen_at": at, "summary": summary,
                     "prevention_rule": prevention_rule, "observations": [seen]}
            log["entries"].append(entry)
        else:
            entry.update(count=entry["count"] + 1, last_seen_at=at, summary=summary,
                         prevention_rule=prevention_rule,
                         observations=[*entry["observations"], seen][-KEEP_OBSERVATIONS:])
        log["updated_at"] = at
        write_yaml(root / log_rel, log)

        guidance = ensure_guidance(root / guidance_rel,
                                   "\n".join(base_guidance(worker_agent_id)))
        promoted = False
        if entry["count"] >= promote_threshold:
            updated = with_rule(guidance, entry["key"], entry["prevention_rule"],
                                entry["count"])
            if updated is not None:
                atomic_write_bytes(root / guidance_rel, updated.encode("utf-8"),
                                   follow_symlinks=False)
                promoted = True

    if project_id and run_id:
        append_run_event(root, project_id, run_id, envelope(
            run_id, "evaluation.mistake_recorded", {
                "worker_agent_id": worker_agent_id, "mistake_key": entry["key"],
                "count": entry["count"], "threshold": promote_threshold,
                "task_id": task_id, "milestone_id": milestone_id,
                "evidence_artifact_ids": evidence,
            }, actor=manager_actor_id, visibility="managers"))
        if promoted:
            append_run_event(root, project_id, run_id, envelope(
                run_id, "evaluation.rule_promoted", {
                    "worker_agent_id": worker_agent_id, "mistake_key": entry["key"],
                    "promoted_to": guidance_rel, "count": entry["count"],
                }, actor=manager_actor_id, visibility="managers"))
    return {"worker_agent_id": worker_agent_id, "mistake_key": entry["key"],
            "count": entry["count"], "promoted_to_agents_md": promoted,
            "log_relpath": log_rel, "agents_md_relpath": guidance_rel}

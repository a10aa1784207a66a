"""A scripted fake role agent: `python -m ralph.testing.fake_roles [--script SCRIPT.json]`.

One program plays whichever workflow role its prompt names (Ralph-Planner, Ralph-Executor,
Ralph-Reviewer, Ralph-Questioner). It reads the prompt (stdin, or the file named by
`--prompt-file`), takes the role's input from the prompt's `KEY: value` lines (the last
occurrence of each key wins: the instructions above the input may quote examples), does the
role's work on the session files under the current directory, and ends its answer with the
role's output JSON object (a fenced ```json block, or bare with `--bare`).

Without a script every role is honest. A script (`--script`, or env RALPH_FAKE_ROLES_SCRIPT)
scripts misbehaviour: per role, a list of steps consumed in order across calls (the last one
repeats), or an object of such lists keyed by TASK_ID (executor, reviewer) or MODE (planner,
questioner), with "*" as the fallback. A calls file beside the script
(`SCRIPT.json.calls.json`) counts the calls across processes, as ralph.testing.fake_agent
does. Script keys besides the roles: "fence" (false: bare JSON), "paths" ("project": the
planner reports artifacts as project-relative paths instead of session-relative names).

    {"planner":  [{"status": "needs_qa_cycle", "tasks": [{"id": "task-1", "description": "..",
                    "depends_on": [], "files": ["greet.py"], "criteria": [".."]}]},
                  {"add_tasks": [..]}, {"complete": true}],
     "executor": [{"write": {"greet.py": "..."}, "append": {}, "delete": []},
                  {"skip_report": true}, {"wrong_marker": true}, {"marker": "x"},
                  {"status": "failed", "discovered_tasks": [{"id": "..", "description": ".."}]}],
     "reviewer": [{"verdict": "Failed"}, {"part2_status": "Failed"}, {"skip_part2": true}],
     "questioner": [{"questions": ["..."]}]}

Any role's step may also carry "invalid_json" (true: a wrong `status` enum; "syntax": broken
JSON), "drop" (fields left out of the answer), "output" (fields merged into it), "no_json",
"raw" (the exact answer text), "print" (lines before the answer), "fence", "sleep" (seconds
before anything), "hang" (seconds to keep running once started: the executor has moved its
marker to `[/]`, nothing else is written yet) and "exit_code". The side effects happen
whatever the answer says, unless a skip switch says otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ralph.errors import RalphError
from ralph.fsutil import atomic_write_text
from ralph.workflow.errors import WorkflowError
from ralph.workflow.input_block import input_block

SCRIPT_ENV = "RALPH_FAKE_ROLES_SCRIPT"

ROLES = ("planner", "executor", "reviewer", "questioner")
AGENT_NAMES: dict[str, str] = {
    "planner": "Ralph-Planner",
    "executor": "Ralph-Executor",
    "reviewer": "Ralph-Reviewer",
    "questioner": "Ralph-Questioner",
}
PLANNER_MODES = ("INITIALIZE", "UPDATE", "TASK_BREAKDOWN", "DISCOVERY")
QUESTIONER_MODES = ("BRAINSTORM", "RESEARCH")

# Only the contract's keys are read: free text above them ("NOTE: ...") is not input.
# CYCLE is the origin's spelling of CYCLE_NUMBER; a tolerant receiver takes both.
_KEYS = ("SESSION_PATH", "MODE", "USER_REQUEST", "CONTEXT", "TASK_ID", "ATTEMPT_NUMBER",
         "REPORT_PATH", "CYCLE_NUMBER", "CYCLE")
_KEY_LINE = re.compile(rf"[ \t]*({'|'.join(_KEYS)})[ \t]*:[ \t]*(.*?)[ \t]*")
_REQUIRED: dict[str, tuple[str, ...]] = {
    "planner": ("SESSION_PATH", "MODE"),
    "executor": ("SESSION_PATH", "TASK_ID"),
    "reviewer": ("SESSION_PATH", "TASK_ID", "REPORT_PATH"),
    "questioner": ("SESSION_PATH", "MODE"),
}
_LABELS = {" ": "Not Started", "/": "In Progress", "P": "Review Pending", "x": "Completed",
           "F": "Failed"}
_ANSWER_KEYS = ("invalid_json", "drop", "output", "no_json", "raw", "print", "fence")

Step = dict[str, Any]
Output = dict[str, Any]


class FakeRolesError(RalphError):
    """A prompt or script the fake role agent cannot play."""


@dataclass(frozen=True)
class RolePrompt:
    """What the fake read from its prompt: the role it plays and its input keys."""

    role: str
    inputs: dict[str, str]


@dataclass(frozen=True)
class Answer:
    """What the fake prints and exits with."""

    text: str
    exit_code: int


# ---------------------------------------------------------------------------- the prompt


def _key_lines(prompt: str) -> list[tuple[int, int, str, str]]:
    """(first line, line after, key, value) of each KEY line. A value written `KEY: |` is the
    block of two-space-indented lines after it (how Ralph writes a multi-line value)."""
    lines = prompt.splitlines()
    found: list[tuple[int, int, str, str]] = []
    index = 0
    while index < len(lines):
        match = _KEY_LINE.fullmatch(lines[index])
        index += 1
        if not match:
            continue
        start, value = index - 1, match.group(2)
        if value == "|":
            block: list[str] = []
            while index < len(lines) and lines[index].startswith("  "):
                block.append(lines[index][2:])
                index += 1
            value = "\n".join(block)
        found.append((start, index, match.group(1), value))
    return found


def read_inputs(prompt: str) -> dict[str, str]:
    """The role's input in the prompt, read as `ralph.workflow.prompts.read_input` reads it:
    the `KEY: value` lines of its `## Input` section only, so a KEY line in the instructions
    or the additional context (`TASK_ID: task-7 failed earlier`) is not input. A prompt with
    no such section (written by hand) gives its last run of consecutive KEY lines."""
    try:
        block = input_block(prompt)
    except WorkflowError:
        return _last_block(prompt)
    return {key: value for key, value in block.items() if key in _KEYS}


def _last_block(prompt: str) -> dict[str, str]:
    """The last run of consecutive KEY lines: the input itself, not an example above it."""
    block: dict[str, str] = {}
    end = -1
    for start, after, key, value in _key_lines(prompt):
        if start != end:
            block = {}
        block[key] = value
        end = after
    return block


def detect_role(prompt: str, inputs: Mapping[str, str]) -> str:
    """The role the prompt names. One agent name decides; when the instructions mention
    several (a planner's text may talk about the executor), the input keys choose among them."""
    named = [role for role in ROLES if AGENT_NAMES[role] in prompt]
    by_keys = _role_from_keys(_last_block(prompt) or inputs)
    if len(named) == 1:
        return named[0]
    if by_keys and (by_keys in named or not named):
        return by_keys
    if named:
        return min(named, key=lambda role: prompt.index(AGENT_NAMES[role]))
    raise FakeRolesError("the prompt names no role (Ralph-Planner, Ralph-Executor, "
                         "Ralph-Reviewer, Ralph-Questioner) and its KEY lines fit none")


def _role_from_keys(inputs: Mapping[str, str]) -> str | None:
    mode = inputs.get("MODE", "").upper()
    if "REPORT_PATH" in inputs:
        return "reviewer"
    if "ATTEMPT_NUMBER" in inputs:
        return "executor"
    if "CYCLE_NUMBER" in inputs or "CYCLE" in inputs or mode in QUESTIONER_MODES:
        return "questioner"
    if "USER_REQUEST" in inputs or mode in PLANNER_MODES:
        return "planner"
    if "TASK_ID" in inputs:
        return "executor"
    return None


def parse_prompt(prompt: str, role: str | None = None) -> RolePrompt:
    """The role (given, or detected) and its inputs; FakeRolesError when a required key is
    missing."""
    inputs = read_inputs(prompt)
    role = role or detect_role(prompt, inputs)
    for key in _REQUIRED[role]:
        if not inputs.get(key):
            raise FakeRolesError(f"the {role} prompt has no {key} line")
    return RolePrompt(role, inputs)


# ---------------------------------------------------------------------------- the script


def load_script(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        script = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise FakeRolesError(f"cannot read the script {path}: {exc}") from exc
    if not isinstance(script, dict):
        raise FakeRolesError(f"the script {path} is not a JSON object")
    return script


def next_step(script: Mapping[str, Any], script_path: Path | None, role: str,
              selector: str) -> Step:
    """The role's next step, counted in the calls file beside the script (so a step list is
    consumed across processes); `selector` (TASK_ID or MODE) picks a keyed list."""
    entry = script.get(role)
    key = role
    if isinstance(entry, dict):
        if selector in entry:
            key, entry = f"{role}/{selector}", entry[selector]
        else:
            key, entry = f"{role}/*", entry.get("*")
    steps: list[Step] = entry if isinstance(entry, list) and entry else [{}]
    n = 0
    if script_path is not None:
        calls_path = script_path.with_name(script_path.name + ".calls.json")
        calls = json.loads(calls_path.read_text()) if calls_path.exists() else {}
        n = int(calls.get(key, 0))
        calls[key] = n + 1
        # Whole-file replacement: tests kill this program at any moment.
        atomic_write_text(calls_path, json.dumps(calls), durable=False)
    step = steps[min(n, len(steps) - 1)]
    if not isinstance(step, dict):
        raise FakeRolesError(f"step {n + 1} of {key} in the script is not an object")
    return step


# ---------------------------------------------------------------------------- session files


def session_dir(inputs: Mapping[str, str]) -> Path:
    return Path(inputs["SESSION_PATH"].rstrip("/") or ".")


def session_id(inputs: Mapping[str, str]) -> str:
    return session_dir(inputs).name


def instructions_path(inputs: Mapping[str, str]) -> Path:
    """`<SESSION_ID>.instructions.md` beside the session directory, not in it."""
    directory = session_dir(inputs)
    return directory.with_name(f"{directory.name}.instructions.md")


def report_name(task_id: str, attempt: int) -> str:
    return f"tasks.{task_id}-report.md" if attempt <= 1 else f"tasks.{task_id}-report-r{attempt}.md"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text, durable=False)


def _read(path: Path) -> str:
    return path.read_text() if path.is_file() else ""


def set_marker(progress: Path, task_id: str, marker: str) -> bool:
    """Set the task's progress.md marker (and its label); False when the task has no line."""
    text = _read(progress)
    line = re.compile(rf"^([ \t]*[-*] )\[[^\]]\] {re.escape(task_id)}(?:[ \t]*\(.*\))?[ \t]*$",
                      re.MULTILINE)
    label = f" ({_LABELS[marker]})" if marker in _LABELS else ""
    new, count = line.subn(lambda m: f"{m.group(1)}[{marker}] {task_id}{label}", text, count=1)
    if count:
        _write(progress, new)
    return bool(count)


def _insert_in_section(text: str, heading: str, block: str) -> str:
    """`block` at the end of the `## heading` section (appending the section if missing)."""
    start = text.find(f"\n{heading}\n")
    if start < 0:
        return text.rstrip("\n") + f"\n\n{heading}\n{block}"
    following = text.find("\n## ", start + len(heading) + 2)
    end = len(text) if following < 0 else following + 1
    body = text[:end].rstrip("\n") + "\n" + block
    rest = text[end:]
    return body + ("\n" + rest if rest else "")


def _task_ids(text: str) -> list[str]:
    return re.findall(r"^[-*] ([A-Za-z][\w.-]*): ", text, re.MULTILINE)


def _section(text: str, heading: str) -> str:
    match = re.search(rf"^{re.escape(heading)}[ \t]*\n(.*?)(?=^## |\Z)", text,
                      re.MULTILINE | re.DOTALL)
    return match.group(1) if match else ""


def _task_field(tasks_md: str, task_id: str, field: str) -> str:
    block = re.search(rf"^[-*] {re.escape(task_id)}: (.*?)(?=^[-*] |^#|\Z)", tasks_md,
                      re.MULTILINE | re.DOTALL)
    if not block:
        return ""
    if field == "description":
        return block.group(1).splitlines()[0].strip()
    value = re.search(rf"\*\*{re.escape(field)}\*\*:[ \t]*(.*)", block.group(1))
    return value.group(1).strip() if value else ""


# ---------------------------------------------------------------------------- planner


def _task_spec(raw: Mapping[str, Any], fallback_id: str) -> dict[str, Any]:
    description = str(raw.get("description") or raw.get("title") or "Implement the request")
    return {
        "id": str(raw.get("id") or fallback_id),
        "description": description,
        "depends_on": [str(d) for d in raw.get("depends_on", [])],
        "files": [str(f) for f in raw.get("files", [])],
        "objective": str(raw.get("objective") or raw.get("rationale") or description),
        "criteria": [str(c) for c in raw.get("criteria", [])] or [f"{description} works"],
        "inherits_from": [str(i) for i in raw.get("inherits_from", raw.get("depends_on", []))],
    }


def task_block(spec: Mapping[str, Any]) -> str:
    """One tasks.md entry: `- <id>: <description>` and its four-space-indented bullets."""
    deps = spec["depends_on"]
    kind = f"Sequential (depends on {', '.join(deps)})" if deps else "Sequential"
    return (f"- {spec['id']}: {spec['description']}\n"
            f"    - **Type**: {kind}\n"
            f"    - **Files**: {', '.join(spec['files']) or 'None'}\n"
            f"    - **Objective**: {spec['objective']}\n"
            f"    - **Success Criteria**: {'; '.join(spec['criteria'])}\n"
            f"    - **Inherits From**: {', '.join(spec['inherits_from']) or 'None'}\n")


def _tasks_md(sid: str, specs: Iterable[Mapping[str, Any]]) -> str:
    return ("# Tasks\n\n## Legend\n- `[ ]` Not started\n- `[/]` In progress\n"
            "- `[P]` Pending review\n- `[x]` Completed\n- `[F]` Failed\n\n"
            "## Planning Tasks\n- plan-init: Initialize session artifacts\n"
            "    - **Type**: Sequential\n"
            f"    - **Files**: plan.md, progress.md, tasks.md, {sid}.instructions.md\n"
            "    - **Objective**: Create the session's plan, tasks, progress and instructions\n"
            "    - **Success Criteria**: The four artifacts exist\n"
            "    - **Inherits From**: None\n\n"
            "## Implementation Tasks\n" + "".join(task_block(s) for s in specs))


def _progress_md(specs: Iterable[Mapping[str, Any]]) -> str:
    return ("# Progress Tracking\n\n## Planning Progress\n- [x] plan-init (Completed)\n\n"
            "## Implementation Progress\n"
            + "".join(f"- [ ] {s['id']} (Not Started)\n" for s in specs))


def _plan_md(request: str, specs: list[dict[str, Any]]) -> str:
    title = request.strip().splitlines()[0][:60] if request.strip() else "Ralph session"
    files = sorted({f for s in specs for f in s["files"]})
    return (f"# Plan: {title}\n\n## Goal & Success Criteria\n{request}\n\n"
            + "".join(f"- {c}\n" for s in specs for c in s["criteria"])
            + "\n## Target Files/Artifacts\n"
            + ("".join(f"- {f}\n" for f in files) or "- None yet\n")
            + "\n## Context & Analysis\n- Planned by the fake planner.\n"
            + "\n## Proposed Design/Changes/Approach\n"
            + "".join(f"- {s['id']}: {s['description']}\n" for s in specs)
            + "\n## Verification & Testing\n- Ralph's gates and the reviewer's check.\n"
            + "\n## Risks & Assumptions (Optional)\n- None identified.\n")


def _instructions_md(sid: str, request: str, specs: list[dict[str, Any]]) -> str:
    files = sorted({f for s in specs for f in s["files"]})
    return (f"---\ndescription: 'Ralph session {sid}'\n"
            f"applyTo: '.ralph-sessions/{sid}/**'\n---\n\n"
            f"# Ralph Session {sid} Instructions\n\n{request}\n\n## Target Files\n"
            + ("".join(f"- {f}\n" for f in files) or "- None yet\n")
            + "\n## Agent Skills\n- None\n")


def _discovered_in(context: Any) -> list[dict[str, Any]]:
    """Tasks named by a `discovered_tasks` list anywhere in the CONTEXT object: the honest
    planner adds what the executor discovered."""
    found: list[dict[str, Any]] = []
    if isinstance(context, dict):
        for key, value in context.items():
            if key == "discovered_tasks" and isinstance(value, list):
                found.extend(v for v in value if isinstance(v, dict))
            else:
                found.extend(_discovered_in(value))
    elif isinstance(context, list):
        for value in context:
            found.extend(_discovered_in(value))
    return found


def _context(inputs: Mapping[str, str]) -> Any:
    raw = inputs.get("CONTEXT", "")
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return raw


def _add_tasks(session: Path, raws: Iterable[Mapping[str, Any]]) -> list[str]:
    """Append tasks not yet in tasks.md to it and to progress.md (as `[ ]`); their ids."""
    tasks_path, progress_path = session / "tasks.md", session / "progress.md"
    tasks_text = _read(tasks_path)
    known = set(_task_ids(tasks_text))
    added: list[dict[str, Any]] = []
    for raw in raws:
        number = 1
        while f"task-{number}" in known:
            number += 1
        spec = _task_spec(raw, f"task-{number}")
        if spec["id"] not in known:
            known.add(spec["id"])
            added.append(spec)
    if added:
        blocks = "".join(task_block(s) for s in added)
        _write(tasks_path, _insert_in_section(tasks_text, "## Implementation Tasks", blocks))
        lines = "".join(f"- [ ] {s['id']} (Not Started)\n" for s in added)
        progress = _read(progress_path) or "# Progress Tracking\n"
        _write(progress_path, _insert_in_section(progress, "## Implementation Progress", lines))
    return [s["id"] for s in added]


def _task_count(session: Path) -> dict[str, int]:
    text = _read(session / "tasks.md")
    planning = len(_task_ids(_section(text, "## Planning Tasks")))
    implementation = len(_task_ids(_section(text, "## Implementation Tasks")))
    return {"planning": planning, "implementation": implementation,
            "total": planning + implementation}


def _open_tasks(session: Path) -> bool:
    progress = _section(_read(session / "progress.md"), "## Implementation Progress")
    return bool(re.search(r"^[ \t]*[-*] \[[ /P]\] ", progress, re.MULTILINE))


# What each mode claims to have written: (created, updated).
_CLAIMS: dict[str, tuple[list[str], list[str]]] = {
    "INITIALIZE": (["plan.md", "tasks.md", "progress.md", "<id>.instructions.md"], []),
    "UPDATE": ([], ["plan.md"]),
    "TASK_BREAKDOWN": ([], ["tasks.md", "progress.md"]),
    "DISCOVERY": (["plan.questions.md"], []),
}


def play_planner(inputs: Mapping[str, str], step: Step, paths: str) -> tuple[Output, str]:
    mode = inputs["MODE"].upper()
    if mode not in PLANNER_MODES:
        raise FakeRolesError(f"the planner prompt's MODE {inputs['MODE']!r} is not one of "
                             f"{', '.join(PLANNER_MODES)}")
    session = session_dir(inputs)
    _hang(step)
    if step.get("skip_files"):  # claims what an honest planner would have written
        created = [n.replace("<id>", session_id(inputs)) for n in _CLAIMS[mode][0]]
        updated = list(_CLAIMS[mode][1])
    else:
        created, updated = _planner_files(mode, inputs, step)
    status = str(step.get("status", "completed"))
    next_actions = _planner_next_actions(mode, status, step, session)
    blockers = list(step.get("blockers", ["Which behaviour does the user want here?"]
                         if status in ("blocked", "needs_clarification") else []))
    output: Output = {
        "status": status,
        "artifacts_created": _artifact_paths(created, session, paths),
        "artifacts_updated": _artifact_paths(updated, session, paths),
        "task_count": _task_count(session),
        "next_actions": next_actions,
        "blockers": blockers,
    }
    summary = (f"## Planning Complete\n### Mode: {mode}\n"
               f"### Next Actions for Orchestrator: {', '.join(next_actions) or 'none'}")
    return output, summary


def _planner_files(mode: str, inputs: Mapping[str, str],
                   step: Step) -> tuple[list[str], list[str]]:
    """Write the mode's session files; the names (session-relative) created and updated."""
    session, sid = session_dir(inputs), session_id(inputs)
    request = inputs.get("USER_REQUEST", "")
    context = _context(inputs)
    created: list[str] = []
    updated: list[str] = []
    headline = request.strip().splitlines()[0] if request.strip() else "Implement the request"
    default_task = {"id": "task-1", "description": headline}
    scripted = list(step.get("tasks") or [])
    extra = [*step.get("add_tasks", []), *_discovered_in(context)]
    if mode == "INITIALIZE" or (mode == "TASK_BREAKDOWN"
                                and not (session / "tasks.md").exists()):
        specs = [_task_spec(raw, f"task-{i}") for i, raw in
                 enumerate(scripted or [default_task], start=1)]
        session.mkdir(parents=True, exist_ok=True)
        if mode == "INITIALIZE":
            _write(session / "plan.md", _plan_md(request, specs))
            created.append("plan.md")
        _write(session / "tasks.md", _tasks_md(sid, specs))
        created.append("tasks.md")
        if mode == "INITIALIZE" or not (session / "progress.md").exists():
            _write(session / "progress.md", _progress_md(specs))
            created.append("progress.md")
        if mode == "INITIALIZE":
            _write(instructions_path(inputs), _instructions_md(sid, request, specs))
            created.append(f"{sid}.instructions.md")
        if _add_tasks(session, extra):
            updated.extend(n for n in ("tasks.md", "progress.md") if n not in created)
    elif mode in ("UPDATE", "TASK_BREAKDOWN"):
        if mode == "UPDATE":
            note = " ".join(request.split()) or "update"
            if context is not None:
                note += f" (context: {json.dumps(context)})"
            plan = _read(session / "plan.md") or "# Plan\n"
            _write(session / "plan.md",
                   _insert_in_section(plan, "## Context & Analysis", f"- Update: {note}\n"))
            updated.append("plan.md")
        wanted = [*scripted, *extra]
        if mode == "TASK_BREAKDOWN" and not _task_count(session)["implementation"]:
            wanted = wanted or [default_task]
        if _add_tasks(session, wanted):
            updated.extend(["tasks.md", "progress.md"])
    elif not (session / "plan.questions.md").exists():  # DISCOVERY
        _write(session / "plan.questions.md", _questions_header(inputs))
        created.append("plan.questions.md")
    return created, updated


def _planner_next_actions(mode: str, status: str, step: Step, session: Path) -> list[str]:
    if "next_actions" in step:
        return list(step["next_actions"])
    if status == "needs_qa_cycle" or mode == "DISCOVERY":
        return ["qa_brainstorm", "qa_research"]
    if status in ("blocked", "needs_clarification"):
        return []
    if step.get("complete") or (mode == "UPDATE" and not _open_tasks(session)):
        return ["complete"]
    return ["execute"]


def _artifact_paths(names: list[str], session: Path, paths: str) -> list[str]:
    """Session-relative names (the instructions file is the sibling `../<id>...`), or
    project-relative paths when the script says `"paths": "project"`."""
    out = []
    for name in names:
        sibling = name.endswith(".instructions.md")
        if paths == "project":
            out.append(str(session.parent / name if sibling else session / name))
        else:
            out.append(f"../{name}" if sibling else name)
    return out


# ---------------------------------------------------------------------------- executor


def play_executor(inputs: Mapping[str, str], step: Step) -> tuple[Output, str]:
    session, task_id = session_dir(inputs), inputs["TASK_ID"]
    try:
        attempt = int(inputs.get("ATTEMPT_NUMBER") or 1)
    except ValueError as exc:
        raise FakeRolesError(
            f"ATTEMPT_NUMBER {inputs['ATTEMPT_NUMBER']!r} is not a number") from exc
    progress = session / "progress.md"
    set_marker(progress, task_id, "/")
    _hang(step)
    written = _do_writes(step)
    status = str(step.get("status", "completed"))
    met = bool(step.get("success_criteria_met", status == "completed"))
    name = str(step.get("report_path") or report_name(task_id, attempt))
    discovered = list(step.get("discovered_tasks", []))
    blockers = list(step.get("blockers", ["The task cannot be done as specified"]
                             if status == "blocked" else []))
    if not step.get("skip_report"):
        _write(session / report_name(task_id, attempt),
               _report_part1(session, task_id, attempt, met, written, discovered))
    if "marker" in step:  # "x" or "[x]"
        marker = str(step["marker"])
        set_marker(progress, task_id, marker[1:-1] if len(marker) == 3 else marker)
    elif status == "completed" and met and not step.get("wrong_marker"):
        set_marker(progress, task_id, "P")
    output: Output = {"status": status, "report_path": name, "success_criteria_met": met,
                      "discovered_tasks": discovered, "blockers": blockers}
    summary = (f"## Executor Response\n**Status**: {status}\n**Report Path**: {name}\n"
               f"**Success Criteria Met**: {str(met).lower()}")
    return output, summary


def _do_writes(step: Step) -> list[str]:
    for path, content in step.get("write", {}).items():
        _write(Path(path), str(content))
    for path, text in step.get("append", {}).items():
        _write(Path(path), _read(Path(path)) + str(text))
    for path in step.get("delete", []):
        Path(path).unlink(missing_ok=True)
    return [*step.get("write", {}), *step.get("append", {}), *step.get("delete", [])]


def _criteria(session: Path, task_id: str) -> list[str]:
    raw = _task_field(_read(session / "tasks.md"), task_id, "Success Criteria")
    return [c.strip() for c in raw.split(";") if c.strip()] or [f"{task_id} is done"]


def _report_part1(session: Path, task_id: str, attempt: int, met: bool, written: list[str],
                  discovered: list[Any]) -> str:
    tasks_md = _read(session / "tasks.md")
    objective = _task_field(tasks_md, task_id, "Objective") or task_id
    mark, word = ("✅", "Met") if met else ("❌", "Not Met")
    rework = ""
    title = f"# Task Report: {task_id}"
    if attempt > 1:
        title += f" [Rework #{attempt}]"
        rework = (f"### Rework Context\n- **Previous Report**: "
                  f"{report_name(task_id, attempt - 1)}\n"
                  "- **Reason for Rework**: the previous review failed\n"
                  "- **New Approach**: address the reviewer's feedback\n\n")
    return (f"{title}\n---\n## PART 1: IMPLEMENTATION REPORT\n*(Created by Ralph-Executor)*\n\n"
            + rework
            + f"### Objective Recap\n{objective}\n\n### Success Criteria Status\n"
            + "".join(f"- {mark} {c}: {word} - checked by the fake executor\n"
                      for c in _criteria(session, task_id))
            + "\n### Summary of Changes\n"
            + ("".join(f"- {p}\n" for p in written) or "- No files changed\n")
            + "\n### Verification Results\n- Nothing run (fake executor)\n"
            + "\n### Discovered Tasks\n"
            + ("".join(f"- {d.get('id', '?')}: {d.get('description', '')}\n"
                       for d in discovered if isinstance(d, dict)) or "- None\n")
            + "\n---\n## PART 2: REVIEW REPORT\n*(To be appended by Ralph-Reviewer)*\n")


# ---------------------------------------------------------------------------- reviewer


def play_reviewer(inputs: Mapping[str, str], step: Step) -> tuple[Output, str]:
    session, task_id = session_dir(inputs), inputs["TASK_ID"]
    claimed = Path(inputs["REPORT_PATH"])
    report = claimed if claimed.is_file() else session / claimed
    _hang(step)
    criteria = _criteria(session, task_id)
    if not report.is_file():
        verdict = str(step.get("verdict", "Failed"))
        issues = list(step.get("issues", [f"the report {claimed} does not exist"]))
        output: Output = {"status": step.get("status", "error"), "verdict": verdict,
                          "criteria_results": [], "quality_assessment": "No report to review.",
                          "issues": issues, "feedback": step.get("feedback", "Write the report.")}
        return output, f"## Reviewer Response\n**Status**: error\n**Verdict**: {verdict}"
    text = report.read_text()
    part1 = text.split("## PART 2", 1)[0]
    verdict = str(step.get("verdict", "Failed" if "Not Met" in part1 else "Qualified"))
    met = verdict == "Qualified"
    results = step.get("criteria_results") or [
        {"criterion": c, "met": met, "evidence": f"{report.name} PART 1",
         "finding": "Met" if met else "Not met"} for c in criteria]
    issues = list(step.get("issues", [] if met else ["a success criterion is not met"]))
    feedback = str(step.get("feedback", "" if met else "Meet every success criterion."))
    quality = str(step.get("quality_assessment", "Good." if met else "Incomplete."))
    if not step.get("skip_part2"):
        status_line = str(step.get("part2_status", verdict))
        _write(report, text.rstrip("\n") + "\n" + _part2(results, quality, issues, feedback,
                                                         status_line))
    output = {"status": step.get("status", "completed"), "verdict": verdict,
              "criteria_results": results, "quality_assessment": quality, "issues": issues,
              "feedback": feedback}
    summary = (f"## Reviewer Response\n**Status**: {output['status']}\n**Verdict**: {verdict}\n"
               f"**Task ID**: {task_id}")
    return output, summary


_NONE = "- None\n"


def _part2(results: list[Any], quality: str, issues: list[str], feedback: str,
           status_line: str) -> str:
    validation = ""
    for result in results:
        item = result if isinstance(result, dict) else {"criterion": str(result)}
        ok = bool(item.get("met"))
        validation += (f"- {'✅' if ok else '❌'} **{item.get('criterion', '?')}**: "
                       f"{'Met' if ok else 'Not Met'}\n"
                       f"    - **Evidence Reviewed**: {item.get('evidence', '')}\n"
                       f"    - **Finding**: {item.get('finding', '')}\n")
    return ("\n---\n## PART 2: REVIEW REPORT\n*(Appended by Ralph-Reviewer)*\n\n"
            f"### Review Summary\nReviewed by the fake reviewer.\n\n"
            f"### Success Criteria Validation\n{validation or _NONE}\n"
            f"### Quality Assessment\n{quality}\n\n### Issues Identified (if any)\n"
            + ("".join(f"- {i}\n" for i in issues) or "- None\n")
            + "\n### Validation Actions Performed\n- Read the report's PART 1\n\n"
            f"### Recommendation\n**Status**: {status_line}\n**Reasoning**: {quality}\n\n"
            f"### Feedback for Next Iteration (if Failed)\n{feedback or 'None'}\n")


# ---------------------------------------------------------------------------- questioner


def _questions_header(inputs: Mapping[str, str]) -> str:
    sid = session_id(inputs)
    plan = _read(session_dir(inputs) / "plan.md")
    title = re.search(r"^# Plan: (.*)$", plan, re.MULTILINE)
    now = datetime.now().isoformat(timespec="seconds")
    return (f"# Q&A Discovery: {title.group(1) if title else sid}\n\n## Overview\n"
            f"- **Session ID**: {sid}\n- **Created**: {now}\n- **Last Updated**: {now}\n"
            "- **Q&A Cycles Completed**: 0\n- **Status**: Active\n\n## Q&A Cycles\n")


_DEFAULT_QUESTIONS = [
    {"question": "Which inputs must the change handle?", "priority": "High",
     "category": "Requirements"},
    {"question": "Which existing interfaces does it touch?", "priority": "Medium",
     "category": "Technical"},
    {"question": "What could break for current users?", "priority": "Low", "category": "Risks"},
]


def play_questioner(inputs: Mapping[str, str], step: Step) -> tuple[Output, str]:
    mode = inputs["MODE"].upper()
    if mode not in QUESTIONER_MODES:
        raise FakeRolesError(f"the questioner prompt's MODE {inputs['MODE']!r} is not one of "
                             f"{', '.join(QUESTIONER_MODES)}")
    raw_cycle = inputs.get("CYCLE_NUMBER") or inputs.get("CYCLE") or "1"
    try:
        cycle = int(raw_cycle)
    except ValueError as exc:
        raise FakeRolesError(f"CYCLE_NUMBER {raw_cycle!r} is not a number") from exc
    path = session_dir(inputs) / "plan.questions.md"
    _hang(step)
    text = _read(path) or _questions_header(inputs)
    heading = f"### Cycle {cycle}\n"
    questions = [q if isinstance(q, dict) else {"question": str(q), "priority": "High"}
                 for q in step.get("questions", _DEFAULT_QUESTIONS)]
    now = datetime.now().isoformat(timespec="seconds")
    if mode == "BRAINSTORM":
        text = text.rstrip("\n") + f"\n\n{heading}- **Initiated**: {now}\n"
        text += "- **Objective**: Find what the plan does not yet know\n\n"
        text += "#### Generated Questions\n"
        for i, q in enumerate(questions, start=1):
            priority = str(q.get("priority", "High"))
            text += (f"{i}. **[{priority} Priority]** {q.get('question', '?')}\n"
                     f"    - **Category**: {q.get('category', 'Technical')}\n"
                     f"    - **Priority**: {priority}\n    - **Status**: Unanswered\n"
                     "    - **Impact**: Shapes the plan\n")
        priorities = [str(q.get("priority", "High")).lower() for q in questions]
        generated, answered = len(questions), 0
        confidence = {"high": 0, "medium": 0, "low": 0, "unknown": 0}
    else:
        if heading not in text:
            text = text.rstrip("\n") + f"\n\n{heading}"
        cycle_text = text[text.index(heading):]
        priorities = [p.lower() for p in re.findall(r"^\d+\. \*\*\[(\w+) Priority\]\*\*",
                                                    cycle_text, re.MULTILINE)]
        generated = 0
        answered = int(step.get("answered", len(priorities)))
        text = text.rstrip("\n") + "\n\n#### Research Results\n"
        text += "".join(f"{i}. **Answer**: Found in the codebase\n    - **Source**: the code\n"
                        "    - **Confidence**: High\n" for i in range(1, answered + 1))
        text += (f"\n#### Cycle Summary\n- Questions generated: {len(priorities)}\n"
                 f"- Questions answered: {answered}\n- New questions: 0\n")
        text = re.sub(r"(\*\*Q&A Cycles Completed\*\*: )\d+", rf"\g<1>{cycle}", text)
        confidence = {"high": answered, "medium": 0, "low": 0, "unknown": 0}
    text = re.sub(r"(\*\*Last Updated\*\*: ).*", lambda m: m.group(1) + now, text, count=1)
    if not step.get("skip_files"):
        _write(path, text)
    output: Output = {
        "status": step.get("status", "completed"),
        "questions_generated": generated,
        "questions_answered": answered,
        "priority_breakdown": {p: priorities.count(p) for p in ("high", "medium", "low")},
        "confidence_distribution": confidence,
        "new_questions_emerged": int(step.get("new_questions_emerged", 0)),
        "invalidated_assumptions": int(step.get("invalidated_assumptions", 0)),
        "critical_findings": list(step.get("critical_findings", [])),
        "recommendations": list(step.get("recommendations", [])),
    }
    done = "Question Generation" if mode == "BRAINSTORM" else "Research"
    return output, f"Q&A Discovery - {done} Complete\nCycle: {cycle}\nFile Updated: {path.name}"


# ---------------------------------------------------------------------------- the answer


def _hang(step: Step) -> None:
    time.sleep(float(step.get("hang", 0)))


def render_answer(output: Output, summary: str, step: Step, fence: bool) -> str:
    """The answer text: `summary`, then the output JSON (fenced or bare) as the step shapes it."""
    if "raw" in step:
        return str(step["raw"])
    lines = [*map(str, step.get("print", [])), summary]
    if step.get("no_json"):
        return "\n".join([*lines, "Done; no JSON this time."]) + "\n"
    body = {k: v for k, v in {**output, **step.get("output", {})}.items()
            if k not in step.get("drop", [])}
    invalid = step.get("invalid_json")
    if invalid and invalid != "syntax":
        body["status"] = "not-a-status"
    data = json.dumps(body, indent=2, ensure_ascii=False)
    if invalid == "syntax":
        data = data[: len(data) // 2]  # cut mid-object: no JSON parser takes it
    data = f"```json\n{data}\n```" if step.get("fence", fence) else data
    return "\n".join([*lines, "", data]) + "\n"


def play(prompt: RolePrompt, step: Step, *, fence: bool = True, paths: str = "session") -> Answer:
    """Do the role's work for `step` and return what to print and exit with."""
    time.sleep(float(step.get("sleep", 0)))
    inputs = prompt.inputs
    if prompt.role == "planner":
        output, summary = play_planner(inputs, step, paths)
    elif prompt.role == "executor":
        output, summary = play_executor(inputs, step)
    elif prompt.role == "reviewer":
        output, summary = play_reviewer(inputs, step)
    else:
        output, summary = play_questioner(inputs, step)
    return Answer(render_answer(output, summary, step, fence), int(step.get("exit_code", 0)))


def _selector(prompt: RolePrompt) -> str:
    if prompt.role in ("executor", "reviewer"):
        return prompt.inputs["TASK_ID"]
    return prompt.inputs["MODE"].upper()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fake_roles")
    parser.add_argument("--script", type=Path)
    parser.add_argument("--prompt-file", type=Path)
    parser.add_argument("--role", choices=ROLES, help="play this role whatever the prompt says")
    parser.add_argument("--bare", action="store_true", help="end with bare JSON, not fenced")
    args = parser.parse_args(argv)
    script_path: Path | None = args.script
    if script_path is None and os.environ.get(SCRIPT_ENV):
        script_path = Path(os.environ[SCRIPT_ENV])
    try:
        prompt_text = args.prompt_file.read_text() if args.prompt_file else sys.stdin.read()
        script = load_script(script_path)
        prompt = parse_prompt(prompt_text, args.role)
        step = next_step(script, script_path, prompt.role, _selector(prompt))
        fence = bool(script.get("fence", True)) and not args.bare
        answer = play(prompt, step, fence=fence, paths=str(script.get("paths", "session")))
    except (FakeRolesError, OSError) as exc:
        print(f"fake_roles: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(answer.text)
    sys.stdout.flush()
    return answer.exit_code


if __name__ == "__main__":
    sys.exit(main())

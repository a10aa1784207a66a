"""The iteration's prompt: the prompt file, an anchor on the one task, and project memory,
within a character budget that drops the oldest progress first."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ralph.tracker import Task

_TRUNCATED = "\n[... truncated to fit the prompt budget ...]\n"


@dataclass(frozen=True)
class Memory:
    """Project memory files' text ("" when a file is missing)."""

    agents: str
    feedback: str
    progress: str
    prd: str
    prd_name: str = "PRD.md"
    progress_name: str = "progress.md"


NOTE_CHARS = 2000  # each note about the last attempt, at most


def anchor(task: Task, branch: str | None, git_status: str,
           notes: Sequence[str] = ()) -> str:
    lines = ["## Your task for this iteration", "",
             f"- Task id: {task.id}", f"- Title: {task.title}", f"- Kind: {task.kind}"]
    if task.acceptance:
        lines.append("- Acceptance criteria:")
        lines += [f"  - {item}" for item in task.acceptance]
    if task.depends_on:
        lines.append(f"- Depends on (done): {', '.join(task.depends_on)}")
    lines.append(f"- Branch: {branch or '(detached)'}")
    # Only trailing blank lines go: the status columns (" M" vs "M ") carry meaning.
    status_lines = [line for line in git_status.rstrip().splitlines() if line.strip()]
    lines.append("- Git status (short): " + ("" if status_lines else "clean"))
    if status_lines:
        lines += ["```", *status_lines[:40], "```"]
    if notes:
        lines += ["", "### Your last attempt at this task", ""]
        lines += [f"- {note[:NOTE_CHARS]}" for note in notes]
    lines += ["", "Work on this task only. Ralph runs the gates and decides whether it is done."]
    return "\n".join(lines)


_MEMORY_HEADING = "\n## Project memory\n"


def _section(name: str, text: str) -> str:
    return f"\n### {name}\n\n{text}\n"


def build_prompt(template: str, task: Task, *, branch: str | None, git_status: str,
                 memory: Memory, budget: int, progress_tail: int,
                 notes: Sequence[str] = ()) -> str:
    """Assemble the prompt; if it exceeds `budget` characters, shed memory in this order:
    the oldest progress, then the PRD's end, then FEEDBACK.md's, then AGENTS.md's."""
    head = template.rstrip() + "\n\n" + anchor(task, branch, git_status, notes) + "\n"
    progress_name = f"{memory.progress_name} (most recent)"
    texts = {
        "AGENTS.md": memory.agents.strip(),
        "FEEDBACK.md": memory.feedback.strip(),
        progress_name: _tail_lines(memory.progress.strip(), progress_tail),
        memory.prd_name: memory.prd.strip(),
    }

    def size() -> int:
        body = sum(len(_section(n, t)) for n, t in texts.items() if t)
        return len(head) + (len(_MEMORY_HEADING) + body if body else 0)

    for name in (progress_name, memory.prd_name, "FEEDBACK.md", "AGENTS.md"):
        overflow = size() - budget
        if overflow <= 0:
            break
        text = texts[name]
        keep = max(0, len(text) - overflow)
        texts[name] = _tail_lines(text, keep) if name == progress_name else text[:keep]
        if texts[name] and size() > budget:  # the section's own heading did not fit either
            texts[name] = ""
    parts = [head]
    if any(texts.values()):
        parts.append(_MEMORY_HEADING)
        parts += [_section(n, t) for n, t in texts.items() if t]
    prompt = "".join(parts)
    return prompt if len(prompt) <= budget else prompt[:budget - len(_TRUNCATED)] + _TRUNCATED


def _tail_lines(text: str, limit: int) -> str:
    """The last whole lines of `text` that fit in `limit` characters (oldest dropped first);
    a newest line longer than `limit` leaves nothing rather than half a line."""
    if len(text) <= limit:
        return text
    if limit <= 0:
        return ""
    cut = text[-limit:]
    if text[-limit - 1] == "\n":
        return cut
    newline = cut.find("\n")
    return cut[newline + 1:] if newline >= 0 else ""

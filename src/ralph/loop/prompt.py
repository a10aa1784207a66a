"""The iteration's prompt: the prompt file, an anchor on the one task, and project memory,
within a character budget that drops the oldest progress first."""

from __future__ import annotations

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


def anchor(task: Task, branch: str | None, git_status: str) -> str:
    lines = ["## Your task for this iteration", "",
             f"- Task id: {task.id}", f"- Title: {task.title}", f"- Kind: {task.kind}"]
    if task.acceptance:
        lines.append("- Acceptance criteria:")
        lines += [f"  - {item}" for item in task.acceptance]
    if task.depends_on:
        lines.append(f"- Depends on (done): {', '.join(task.depends_on)}")
    lines.append(f"- Branch: {branch or '(detached)'}")
    status = git_status.strip()
    lines.append("- Git status (short): " + ("clean" if not status else ""))
    if status:
        lines += ["```", *status.splitlines()[:40], "```"]
    lines += ["", "Work on this task only. Ralph runs the gates and decides whether it is done."]
    return "\n".join(lines)


def build_prompt(template: str, task: Task, *, branch: str | None, git_status: str,
                 memory: Memory, budget: int, progress_tail: int) -> str:
    """Assemble the prompt; if it exceeds `budget` characters, shed memory in this order:
    the oldest progress, then the PRD's end, then FEEDBACK.md's, then AGENTS.md's."""
    head = template.rstrip() + "\n\n" + anchor(task, branch, git_status) + "\n"
    progress = _tail_lines(memory.progress, progress_tail)
    sections = [
        ("AGENTS.md", memory.agents),
        ("FEEDBACK.md", memory.feedback),
        (f"{memory.progress_name} (most recent)", progress),
        (memory.prd_name, memory.prd),
    ]
    room = budget - len(head) - len("\n## Project memory\n")
    texts = {name: text.strip() for name, text in sections}
    overflow = sum(len(t) + len(n) + 10 for n, t in texts.items() if t) - room
    shed_order = [sections[2][0], sections[3][0], sections[1][0], sections[0][0]]
    for name in shed_order:
        if overflow <= 0:
            break
        text = texts[name]
        keep = max(0, len(text) - overflow - len(_TRUNCATED))
        cut = _tail_lines(text, keep) if name == shed_order[0] else text[:keep]
        overflow -= len(text) - len(cut)
        texts[name] = cut
    parts = [head, "\n## Project memory\n"]
    for name, _ in sections:
        if texts[name]:
            parts.append(f"\n### {name}\n\n{texts[name]}\n")
    prompt = "".join(parts)
    return prompt if len(prompt) <= budget else prompt[:budget - len(_TRUNCATED)] + _TRUNCATED


def _tail_lines(text: str, limit: int) -> str:
    """The last whole lines of `text` that fit in `limit` characters (oldest dropped first)."""
    if len(text) <= limit:
        return text
    if limit <= 0:
        return ""
    cut = text[-limit:]
    newline = cut.find("\n")
    return cut[newline + 1:] if 0 <= newline < len(cut) - 1 else cut

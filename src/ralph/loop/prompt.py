"""The iteration's prompt: the prompt file, an anchor on the one task, and project memory,
within a character budget that drops the oldest progress first."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ralph.notes import NOTE_TYPES, Note
from ralph.tracker import Task
from ralph.wording import counted

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


NOTE_CHARS = 4000  # each note about the last attempt, at most (they come bounded already)


def anchor(task: Task, branch: str | None, git_status: str,
           notes: Sequence[str] = (), gates: Sequence[str] | None = None,
           notes_budget: int | None = None) -> str:
    """The part of the prompt about this iteration's task: what it is, the tree, the gates
    that will judge it, and what went wrong in the last attempt at it (as many whole notes
    as fit in `notes_budget` characters, most useful first)."""
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
    if gates is not None:
        if gates:
            lines.append("- Gates: after you, Ralph runs these in the project root; the task "
                         "is done only if every one exits 0:")
            lines += [f"  - `{command}`" for command in gates]
        else:
            lines.append("- Gates: none are configured; Ralph checks that you marked the "
                         "task done")
    if notes:
        lines += ["", "### Your last attempt at this task", ""]
        left = notes_budget if notes_budget is not None else sum(map(len, notes)) + 1
        for note in notes:
            item = "- " + note[:NOTE_CHARS].replace("\n", "\n  ")
            if len(item) > left:
                break
            lines.append(item)
            left -= len(item) + 1
    lines += ["", "Work on this task only. Ralph runs the gates and decides whether it is done."]
    return "\n".join(lines)


_MEMORY_HEADING = "\n## Project memory\n"


def _section(name: str, text: str) -> str:
    return f"\n### {name}\n\n{text}\n"


def build_prompt(template: str, task: Task, *, branch: str | None, git_status: str,
                 memory: Memory, budget: int, progress_tail: int,
                 notes: Sequence[str] = (), gates: Sequence[str] | None = None,
                 session_notes: str = "") -> str:
    """Assemble the prompt; if it exceeds `budget` characters, shed memory in this order:
    the oldest progress, then the PRD's end, then FEEDBACK.md's, then AGENTS.md's.
    `session_notes`: the notes section (see `notes_section`), bounded by its caller."""
    # What went wrong last time takes at most a quarter of the budget: the memory too needs
    # room (the notes come most useful first, so the first ones stay).
    head = (template.rstrip() + "\n\n"
            + anchor(task, branch, git_status, notes, gates, notes_budget=budget // 4)
            + "\n" + (f"\n{session_notes.rstrip()}\n" if session_notes else ""))
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


NOTES_HEADING = "## Notes from earlier iterations (newest first)"
_LEFT_OUT_CHARS = 40  # "- (12 older notes not shown)"


def notes_section(notes: Sequence[Note], *, budget: int, add_command: str) -> str:
    """The session notes (`ralph notes`) for a prompt: newest first, as many whole notes as
    fit in `budget` characters, then how to add one. Empty when `budget` is too small for
    the section's heading and how-to."""
    if budget <= 0:
        return ""
    how = (f"Leave a note for later iterations (what you learned, decided, or what blocks "
           f"you): `{add_command} --type learning \"...\"` (types: "
           f"{', '.join(NOTE_TYPES)}).")
    lines = [NOTES_HEADING, ""]
    # The heading, the how-to and the line counting the notes left out are in the budget.
    size = len(how) + len(NOTES_HEADING) + 4 + _LEFT_OUT_CHARS
    if size > budget:  # not even the how-to fits: better no section than half of one
        return ""
    shown = 0
    for note in reversed(notes):
        where = f", iteration {note.iteration}" if note.iteration is not None else ""
        line = f"- [{note.type}{where}] " + " ".join(note.text.split())
        if size + len(line) + 1 > budget:
            room = budget - size - 1
            if not shown and room >= _LEFT_OUT_CHARS:  # the newest, cut, rather than none
                lines.append(line[:room - 1] + "…")
                shown += 1
            break
        lines.append(line)
        size += len(line) + 1
        shown += 1
    if not notes:
        lines.append("- (none yet)")
    if shown < len(notes):
        lines.append(f"- ({counted(len(notes) - shown, 'older note')} not shown)")
    lines += ["", how]
    return "\n".join(lines)

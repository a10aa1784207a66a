"""The iteration's prompt (ralph.loop.prompt.build_prompt): the prompt file, an anchor on the
one task, and project memory within a character budget that sheds, in order, the oldest
progress, the PRD's end, FEEDBACK.md's end and AGENTS.md's end."""

from __future__ import annotations

import random
import re
from dataclasses import replace
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ralph.loop.iteration import _read_tail
from ralph.loop.prompt import NOTES_HEADING, Memory, _tail_lines, build_prompt, notes_section
from ralph.notes import Note
from ralph.tracker import Task

TEMPLATE = "# Build\n\nYou are working on this project. Follow AGENTS.md.\n"
MEMORY_MARK = "\n## Project memory\n"
PROGRESS = "progress.md (most recent)"
NAMES = ("AGENTS.md", "FEEDBACK.md", PROGRESS, "PRD.md")
BIG = 10_000_000


def task(**changes: object) -> Task:
    base = Task(id="7", title="Add the login page", status="open", kind="build",
                acceptance=("a user can log in", "a wrong password is refused"),
                depends_on=(), priority=None, order=6, blocked_reason=None)
    return replace(base, **changes)  # type: ignore[arg-type]


def lines(tag: str, count: int, width: int = 30) -> str:
    """`count` numbered lines, oldest first, each exactly `width` characters long."""
    return "\n".join(f"{tag} {i:05d} ".ljust(width, tag[0]) for i in range(count))


def memory(agents: int = 40, feedback: int = 40, progress: int = 40, prd: int = 40) -> Memory:
    return Memory(agents=lines("agents", agents), feedback=lines("feedback", feedback),
                  progress=lines("progress", progress), prd=lines("prd", prd))


def build(mem: Memory, budget: int = BIG, *, progress_tail: int = BIG,
          template: str = TEMPLATE, git_status: str = "", branch: str | None = "main",
          the_task: Task | None = None) -> str:
    return build_prompt(template, the_task or task(), branch=branch, git_status=git_status,
                        memory=mem, budget=budget, progress_tail=progress_tail)


def sections(prompt: str) -> dict[str, str]:
    """The memory sections of a prompt, by heading, each without its framing newlines."""
    at = prompt.find(MEMORY_MARK)
    if at < 0:
        return {}
    out = {}
    for chunk in prompt[at + len(MEMORY_MARK):].split("\n### ")[1:]:
        name, _, text = chunk.partition("\n\n")
        out[name] = text.rstrip("\n")
    return out


def state_of(found: dict[str, str], name: str, original: str) -> str:
    text = found.get(name, "")
    if not text:
        return "gone"
    return "full" if text == original.strip() else "cut"


# -- the anchor ------------------------------------------------------------------------------------


def test_anchor_names_the_task_and_the_repository() -> None:
    prompt = build(memory(), git_status="?? notes.txt\n M src/app.py\n", branch="feature/x")
    assert prompt.startswith(TEMPLATE.rstrip() + "\n\n## Your task for this iteration\n")
    anchor = prompt[:prompt.index(MEMORY_MARK)]
    assert "- Task id: 7\n" in anchor
    assert "- Title: Add the login page\n" in anchor
    assert "- Kind: build\n" in anchor
    assert "- Acceptance criteria:\n  - a user can log in\n  - a wrong password is refused\n" \
        in anchor
    assert "- Branch: feature/x\n" in anchor
    assert "```\n?? notes.txt\n M src/app.py\n```" in anchor
    assert "Work on this task only." in anchor


def test_anchor_shows_git_status_as_git_prints_it() -> None:
    """`git status --short` columns matter: " M" (changed, not staged) is not "M " (staged).
    The first line keeps its leading space like every other line."""
    prompt = build(memory(), git_status=" M src/app.py\n M src/db.py\n")
    assert "```\n M src/app.py\n M src/db.py\n```" in prompt


def test_anchor_clean_tree_detached_head_no_criteria() -> None:
    prompt = build(memory(), branch=None, git_status="  \n",
                   the_task=task(acceptance=(), kind="docs", title="[DOCS] Write the README"))
    anchor = prompt[:prompt.index(MEMORY_MARK)]
    assert "- Kind: docs\n" in anchor
    assert "- Title: [DOCS] Write the README\n" in anchor
    assert "- Branch: (detached)\n" in anchor
    assert "- Git status (short): clean\n" in anchor
    assert "Acceptance criteria" not in anchor
    assert "```" not in anchor


def test_anchor_lists_the_done_prerequisites() -> None:
    prompt = build(memory(), the_task=task(depends_on=("1", "3")))
    assert "- Depends on (done): 1, 3\n" in prompt


def test_anchor_bounds_a_long_git_status() -> None:
    status = "\n".join(f"?? file{i}.txt" for i in range(500))
    prompt = build(memory(), git_status=status)
    assert "?? file39.txt" in prompt
    assert "?? file40.txt" not in prompt


def test_the_fake_agent_finds_the_task_id_line() -> None:
    # ralph.testing.fake_agent (and people) read `- Task id: X` on a line of its own
    prompt = build(memory(), the_task=task(id="US-12"))
    assert "\n- Task id: US-12\n" in prompt


# -- memory ----------------------------------------------------------------------------------------


def test_every_memory_section_is_present_in_order() -> None:
    mem = memory()
    prompt = build(mem)
    found = sections(prompt)
    assert list(found) == list(NAMES)
    assert found["AGENTS.md"] == mem.agents
    assert found["FEEDBACK.md"] == mem.feedback
    assert found[PROGRESS] == mem.progress
    assert found["PRD.md"] == mem.prd
    assert prompt.index("### AGENTS.md") > prompt.index("- Task id: 7")


def test_file_names_come_from_the_configuration() -> None:
    mem = replace(memory(), prd_name="prd.json", progress_name="notes/progress.txt")
    found = sections(build(mem))
    assert list(found) == ["AGENTS.md", "FEEDBACK.md", "notes/progress.txt (most recent)",
                           "prd.json"]


def test_empty_or_missing_files_have_no_section() -> None:
    mem = Memory(agents="", feedback="  \n\n", progress="- did a thing", prd="")
    found = sections(build(mem))
    assert found == {PROGRESS: "- did a thing"}


def test_progress_tail_keeps_the_newest_whole_lines() -> None:
    mem = memory(progress=100)
    prompt = build(mem, progress_tail=31 * 10 + 5)  # ten 30-character lines and newlines
    kept = sections(prompt)[PROGRESS].splitlines()
    originals = mem.progress.splitlines()
    assert kept, prompt
    assert kept == originals[-len(kept):]  # a suffix of whole lines: the newest
    assert 9 <= len(kept) <= 10
    assert kept[-1] == originals[-1]


def test_progress_tail_zero_drops_progress() -> None:
    found = sections(build(memory(), progress_tail=0))
    assert PROGRESS not in found
    assert list(found) == ["AGENTS.md", "FEEDBACK.md", "PRD.md"]


def test_progress_tail_never_starts_mid_line() -> None:
    """A last line longer than the tail is not cut in the middle: only whole lines go in."""
    long_last = "- " + "a very long progress note " * 20
    mem = replace(memory(), progress="- short note\n" + long_last + "\n")
    text = sections(build(mem, progress_tail=100)).get(PROGRESS, "")
    whole_lines = set(mem.progress.splitlines())
    assert all(line in whole_lines for line in text.splitlines()), text


# -- the budget ------------------------------------------------------------------------------------


def _sizes(mem: Memory) -> dict[str, int]:
    """Prompt sizes with nothing shed, without progress, without the PRD too, and so on."""
    without_progress = replace(mem, progress="")
    without_prd = replace(without_progress, prd="")
    without_feedback = replace(without_prd, feedback="")
    return {"full": len(build(mem)), "no_progress": len(build(without_progress)),
            "no_prd": len(build(without_prd)), "no_feedback": len(build(without_feedback)),
            "head": len(build(Memory("", "", "", "")))}


def test_over_budget_the_oldest_progress_goes_first() -> None:
    mem = memory(progress=200)
    budget = _sizes(mem)["full"] - 500
    prompt = build(mem, budget)
    assert len(prompt) <= budget
    found = sections(prompt)
    assert found["AGENTS.md"] == mem.agents
    assert found["FEEDBACK.md"] == mem.feedback
    assert found["PRD.md"] == mem.prd
    kept = found[PROGRESS].splitlines()
    originals = mem.progress.splitlines()
    assert 0 < len(kept) < len(originals)
    assert kept == originals[-len(kept):]  # the newest lines stay, whole


def test_then_the_prd_is_cut_from_its_end() -> None:
    mem = memory()
    budget = _sizes(mem)["no_progress"] - 300
    prompt = build(mem, budget)
    assert len(prompt) <= budget
    found = sections(prompt)
    assert PROGRESS not in found
    assert found["AGENTS.md"] == mem.agents
    assert found["FEEDBACK.md"] == mem.feedback
    prd = found["PRD.md"]
    assert 0 < len(prd) < len(mem.prd)
    assert mem.prd.startswith(prd)  # the PRD's beginning stays


def test_then_feedback_is_cut() -> None:
    mem = memory()
    budget = _sizes(mem)["no_prd"] - 300
    prompt = build(mem, budget)
    assert len(prompt) <= budget
    found = sections(prompt)
    assert PROGRESS not in found and "PRD.md" not in found
    assert found["AGENTS.md"] == mem.agents
    assert 0 < len(found["FEEDBACK.md"]) < len(mem.feedback)
    assert mem.feedback.startswith(found["FEEDBACK.md"])


def test_then_agents_is_cut_last() -> None:
    mem = memory()
    budget = _sizes(mem)["no_feedback"] - 300
    prompt = build(mem, budget)
    assert len(prompt) <= budget
    found = sections(prompt)
    assert list(found) == ["AGENTS.md"]
    assert 0 < len(found["AGENTS.md"]) < len(mem.agents)
    assert mem.agents.startswith(found["AGENTS.md"])
    assert "- Task id: 7\n" in prompt  # the anchor is never shed before memory


def test_within_budget_nothing_is_shed() -> None:
    mem = memory()
    exact = _sizes(mem)["full"]
    assert build(mem, exact) == build(mem)


def test_no_room_for_memory_keeps_the_anchor() -> None:
    mem = memory()
    budget = _sizes(mem)["head"] + 5
    prompt = build(mem, budget)
    assert len(prompt) <= budget
    assert sections(prompt) == {}
    assert "- Task id: 7\n" in prompt and "- Branch: main" in prompt


def test_a_huge_template_is_cut_to_the_budget() -> None:
    template = "Instructions.\n" * 1000
    prompt = build(memory(), 2000, template=template)
    assert len(prompt) <= 2000
    assert prompt.startswith("Instructions.\n")
    assert "truncated" in prompt


_text = st.lists(st.text(alphabet="abcdefgh xyz-.,", min_size=0, max_size=120),
                 min_size=0, max_size=60).map("\n".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(agents=_text, feedback=_text, progress=_text, prd=_text,
       template=st.text(alphabet="abc \n", max_size=3000),
       budget=st.integers(min_value=1000, max_value=20_000))
def test_never_over_budget_and_sheds_in_order(agents: str, feedback: str, progress: str,
                                              prd: str, template: str, budget: int) -> None:
    mem = Memory(agents=agents, feedback=feedback, progress=progress, prd=prd)
    prompt = build(mem, budget, template=template)
    assert len(prompt) <= budget
    head = build(Memory("", "", "", ""), template=template)
    if len(head) <= budget:
        assert prompt.startswith(head.removesuffix(MEMORY_MARK))  # the anchor is whole
    found = sections(prompt)
    states = {name: state_of(found, name, original)
              for name, original in zip(NAMES, (agents, feedback, progress, prd), strict=True)}
    if states["PRD.md"] != "full" and prd.strip():
        assert states[PROGRESS] == "gone"
    if states["FEEDBACK.md"] != "full" and feedback.strip():
        assert states[PROGRESS] == "gone" and states["PRD.md"] == "gone"
    if states["AGENTS.md"] != "full" and agents.strip():
        assert states[PROGRESS] == states["PRD.md"] == states["FEEDBACK.md"] == "gone"
    if states[PROGRESS] == "cut":
        assert progress.strip().endswith(found[PROGRESS])  # the newest part stays
    for name, original in (("PRD.md", prd), ("FEEDBACK.md", feedback), ("AGENTS.md", agents)):
        if states[name] == "cut" and "truncated" not in prompt:
            assert original.strip().startswith(found[name])  # the beginning stays


# -- what went wrong last time, and the session notes: bounded ---------------------------------


def test_the_last_attempts_notes_take_at_most_a_quarter_of_the_budget() -> None:
    """Whole notes, most useful first, as many as fit in a quarter of the budget: the anchor
    stays whole and the memory keeps room."""
    notes = ["Ralph did not verify it: gate 'pytest' exited with 1.",
             "The gate `pytest` exited with 1. The end of its output:\n" + "e" * 3000,
             "Your last message was: short"]
    prompt = build_prompt(TEMPLATE, task(), branch="main", git_status="", memory=memory(),
                          budget=2000, progress_tail=BIG, notes=notes)
    assert len(prompt) <= 2000
    assert "truncated to fit the prompt budget" not in prompt
    assert "- Ralph did not verify it: gate 'pytest' exited with 1." in prompt
    assert "e" * 100 not in prompt  # the long note did not fit: nor any after it
    assert "Your last message was" not in prompt
    assert "Work on this task only." in prompt
    assert MEMORY_MARK in prompt  # room was left for the memory


def note(i: int, text: str, kind: str = "learning") -> Note:
    return Note(id=f"{i:025d}", seq=i, ts="2026-01-02T03:04:05.000Z", session="s", type=kind,
                iteration=i, text=text)


def test_a_newest_note_longer_than_the_budget_is_shown_cut() -> None:
    notes = [note(1, "older one"), note(2, "older two"), note(3, "newest " + "n" * 2000)]
    section = notes_section(notes, budget=600, add_command="ralph notes add")
    assert len(section) <= 600
    shown = [line for line in section.splitlines() if line.startswith("- [")]
    assert len(shown) == 1
    assert shown[0].startswith("- [learning, iteration 3] newest nnn")
    assert shown[0].endswith("…")
    assert "- (2 older notes not shown)" in section
    assert section.endswith("(types: completed, in_progress, blocked, remaining, learning, "
                            "decision).")


def test_the_notes_section_never_exceeds_its_budget() -> None:
    """With the line counting the notes left out, for any budget that holds the heading and
    the how-to."""
    how = notes_section([], budget=BIG, add_command="ralph notes add").splitlines()[-1]
    floor = len(how) + len(NOTES_HEADING) + 4 + 40
    for count in (1, 3, 40, 150):
        for width in (1, 17, 60, 333):
            notes = [note(i, f"{i} " + "w" * width) for i in range(count)]
            for budget in range(floor, floor + 1500, 23):
                section = notes_section(notes, budget=budget, add_command="ralph notes add")
                assert len(section) <= budget, (count, width, budget)
                listed = [line for line in section.splitlines() if line.startswith("- [")]
                left_out = re.search(r"- \((\d+) older notes? not shown\)", section)
                assert len(listed) + (int(left_out[1]) if left_out else 0) == count


def test_the_end_of_progress_read_from_the_files_end_is_what_the_whole_would_give(
        tmp_path: Path) -> None:
    rng = random.Random(3)
    path = tmp_path / "progress.md"
    for _ in range(400):
        alphabet = rng.choice(["ab é€🙂", "🙂", "a ", " 🙂\t"])
        lines = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
                 for _ in range(rng.randint(0, 60))]
        text = "\n".join(lines) + rng.choice(["", "\n"])
        path.write_text(text, encoding="utf-8")
        limit = rng.randint(0, 300)
        assert _tail_lines(_read_tail(path, limit).strip(), limit) == _tail_lines(
            text.strip(), limit)


def test_blank_lines_at_the_end_of_progress_do_not_hide_its_last_entries(tmp_path: Path) -> None:
    path = tmp_path / "progress.md"
    for end in ("\n" * 500, " " * 600 + "\n", "\n \n" * 300):
        text = "- old entry\n" * 50 + "- the newest entry\n" + end
        path.write_text(text)
        shown = _tail_lines(_read_tail(path, 100).strip(), 100)
        assert shown == _tail_lines(text.strip(), 100)
        assert shown.endswith("- the newest entry")

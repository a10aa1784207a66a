"""ralph.sessions.native: the CLIs' own conversations, from files shaped as the pinned CLIs
write them (the e2e test checks the real ones: tests/agents/test_e2e.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ralph.sessions.native import native_conversations, split_native_id


def write_lines(path: Path, entries: list[object], extra: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in entries) + extra)


def claude_entry(kind: str, content: object, ts: str, **more: object) -> dict[str, object]:
    return {"type": kind, "timestamp": ts, "sessionId": "x",
            "message": {"role": kind, "content": content}, **more}


def test_claude_and_codex_conversations_of_this_directory_newest_first(tmp_path: Path) -> None:
    project = tmp_path / "my.proj"
    env = {"HOME": str(tmp_path / "home")}
    claude = tmp_path / "home" / ".claude" / "projects" / re_name(project)
    write_lines(claude / "c1.jsonl", [
        {"type": "queue-operation"},
        claude_entry("user", "Fix   the\nbug", "2026-11-01T10:00:00Z"),
        claude_entry("user", "<system-reminder>x</system-reminder>", "2026-11-01T10:00:01Z"),
        claude_entry("user", "meta", "2026-11-01T10:00:01Z", isMeta=True),
        claude_entry("assistant", [{"type": "text", "text": "Done"}], "2026-11-01T10:00:02Z"),
        claude_entry("user", [{"type": "tool_result", "content": "ok"}], "2026-11-01T10:00:03Z"),
    ], extra="not json\n")
    codex = tmp_path / "home" / ".codex" / "sessions" / "2026" / "11" / "02"
    meta = {"type": "session_meta", "payload": {"id": "k1", "cwd": str(project)}}

    def item(role: str, text: str, ts: str) -> dict[str, object]:
        kind = "input_text" if role == "user" else "output_text"
        return {"type": "response_item", "timestamp": ts,
                "payload": {"type": "message", "role": role,
                            "content": [{"type": kind, "text": text}]}}

    write_lines(codex / "rollout-a-k1.jsonl", [
        meta, item("developer", "rules", "2026-11-02T09:00:00Z"),
        item("user", "# AGENTS.md instructions for here", "2026-11-02T09:00:00Z"),
        item("user", "<environment_context>", "2026-11-02T09:00:00Z"),
        item("user", "Add tests", "2026-11-02T09:00:01Z"),
        item("assistant", "Added", "2026-11-02T09:00:05Z")])
    write_lines(codex / "rollout-b-k2.jsonl", [
        {"type": "session_meta", "payload": {"id": "k2", "cwd": "/elsewhere"}},
        item("user", "Other project", "2026-11-02T09:30:00Z")])
    found = native_conversations(project, env)
    assert [(c.id, c.summary, c.messages, c.first_at, c.last_at) for c in found] == [
        ("codex:k1", "Add tests", 2, "2026-11-02T09:00:01Z", "2026-11-02T09:00:05Z"),
        ("claude:c1", "Fix the bug", 2, "2026-11-01T10:00:00Z", "2026-11-01T10:00:02Z")]
    assert native_conversations(tmp_path / "nothing", env) == []


def test_the_cli_homes_follow_their_variables(tmp_path: Path) -> None:
    project = tmp_path / "p"
    write_lines(tmp_path / "cfg" / "projects" / re_name(project) / "c2.jsonl",
                [claude_entry("user", "hello", "2026-11-03T00:00:00Z")])
    env = {"HOME": str(tmp_path / "nohome"), "CLAUDE_CONFIG_DIR": str(tmp_path / "cfg")}
    assert [c.id for c in native_conversations(project, env)] == ["claude:c2"]


def test_native_ids() -> None:
    assert split_native_id("claude:abc") == ("claude", "abc")
    assert split_native_id("codex:01-2") == ("codex", "01-2")
    for other in ("ses_x", "claude:", "gemini:1", "nothing"):
        assert split_native_id(other) is None


def re_name(path: Path) -> str:
    return "".join(ch if ch.isascii() and ch.isalnum() else "-" for ch in str(path))


def test_odd_files_and_entries_are_passed_over(tmp_path: Path) -> None:
    project = tmp_path / "p"
    folder = tmp_path / "home" / ".claude" / "projects" / re_name(project)
    write_lines(folder / "odd.jsonl", [
        {"type": "user", "message": "a string, not an object", "timestamp": "t1"},
        {"type": "user", "message": None},
        {"type": "assistant", "message": {"content": 42}},
        claude_entry("user", "The real one", "2026-11-04T00:00:00Z")])
    os.mkfifo(folder / "fifo.jsonl")  # would block a plain read forever
    (folder / "dir.jsonl").mkdir()
    env = {"HOME": str(tmp_path / "home")}
    [found] = native_conversations(project, env)
    assert (found.id, found.summary, found.messages) == ("claude:odd", "The real one", 1)


def test_ids_that_could_pass_for_options_are_refused() -> None:
    for bad in ("claude:--dangerously-skip-permissions", "codex:-x", "claude:a b",
                "claude:" + "a" * 201):
        assert split_native_id(bad) is None

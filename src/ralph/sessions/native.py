"""The agent CLIs' own past conversations for a project, read from their files (never
written): Claude Code's under `$CLAUDE_CONFIG_DIR` (default `~/.claude`)
`/projects/<the directory's path, every character but letters and digits as ->/<id>.jsonl`,
and Codex CLI's under `$CODEX_HOME` (default `~/.codex`) `/sessions/YYYY/MM/DD/rollout-*.jsonl`
whose first line (`session_meta`) names the directory. Gemini CLI and opencode keep theirs
in forms not read here.

Each is listed with an id `<adapter>:<conversation id>`, which `SessionService.launch`
accepts as `continue_from`: the CLI resumes it.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

NATIVE_ADAPTERS = ("claude", "codex")
SUMMARY_CHARS = 200
MAX_FILE_BYTES = 64 * 1024 * 1024  # of a conversation file, no more is read
# A conversation id as the CLIs make them (UUIDs, opencode's `ses_...`): never an option.
_CONVERSATION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


@dataclass
class NativeConversation:
    """One conversation an agent CLI keeps on disk."""

    id: str  # "<adapter>:<conversation id>"
    adapter: str
    conversation_id: str
    summary: str  # its first user message, shortened
    messages: int  # user and assistant messages
    first_at: str | None
    last_at: str | None
    path: str


def native_conversations(cwd: Path, env: Mapping[str, str] | None = None
                         ) -> list[NativeConversation]:
    """The conversations Claude Code and Codex CLI keep for `cwd`, newest first."""
    env = os.environ if env is None else env
    found = [*_claude(cwd, env), *_codex(cwd, env)]
    found.sort(key=lambda c: c.last_at or "", reverse=True)
    return found


def split_native_id(reference: str) -> tuple[str, str] | None:
    """(adapter, conversation id) of `claude:<id>` or `codex:<id>`; None for anything else
    (an id that could pass for an option, `claude:--x`, included)."""
    adapter, _, conversation = reference.partition(":")
    if adapter in NATIVE_ADAPTERS and valid_conversation_id(conversation):
        return adapter, conversation
    return None


def valid_conversation_id(conversation: str) -> bool:
    """Letters, digits, `.`, `_` and `-`, not first: safe as an argument of the CLI."""
    return _CONVERSATION_ID.fullmatch(conversation) is not None


def _home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or Path.home())


def _claude(cwd: Path, env: Mapping[str, str]) -> Iterator[NativeConversation]:
    root = Path(env.get("CLAUDE_CONFIG_DIR") or _home(env) / ".claude")
    folder = root / "projects" / re.sub(r"[^A-Za-z0-9]", "-", str(cwd))
    try:
        files = sorted(folder.glob("*.jsonl"))
    except OSError:
        return
    for path in files:
        summary, count, first, last = "", 0, None, None
        for entry in _lines(path):
            message = claude_message(entry)
            if message is None:
                continue
            count += 1
            first = first or message.at
            last = message.at or last
            if message.role == "user" and not summary:
                summary = message.text
        if count:
            yield NativeConversation(f"claude:{path.stem}", "claude", path.stem,
                                     _short(summary), count, first, last, str(path))


def _codex(cwd: Path, env: Mapping[str, str]) -> Iterator[NativeConversation]:
    root = Path(env.get("CODEX_HOME") or _home(env) / ".codex") / "sessions"
    try:
        files = sorted(root.glob("*/*/*/rollout-*.jsonl"))
    except OSError:
        return
    for path in files:
        entries = _lines(path)
        meta = next(entries, None)
        payload = meta.get("payload") if meta else None
        if not isinstance(payload, dict) or payload.get("cwd") != str(cwd):
            continue
        conversation = str(payload.get("id") or "")
        summary, count, first, last = "", 0, None, None
        for entry in entries:
            message = codex_message(entry)
            if message is None:
                continue
            count += 1
            first = first or message.at
            last = message.at or last
            if message.role == "user" and not summary:
                summary = message.text
        if conversation and count:
            yield NativeConversation(f"codex:{conversation}", "codex", conversation,
                                     _short(summary), count, first, last, str(path))


@dataclass(frozen=True)
class NativeMessage:
    """A user's or the assistant's message in a CLI's conversation file."""

    role: str  # user | assistant
    text: str
    at: str | None  # its timestamp, as the CLI wrote it


def claude_message(entry: dict[str, Any]) -> NativeMessage | None:
    """The message a line of Claude Code's conversation file is, if it is one a person
    wrote or read (not a tool result, a command's output, a reminder Claude adds)."""
    kind = entry.get("type")
    if kind not in ("user", "assistant") or entry.get("isMeta"):
        return None
    message = entry.get("message")
    if not isinstance(message, dict) or not isinstance(message.get("content"), (str, list)):
        return None  # not a message as Claude Code writes them
    text = _text(message["content"])
    if kind == "user" and (not text or text.startswith("<")):
        return None  # (an assistant's message of tool calls only counts, without text)
    return NativeMessage(str(kind), text, _stamp(entry))


def codex_message(entry: dict[str, Any]) -> NativeMessage | None:
    """The message a line of Codex CLI's conversation file is (not the context Codex adds
    as user messages)."""
    item = entry.get("payload")
    if entry.get("type") != "response_item" or not isinstance(item, dict) or \
            item.get("type") != "message" or item.get("role") not in ("user", "assistant"):
        return None
    text = _text(item.get("content"))
    if item.get("role") == "user" and (text.startswith(("<", "# AGENTS.md")) or not text):
        return None
    return NativeMessage(str(item["role"]), text, _stamp(entry))


class TranscriptTail:
    """The messages of a CLI's conversation file, then those appended to it: each `read()`
    returns the complete lines' messages since the last one (at most MAX_READ bytes at a
    time; a line being written is left for the next read)."""

    MAX_READ = 4 * 1024 * 1024

    def __init__(self, conversation: NativeConversation) -> None:
        self.path = Path(conversation.path)
        self.parse = claude_message if conversation.adapter == "claude" else codex_message
        self.offset = 0

    def read(self) -> list[NativeMessage]:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            return []
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return []
            if info.st_size < self.offset:
                self.offset = 0  # rewritten
            data = os.pread(fd, self.MAX_READ, self.offset)
        except OSError:
            return []
        finally:
            os.close(fd)
        end = data.rfind(b"\n") + 1
        if end == 0 and len(data) < self.MAX_READ:
            return []
        end = end or len(data)
        self.offset += end
        found = []
        for line in data[:end].splitlines():
            try:
                entry = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            message = self.parse(entry) if isinstance(entry, dict) else None
            if message is not None and message.text:
                found.append(message)
        return found


def _stamp(entry: dict[str, Any]) -> str | None:
    stamp = entry.get("timestamp")
    return stamp if isinstance(stamp, str) else None


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    """The JSON objects of a regular JSON-lines file, up to MAX_FILE_BYTES of it; lines
    that are not objects are skipped. Anything else (a FIFO, a device) reads as empty."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return
        with os.fdopen(fd, "rb", closefd=False) as handle:
            left = MAX_FILE_BYTES
            for line in handle:
                left -= len(line)
                if left < 0:
                    return
                try:
                    entry = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(entry, dict):
                    yield entry
    except OSError:
        return
    finally:
        os.close(fd)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content
                         if isinstance(part, dict) and part.get("type") in (
                             "text", "input_text", "output_text")).strip()
    return ""


def _short(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= SUMMARY_CHARS else line[:SUMMARY_CHARS - 1] + "…"

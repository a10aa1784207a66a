"""Turning a scenario's `write_file` / `shell` reply into a call of a tool the client offered.

The table below is what the pinned CLIs offer (read from their real requests, see
tests/agents/recorded/README.md). A file-writing tool is preferred for `write_file`; without
one the file is written through a shell tool. Required arguments the table does not fill
get a harmless value of their declared type, so that the client's argument validation passes.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from ralph.testing.fakellm.common import RequestView, ToolCall, ToolSpec, new_id


@dataclass(frozen=True)
class WriteTool:
    """A file-writing tool: which argument takes the path, which the content."""

    path_arg: str
    content_arg: str
    absolute: bool  # the tool insists on an absolute path
    patch: bool = False  # a free-form (custom) tool taking an apply_patch "Add File" patch


@dataclass(frozen=True)
class ShellTool:
    """A shell tool: which argument takes the command, as a string or as an argv list."""

    command_arg: str
    argv: bool = False
    extra: tuple[tuple[str, Any], ...] = ()


# tool name -> how to call it, in order of preference.
WRITE_TOOLS: dict[str, WriteTool] = {
    "Write": WriteTool("file_path", "content", absolute=True),  # claude
    "write_file": WriteTool("file_path", "content", absolute=False),  # gemini
    "write": WriteTool("filePath", "content", absolute=True),  # opencode
    # codex, with a model it knows (e.g. gpt-5.5): a custom tool whose input is a patch. The
    # patch format ends every line with a newline, so "hello" is written as "hello\n".
    "apply_patch": WriteTool("", "", absolute=False, patch=True),
}
SHELL_TOOLS: dict[str, ShellTool] = {
    "exec_command": ShellTool("cmd"),  # codex
    "shell_command": ShellTool("command"),  # codex (other tool configurations)
    "shell": ShellTool("command", argv=True),  # codex (older tool configurations)
    "Bash": ShellTool("command", extra=(("description", "Run a command"),)),  # claude
    "run_shell_command": ShellTool("command", extra=(("description", "Run a command"),)),
    "bash": ShellTool("command", extra=(("description", "Run a command"),)),  # opencode
}

# Where each client states its working directory (needed for tools that take absolute paths).
_CWD_PATTERNS = (
    re.compile(r"<cwd>([^<\n]+)</cwd>"),  # codex's environment context
    re.compile(r"Primary working directory: (/[^\n]*)"),  # claude
    re.compile(r"[Ww]orking directory: (/[^\n]*)"),  # claude, opencode
    re.compile(r"currently working in the directory: (/[^\n]*)"),  # gemini
    re.compile(r"<directory>(/[^<\n]*)</directory>"),
)


def find_cwd(view: RequestView) -> str | None:
    for pattern in _CWD_PATTERNS:
        match = pattern.search(view.context_text)
        if match:
            return match.group(1).strip().rstrip(".")
    return None


def write_tool_for(view: RequestView) -> ToolSpec | None:
    for name in WRITE_TOOLS:
        spec = view.tool(name)
        if spec is not None:
            return spec
    return None


def shell_tool_for(view: RequestView) -> ToolSpec | None:
    for name in SHELL_TOOLS:
        spec = view.tool(name)
        if spec is not None and spec.kind == "function":
            return spec
    return None


def can_call(view: RequestView, *, write: bool) -> bool:
    """Whether a `write_file` (write=True) or `shell` reply can be made in this request."""
    return (write and write_tool_for(view) is not None) or shell_tool_for(view) is not None


def _placeholder(schema: Any, name: str) -> Any:
    kind = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if isinstance(schema, dict) and schema.get("enum"):
        return schema["enum"][0]
    if kind in ("integer", "number"):
        return 10000 if "timeout" in name.lower() or "ms" in name.lower() else 1
    if kind == "boolean":
        return False
    if kind == "array":
        return []
    if kind == "object":
        return {}
    return f"fake model: {name}"


def _complete(spec: ToolSpec, arguments: dict[str, Any]) -> dict[str, Any]:
    """Fill required arguments the mapping left out, by their declared type."""
    properties = spec.schema.get("properties") or {}
    for name in spec.schema.get("required") or []:
        if name not in arguments:
            arguments[name] = _placeholder(properties.get(name), name)
    return arguments


def _shell_call(spec: ToolSpec, command: str) -> ToolCall:
    how = SHELL_TOOLS[spec.name]
    arguments: dict[str, Any] = {
        how.command_arg: ["bash", "-lc", command] if how.argv else command
    }
    properties = spec.schema.get("properties") or {}
    for key, value in how.extra:
        if key in properties:
            arguments[key] = value
    return ToolCall(new_id("call_"), spec.name, _complete(spec, arguments))


def write_file_call(view: RequestView, path: str, content: str) -> ToolCall | None:
    spec = write_tool_for(view)
    if spec is not None and WRITE_TOOLS[spec.name].patch:
        patch = apply_patch_add(path, content)
        if spec.kind == "custom":
            return ToolCall(new_id("call_"), spec.name, {"input": patch}, kind="custom",
                            raw_input=patch)
        return ToolCall(new_id("call_"), spec.name, _complete(spec, {"input": patch}))
    if spec is not None:
        how = WRITE_TOOLS[spec.name]
        target = path
        cwd = find_cwd(view)
        if how.absolute and not PurePosixPath(path).is_absolute() and cwd:
            target = str(PurePosixPath(cwd) / path)
        arguments = {how.path_arg: target, how.content_arg: content}
        return ToolCall(new_id("call_"), spec.name, _complete(spec, arguments))
    shell = shell_tool_for(view)
    if shell is None:
        return None
    quoted = shlex.quote(path)
    parent = str(PurePosixPath(path).parent)
    mkdir = f"mkdir -p {shlex.quote(parent)} && " if parent not in (".", "/") else ""
    return _shell_call(shell, f"{mkdir}printf '%s' {shlex.quote(content)} > {quoted}")


def apply_patch_add(path: str, content: str) -> str:
    """An apply_patch patch that creates `path` with `content` (lines get a final newline)."""
    lines = content.splitlines() or [""]
    body = "".join(f"+{line}\n" for line in lines)
    return f"*** Begin Patch\n*** Add File: {path}\n{body}*** End Patch\n"


def shell_call(view: RequestView, command: str) -> ToolCall | None:
    spec = shell_tool_for(view)
    return _shell_call(spec, command) if spec is not None else None


def raw_call(view: RequestView, name: str, arguments: dict[str, Any]) -> ToolCall:
    spec = view.tool(name)
    if spec is not None and spec.kind == "custom":
        raw = arguments.get("input")
        return ToolCall(new_id("call_"), name, arguments, kind="custom",
                        raw_input=raw if isinstance(raw, str) else None)
    return ToolCall(new_id("call_"), name, dict(arguments))

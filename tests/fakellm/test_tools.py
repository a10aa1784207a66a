"""The tool mapping: which offered tool a write_file/shell reply becomes, with which arguments."""

from __future__ import annotations

from ralph.testing.fakellm import tools
from ralph.testing.fakellm.common import RequestView, ToolSpec


def _view(*specs: ToolSpec, context: str = "") -> RequestView:
    return RequestView(protocol="responses", tools=specs, context_text=context)


def test_codex_shell_variants():
    argv = tools.shell_call(_view(ToolSpec("shell", {"properties": {"command": {}}})), "ls")
    assert argv is not None and argv.arguments == {"command": ["bash", "-lc", "ls"]}
    string = tools.shell_call(_view(ToolSpec("shell_command", {})), "ls")
    assert string is not None and string.arguments == {"command": "ls"}


def test_required_arguments_get_typed_placeholders():
    schema = {
        "properties": {"command": {"type": "string"}, "description": {"type": "string"},
                       "timeout": {"type": "number"}, "background": {"type": "boolean"},
                       "mode": {"type": "string", "enum": ["fast", "slow"]},
                       "dirs": {"type": "array"}, "opts": {"type": ["object", "null"]},
                       "title": {"type": "string"}},
        "required": ["command", "description", "timeout", "background", "mode", "dirs", "opts",
                     "title"],
    }
    call = tools.shell_call(_view(ToolSpec("bash", schema)), "ls")
    assert call is not None
    assert call.arguments == {"command": "ls", "description": "Run a command", "timeout": 10000,
                              "background": False, "mode": "fast", "dirs": [], "opts": {},
                              "title": "fake model: title"}


def test_write_through_a_shell_creates_the_directory_and_quotes():
    call = tools.write_file_call(_view(ToolSpec("exec_command", {})), "a dir/f.txt", "it's")
    assert call is not None
    assert call.arguments == {"cmd": "mkdir -p 'a dir' && printf '%s' 'it'\"'\"'s' > 'a dir/f.txt'"}


def test_no_suitable_tool():
    view = _view(ToolSpec("view_image", {}))
    assert tools.write_file_call(view, "x", "y") is None
    assert tools.shell_call(view, "ls") is None
    assert not tools.can_call(view, write=True)


def test_file_tool_preferred_over_shell_and_custom_shell_ignored():
    view = _view(ToolSpec("exec_command", {}), ToolSpec("apply_patch", {}, kind="custom"))
    call = tools.write_file_call(view, "x.txt", "")
    assert call is not None and call.kind == "custom"
    assert call.raw_input == "*** Begin Patch\n*** Add File: x.txt\n+\n*** End Patch\n"
    custom_shell = _view(ToolSpec("exec_command", {}, kind="custom"))
    assert tools.shell_call(custom_shell, "ls") is None


def test_find_cwd_in_each_clients_wording():
    assert tools.find_cwd(_view(context="<cwd>/a/b</cwd>")) == "/a/b"
    assert tools.find_cwd(_view(context=" - Primary working directory: /c\n")) == "/c"
    assert tools.find_cwd(_view(context="  Working directory: /d\n")) == "/d"
    assert tools.find_cwd(_view(context="nothing here")) is None

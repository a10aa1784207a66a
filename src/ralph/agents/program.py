"""Can an agent's program start at all? Found, executable, and (on Linux) a format the kernel
runs. Checked before every run (`resolve_program`) and by `ralph doctor`, with one message
each: a program that cannot start fails every attempt the same way, so it is said up front.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

_HEAD_BYTES = 256  # enough for a #! line and for the binfmt_misc magics at small offsets
_BINFMT = Path("/proc/sys/fs/binfmt_misc")


@dataclass(frozen=True)
class ProgramCheck:
    """Where a program is (None: not found) and why it cannot start (None: it can)."""

    path: str | None
    problem: str | None


def check_program(program: str, install_hint: str | None = None) -> ProgramCheck:
    """Find `program` (a path, or a name on PATH) and tell whether it can start. The problem,
    if any, is one phrase naming the path and the fix; `install_hint` is how to install a
    program that is not there."""
    if "/" in program:
        if not os.path.lexists(program):
            return ProgramCheck(None, f"{program} does not exist")
        return ProgramCheck(program, exec_problem(program))
    path = shutil.which(program)
    if path is not None:
        return ProgramCheck(path, exec_problem(path))
    # shutil.which skips a file that is not executable: name it rather than say "not found"
    present = shutil.which(program, mode=os.F_OK)
    if present is not None:
        return ProgramCheck(present, exec_problem(present))
    how = f"; install it with `{install_hint}`" if install_hint else ""
    return ProgramCheck(None, f"{program} not found on PATH{how}")


def exec_problem(path: str) -> str | None:
    """Why the kernel would refuse to execute `path`, with the fix (None: it would run it)."""
    file = Path(path)
    if file.is_dir():
        return f"{path} is a directory, not a program: name the program itself in argv"
    if not file.exists():
        return f"{path} is a broken symbolic link"
    if not os.access(path, os.X_OK):
        return f"{path} is not executable: run `chmod +x {path}`"
    if not sys.platform.startswith("linux"):
        return None  # the formats other kernels run are not checked
    try:
        with file.open("rb") as stream:
            head = stream.read(_HEAD_BYTES)
    except OSError:
        return None  # executable but unreadable: only the kernel can tell
    if head.startswith(b"\x7fELF"):
        return None
    if head.startswith(b"#!"):
        return _interpreter_problem(path, head)
    if _binfmt_runs(path, head):
        return None
    return (f"{path} cannot be executed (exec format error): it has no #! line and is not a "
            "Linux binary; start it with a #! line such as `#!/bin/sh`, or name its "
            "interpreter in argv")


def _interpreter_problem(path: str, head: bytes) -> str | None:
    """A #! line whose interpreter is missing fails as if the script were (ENOENT)."""
    line = head[2:].split(b"\n", 1)[0]
    words = line.decode("utf-8", "replace").strip(" \t").split()
    interpreter = words[0] if words else ""
    if line.endswith(b"\r"):
        return (f"{path} has Windows line endings: its #! line names `{interpreter}\\r`; "
                f"convert it, e.g. `sed -i 's/\\r$//' {path}`")
    if not interpreter:
        return f"{path} has an empty #! line: name its interpreter, e.g. `#!/bin/sh`"
    if not os.access(interpreter, os.X_OK) or Path(interpreter).is_dir():
        return (f"{path} names a missing interpreter in its #! line: {interpreter}; install "
                "it or fix the #! line")
    return None


def _binfmt_runs(path: str, head: bytes) -> bool:
    """Whether a binfmt_misc handler (WSL's Windows .exe, qemu for other machines) takes the
    file, as the kernel matches them: by magic bytes under a mask, or by extension."""
    try:
        if (_BINFMT / "status").read_text().strip() != "enabled":
            return False
        entries = [e for e in _BINFMT.iterdir() if e.name not in ("status", "register")]
    except OSError:
        return False
    for entry in entries:
        try:
            text = entry.read_text()
        except OSError:
            continue
        if text.startswith("enabled") and _binfmt_matches(text, path, head):
            return True
    return False


def _binfmt_matches(text: str, path: str, head: bytes) -> bool:
    rule = dict(line.split(" ", 1) for line in text.splitlines() if " " in line)
    if "extension" in rule:
        return path.endswith("." + rule["extension"].strip().lstrip("."))
    try:
        magic = bytes.fromhex(rule.get("magic", ""))
        mask = bytes.fromhex(rule["mask"]) if "mask" in rule else b"\xff" * len(magic)
        offset = int(rule.get("offset", "0"))
    except ValueError:
        return False
    window = head[offset:offset + len(magic)]
    return bool(magic) and len(window) == len(magic) and all(
        byte & m == want & m for byte, m, want in zip(window, mask, magic, strict=False))

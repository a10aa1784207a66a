"""Did the agent change anything? A fingerprint of the working tree, streamed through a hash
so that its cost in memory does not grow with the size of the change."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

from ralph.proc import run_process

_GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}


async def fingerprint(root: Path, exclude: Sequence[str]) -> str:
    """A hash of HEAD, the diff against it, and the untracked files (name, size, mtime),
    leaving out the excluded path prefixes (Ralph's own runtime files)."""
    digest = hashlib.sha256()
    pathspec = [".", *[f":(exclude){p}" for p in exclude]]

    def feed(_stream: str, chunk: bytes) -> None:
        digest.update(chunk)

    for argv in (["git", "rev-parse", "--verify", "-q", "HEAD"],
                 ["git", "diff", "HEAD", "--binary", "--", *pathspec],
                 ["git", "status", "--porcelain", "-z", "--", *pathspec]):
        await run_process(argv, cwd=root, env=_GIT_ENV, timeout_s=120, on_output=feed,
                          tail_bytes=0)
    untracked = bytearray()

    def collect(stream: str, chunk: bytes) -> None:
        if stream == "stdout":
            untracked.extend(chunk)

    await run_process(["git", "ls-files", "--others", "--exclude-standard", "-z", "--",
                       *pathspec], cwd=root, env=_GIT_ENV, timeout_s=120, on_output=collect,
                      tail_bytes=0)
    for name in bytes(untracked).split(b"\0"):
        if name:
            try:
                st = (root / os.fsdecode(name)).stat()
            except OSError:
                continue
            digest.update(b"%s\0%d\0%d\0" % (name, st.st_size, st.st_mtime_ns))
    return digest.hexdigest()

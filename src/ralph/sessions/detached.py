"""The background process of `ralph agent run --detach`: it owns one session until it ends.

    python -m ralph.sessions.detached ROOT [--agent NAME] [--title TEXT] [--continue ID]
                                       [--approvals MODE]  (the prompt on stdin)

Its first line on stdout is the session's id, or `error: ...` (exit 2) when the session
cannot be launched; then it closes stdout, so the command that started it can return, and
runs the session to its end. Stopped from any process with `ralph agent stop ID`; SIGTERM
stops it too.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from pathlib import Path

from ralph.approvals.rules import APPROVAL_MODES, ApprovalMode
from ralph.config import load_config
from ralph.errors import RalphError
from ralph.sessions.service import SessionService
from ralph.store import Store


async def _own(root: Path, prompt: str, agent: str | None, title: str | None,
               continue_from: str | None, approvals: ApprovalMode) -> int:
    with Store(root / ".ralph" / "store") as store:
        sessions = SessionService(root, load_config(root), store)
        try:
            session_id = await sessions.launch(prompt, agent, title=title,
                                               continue_from=continue_from,
                                               approvals=approvals)
        except RalphError as exc:
            _say(f"error: {exc}")
            return 2
        _say(session_id)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        waiting = asyncio.ensure_future(sessions.wait(session_id))
        stopping = asyncio.ensure_future(stop.wait())
        await asyncio.wait([waiting, stopping], return_when=asyncio.FIRST_COMPLETED)
        if not waiting.done():
            await sessions.stop(session_id, by="SIGTERM")
        stopping.cancel()
        info = await waiting
        return 0 if info.status == "completed" else 1


def _say(line: str) -> None:
    """The one line the starting command reads; stdout is closed after it (nothing else
    reads it, and a write to it later must not fail)."""
    try:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
    except OSError:  # the command that started it is gone (Ctrl-C): the session goes on
        pass
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ralph.sessions.detached")
    parser.add_argument("root", type=Path)
    parser.add_argument("--agent")
    parser.add_argument("--title")
    parser.add_argument("--continue", dest="continue_from")
    parser.add_argument("--approvals", choices=APPROVAL_MODES, default="auto")
    args = parser.parse_args(argv)
    prompt = sys.stdin.read()
    try:
        return asyncio.run(_own(args.root, prompt, args.agent, args.title,
                                args.continue_from, args.approvals))
    except RalphError as exc:  # ralph.toml, the store
        _say(f"error: {exc}")
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""The connection JSON a phone scans, and `ralph serve` drawing it as a QR code in a
terminal (and only there: not in a log)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect  # type: ignore[import-untyped]  # (no types-pexpect in the dev deps)
import segno

from ralph.remote.pairing import connection_info, qr_text, reachable_host
from tests.cli.helpers import TIMEOUT, run_ralph
from tests.remote.test_serve import TOKEN, start, wait_served

RALPH_BIN = str(Path(sys.executable).with_name("ralph"))


def test_the_connection_json_has_the_documents_fields_and_the_token() -> None:
    info = connection_info("ws://10.0.0.2:8766/ws", "http://10.0.0.2:8766", "proj", TOKEN,
                           session="abc")
    assert info == {"ws": "ws://10.0.0.2:8766/ws", "http": "http://10.0.0.2:8766",
                    "session": "abc", "repo": "proj", "token": TOKEN}
    assert "token" not in connection_info("ws://x/ws", "http://x", "p", None)
    assert reachable_host("127.0.0.1") == "127.0.0.1"
    assert reachable_host("0.0.0.0") not in ("0.0.0.0", "")


def test_the_qr_code_is_the_json_drawn_with_blocks() -> None:
    data = json.dumps({"ws": "ws://127.0.0.1:8766/ws", "repo": "proj"})
    text = qr_text(data)
    rows = text.rstrip("\n").split("\n")
    # two modules a character row, a quiet zone of 2 around: as wide as the symbol + 4
    width = segno.make(data, error="l", micro=False).symbol_size(border=2)[0]
    assert {len(row) for row in rows} == {width}
    assert len(rows) == (width + 1) // 2
    assert set(text) <= set("█▀▄ \n")


@contextlib.contextmanager
def in_terminal(root: Path, *args: str) -> Iterator[Any]:
    """`ralph serve --token TOKEN ARGS` in a pseudo-terminal; SIGTERM at the end, which it
    must end with 0."""
    child = pexpect.spawn(RALPH_BIN, ["serve", "--port", "0", "--token", TOKEN, *args],
                          cwd=str(root), encoding="utf-8", codec_errors="replace",
                          dimensions=(80, 200), timeout=TIMEOUT,
                          env={**os.environ, "TERM": "xterm-256color"})
    try:
        yield child
        child.kill(signal.SIGTERM)
        child.expect(pexpect.EOF)
    finally:
        if child.isalive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
        child.close(force=True)
    assert child.exitstatus == 0


def test_ralph_serve_shows_the_qr_code_in_a_terminal_only(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / ".ralph").mkdir(parents=True)
    with in_terminal(root) as child:
        child.expect("scan to connect")
        child.expect("█▀▀▀▀▀█|██ ▄▄▄▄▄ █")  # a finder pattern's edge

    proc = start(root, "--token", TOKEN)  # stderr a pipe: no QR code
    wait_served(proc, root)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0 and "scan" not in err and "█" not in err


def test_ralph_serve_draws_the_web_monitors_address_with_qr_web(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / ".ralph").mkdir(parents=True)
    with in_terminal(root, "--qr", "web") as child:
        child.expect(r"web monitor: (http://127\.0\.0\.1:\d+)/\?token=a-test-token\r\n")
        http = child.match.group(1)
        child.expect_exact(f"scan to open the web monitor ({http}/):\r\n")
        # the code a phone's camera reads is the page's address with the token
        drawn = qr_text(f"{http}/?token={TOKEN}").replace("\n", "\r\n")
        child.expect_exact(drawn)


def test_an_unknown_qr_kind_is_refused(tmp_path: Path) -> None:
    result = run_ralph("serve", "--port", "0", "--qr", "phone", cwd=tmp_path)
    assert result.code == 2 and "Traceback" not in result.err
    assert "'phone' is not one of: app" in result.err

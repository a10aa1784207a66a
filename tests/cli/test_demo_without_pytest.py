"""`make demo` installs Ralph without its dev tools: the demo then gates with unittest, and
still runs to completion."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.cli.helpers import TIMEOUT

WITHOUT_PYTEST = ("import sys; sys.modules['pytest'] = None; "
                  "from ralph.cli.main import main; main(sys.argv[1:])")


def test_the_demo_without_pytest(tmp_path: Path) -> None:
    target = tmp_path / "demo"
    done = subprocess.run([sys.executable, "-c", WITHOUT_PYTEST, "demo", "--dir", str(target),
                           "--quiet"], capture_output=True, text=True, timeout=TIMEOUT * 5,
                          stdin=subprocess.DEVNULL, check=False, start_new_session=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"gate: {sys.executable} -m unittest -q" in done.stdout
    assert "complete (all 3 tasks are verified done)" in done.stdout
    gates = (target / "calc" / "ralph.toml").read_text().split("[gates]")[1]
    assert f'commands = ["{sys.executable} -m unittest -q"]' in gates

"""An editor starts the bridge in any folder: `status` answers even without a readable PRD."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bridge.client import BridgeProcess


@pytest.mark.parametrize("prd", [None, "# Notes\n\nNo task list here.\n",
                                 "## Tasks\n\n1. [ ] Numbered\n"])
def test_status_without_a_readable_prd(tmp_path: Path, prd: str | None) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    if prd is not None:
        (folder / "PRD.md").write_text(prd)
    with BridgeProcess(folder) as bridge:
        status = bridge.call("status")
    assert (status["done"], status["total"], status["next"], status["last"]) == (0, 0, None,
                                                                                   None)
    assert status["prd_error"]  # an extension: why the PRD cannot be read

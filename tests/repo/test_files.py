"""ralph.repo.read_file / get_file and confine: text or base64, the 10 MiB bound, regular
files only, and every way out of the repository refused."""

from __future__ import annotations

import asyncio
import base64
import os
import socket
from pathlib import Path

import pytest

from ralph.repo import MAX_FILE_BYTES, FileNotFound, confine, get_file, read_file
from ralph.repo.files import _open_regular
from tests.git.helpers import write


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A project (no git needed to read files) beside a secret outside it."""
    root = tmp_path / "proj"
    write(root, "text.txt", "héllo\n")
    write(root, "dir/inner.txt", "inner\n")
    write(root, ".git/config", "[core]\nsecret = GIT\n")
    write(tmp_path, "outside/secret.txt", "OUTSIDE\n")
    (root / "link_in").symlink_to("text.txt")
    (root / "dir_link").symlink_to("dir")
    (root / "link_out").symlink_to("../outside/secret.txt")
    (root / "dir_out").symlink_to(tmp_path / "outside")
    (root / "git_link").symlink_to(".git")
    (root / "loop").symlink_to("loop")
    (root / "dir" / "up").symlink_to("..")
    return root


def test_text(tree: Path) -> None:
    got = read_file(tree, "text.txt")
    assert (got.path, got.content, got.size, got.truncated, got.encoding) == (
        "text.txt", "héllo\n", 7, False, "utf-8")
    assert read_file(tree, "dir/inner.txt").content == "inner\n"
    write(tree, "empty", "")
    assert read_file(tree, "empty").content == ""


def test_binary_comes_as_base64(tree: Path) -> None:
    for name, data in (("nul.bin", b"abc\0def"), ("latin1.txt", b"caf\xe9\n"),
                       ("png", bytes(range(256)))):
        (tree / name).write_bytes(data)
        got = read_file(tree, name)
        assert got.encoding == "base64" and base64.b64decode(got.content) == data
        assert got.size == len(data) and not got.truncated


def test_at_most_ten_mebibytes(tree: Path) -> None:
    data = b"x" * (MAX_FILE_BYTES + 5)
    (tree / "big.txt").write_bytes(data)
    got = read_file(tree, "big.txt")
    assert got.truncated and got.size == MAX_FILE_BYTES + 5
    assert len(got.content) == MAX_FILE_BYTES and got.encoding == "utf-8"
    exact = tree / "exact.txt"
    exact.write_bytes(b"y" * MAX_FILE_BYTES)
    got = read_file(tree, "exact.txt")
    assert not got.truncated and got.size == MAX_FILE_BYTES


def test_a_character_cut_by_the_bound_is_dropped_not_turned_into_base64(tree: Path) -> None:
    (tree / "accents.txt").write_text("é" * 10)  # 20 bytes
    got = read_file(tree, "accents.txt", max_bytes=7)
    assert got.encoding == "utf-8" and got.content == "ééé" and got.truncated
    assert got.size == 20
    (tree / "bad.bin").write_bytes(b"abc\xff" + b"d" * 10)
    assert read_file(tree, "bad.bin", max_bytes=4).encoding == "base64"


def test_symlinks_inside_are_followed(tree: Path) -> None:
    assert read_file(tree, "link_in").content == "héllo\n"
    assert read_file(tree, "dir_link/inner.txt").content == "inner\n"
    assert read_file(tree, "dir/up/text.txt").content == "héllo\n"
    assert read_file(tree, "dir/../text.txt").content == "héllo\n"
    assert read_file(tree, "./text.txt").content == "héllo\n"


@pytest.mark.parametrize("path", [
    "", "missing.txt", "dir", ".", "dir/", "text.txt/x", "../outside/secret.txt",
    "dir/../../outside/secret.txt", "link_out", "dir_out/secret.txt", "dir/up/../x",
    "dir/up/up/outside/secret.txt", ".git/config", "./.git/config", "dir/../.git/config",
    ".GIT/config", ".Git", "git_link/config", "git_link", "loop", "loop/x", "a\0b",
    "/etc/passwd", "//etc/passwd", "text.txt\0", "x" * 5000, "dir/" * 2000 + "inner.txt",
    "dir/.git/x",
])
def test_refused(tree: Path, path: str) -> None:
    with pytest.raises(FileNotFound) as caught:
        read_file(tree, path)
    assert caught.value.path == path


def test_a_fifo_or_a_socket_is_never_opened(tree: Path) -> None:
    """Nothing but a regular file is opened (a FIFO would block; the same S_ISREG check
    refuses a device, which only root could create here)."""
    os.mkfifo(tree / "pipe")
    (tree / "pipe_link").symlink_to("pipe")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(tree / "sock"))
        for path in ("pipe", "pipe_link", "sock"):
            with pytest.raises(FileNotFound, match="not a regular file"):
                read_file(tree, path)
    finally:
        listener.close()


def test_a_symlink_swapped_in_after_the_check_is_refused(tree: Path, tmp_path: Path) -> None:
    # as if "dir" had been replaced by a symlink between confine() and the opening
    relative = confine(tree, "dir/inner.txt")
    (tree / "dir").rename(tree / "dir.old")
    (tree / "dir").symlink_to(tmp_path / "outside")
    (tmp_path / "outside" / "inner.txt").write_text("OUTSIDE\n")
    with pytest.raises(FileNotFound, match="symlink"):
        _open_regular(os.path.realpath(tree), relative, "dir/inner.txt")
    # ... and the last component too
    (tree / "dir").unlink()
    (tree / "dir.old").rename(tree / "dir")
    (tree / "dir" / "inner.txt").unlink()
    (tree / "dir" / "inner.txt").symlink_to(tmp_path / "outside" / "inner.txt")
    with pytest.raises(FileNotFound):
        _open_regular(os.path.realpath(tree), relative, "dir/inner.txt")


def test_confine_answers_the_resolved_relative_path(tree: Path) -> None:
    assert confine(tree, "dir_link/inner.txt") == "dir/inner.txt"
    assert confine(tree, "dir/./../text.txt") == "text.txt"
    assert confine(tree, ".") == ""
    assert confine(tree, "not/there/yet") == "not/there/yet"


def test_the_root_may_be_reached_through_a_symlink(tree: Path, tmp_path: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(tree)
    assert read_file(alias, "text.txt").content == "héllo\n"
    with pytest.raises(FileNotFound):
        read_file(alias, "link_out")


async def test_get_file_reads_off_the_event_loop(tree: Path) -> None:
    (tree / "big.bin").write_bytes(b"\0" * (MAX_FILE_BYTES + 1))
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0)
            ticks += 1

    ticker = asyncio.create_task(tick())
    try:
        got = await get_file(tree, "big.bin")
    finally:
        ticker.cancel()
    assert got.truncated and got.encoding == "base64" and ticks > 0

"""Hypothesis: whatever path a client sends, nothing outside the repository nor in `.git/` is
ever read, and every refusal is FileNotFound (the API's -32010). Repositories are built with
symlinks leading in, out, into .git and round in loops; paths are made of `..`, `.`, `.git`
in any case, `/`, names, symlink names and NUL."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ralph.remote.repo_methods import FILE_NOT_FOUND, rpc_error
from ralph.repo import FileNotFound, confine, read_file
from ralph.repo.paths import is_git_name

SECRET = "SECRET"
INSIDE = {"a.txt": "inside a", "d/b.txt": "inside b", "d/e/c.txt": "inside c"}
# name -> target; a target starting with "@" is absolute, under the temporary directory
SYMLINKS = {
    "in_file": "a.txt",
    "in_dir": "d",
    "d/up": "..",
    "d/e/upup": "../..",
    "d/e/out": "../../../outside",
    "out_abs": "@outside",
    "out_abs_file": "@outside/secret.txt",
    "out_file": "../outside/secret.txt",
    "dotdot": "..",
    "back_in": "../repo/d",
    "git": ".git",
    "d/gitcfg": "../.git/config",
    "upper_git": ".GIT",
    "loop": "loop",
    "loop2": "loop3",
    "loop3": "loop2",
    "d/pipe_link": "../pipe",
}
NAMES = sorted({part for path in [*INSIDE, *SYMLINKS] for part in path.split("/")}
               | {"outside", "secret.txt", "repo", "config", "HEAD", "refs", "pipe", "nope",
                  "sub", "x.txt"})
SEGMENTS = st.sampled_from(["..", "..", ".", "", ".git", ".GIT", ".Git", "\0", *NAMES]) | \
    st.text(alphabet="./\0agit", max_size=6)


@contextmanager
def layout(links: list[str]) -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="ralph-fuzz-"))
    try:
        root = base / "repo"
        for relative, text in {**INSIDE, ".git/config": SECRET, ".git/HEAD": SECRET,
                               ".git/refs/heads/main": SECRET, ".GIT/config": SECRET,
                               "d/.git/config": SECRET}.items():
            (root / relative).parent.mkdir(parents=True, exist_ok=True)
            (root / relative).write_text(text)
        for relative in ("outside/secret.txt", "outside/sub/x.txt", "secret.txt"):
            (base / relative).parent.mkdir(parents=True, exist_ok=True)
            (base / relative).write_text(SECRET)
        os.mkfifo(root / "pipe")
        for name in links:
            target = SYMLINKS[name]
            (root / name).symlink_to(base / target[1:] if target.startswith("@") else target)
        yield root
    finally:
        shutil.rmtree(base)


def assert_inside(root: Path, relative: str) -> None:
    base = os.path.realpath(root)
    full = os.path.realpath(os.path.join(base, relative))
    assert full == base or full.startswith(base + "/"), relative
    assert not any(is_git_name(part) for part in full[len(base):].split("/")), relative


@settings(max_examples=400, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(links=st.lists(st.sampled_from(sorted(SYMLINKS)), unique=True),
       segments=st.lists(SEGMENTS, min_size=0, max_size=7),
       absolute=st.booleans())
def test_nothing_outside_nor_in_git_is_ever_read(links: list[str], segments: list[str],
                                                 absolute: bool) -> None:
    path = ("/" if absolute else "") + "/".join(segments)
    with layout(links) as root:
        try:
            relative = confine(root, path)
        except FileNotFound as exc:
            assert exc.path == path
            assert rpc_error(exc).code == FILE_NOT_FOUND
        else:
            assert_inside(root, relative)
        try:
            got = read_file(root, path)
        except FileNotFound as exc:
            assert exc.path == path
            assert rpc_error(exc).code == FILE_NOT_FOUND
        else:
            assert SECRET not in got.content
            assert got.content in INSIDE.values(), (path, got.content)
            assert got.path == path and got.encoding == "utf-8"


@pytest.fixture(scope="module")
def every_link() -> Iterator[Path]:
    with layout(sorted(SYMLINKS)) as root:
        yield root


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.text(max_size=30) | st.lists(SEGMENTS, max_size=8).map("/".join))
def test_any_text_at_all(every_link: Path, path: str) -> None:
    try:
        got = read_file(every_link, path)
    except FileNotFound as exc:
        assert rpc_error(exc).code == FILE_NOT_FOUND
    else:
        assert got.content in INSIDE.values()

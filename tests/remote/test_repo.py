"""`ralph serve`'s repository methods with a real WebSocket client: git/status, git/diff,
file/get, their error codes (-32010 for every path that may not be read, -32011 when git
fails, -32602 for bad params), and their place in the OpenRPC document."""

from __future__ import annotations

import asyncio
import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import websockets

from tests.cli.helpers import TIMEOUT
from tests.git.helpers import git, write
from tests.remote.test_agent import Phone
from tests.remote.test_serve import TOKEN, Served, serving
from tests.repo.helpers import isolate_git, make_repo

MIB = 1024 * 1024


@pytest.fixture(autouse=True)
def _isolated_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_git(tmp_path, monkeypatch)  # the server inherits this environment


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    root = make_repo(tmp_path / "proj")
    write(root, "ralph.toml", "")
    git(root, "add", "ralph.toml")
    git(root, "commit", "-q", "-m", "config")
    with serving(root) as running:
        yield running


def calls(served: Served, *requests: tuple[str, dict[str, Any] | None]) -> list[dict[str, Any]]:
    """Each request's answer, in order (notifications meanwhile skipped)."""

    async def go() -> list[dict[str, Any]]:
        async with websockets.connect(served.ws + f"?token={TOKEN}", max_size=None) as ws:
            answers = []
            for number, (method, params) in enumerate(requests, 1):
                message: dict[str, Any] = {"jsonrpc": "2.0", "id": number, "method": method}
                if params is not None:
                    message["params"] = params
                await ws.send(json.dumps(message))
                while True:
                    answer = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
                    if answer.get("id") == number:
                        break
                answers.append(answer)
            return answers

    return asyncio.run(go())


def call(served: Served, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return calls(served, (method, params))[0]


def test_git_status(served: Served) -> None:
    root = served.root
    assert call(served, "git/status")["result"] == {
        "branch": "main", "staged": [], "unstaged": [], "untracked": [], "is_clean": True}
    write(root, "staged.txt", "s\n")
    git(root, "add", "staged.txt")
    write(root, "staged.txt", "s, changed again\n")
    write(root, "tracked.txt", "changed\n")
    write(root, "dir/new.txt", "n\n")
    write(root, "ignored.log", "i\n")
    git(root, "mv", ".gitignore", "renamed-gitignore")
    assert call(served, "git/status")["result"] == {
        "branch": "main", "staged": ["renamed-gitignore", "staged.txt"],
        "unstaged": ["staged.txt", "tracked.txt"],
        "untracked": ["dir/new.txt", "ignored.log"],  # .gitignore is no more
        "is_clean": False}


def test_git_diff(served: Served, tmp_path: Path) -> None:
    root = served.root
    write(root, "tracked.txt", "one\nTWO!\n")  # (see tests/repo/test_diff.py: racy)
    write(root, "fresh.txt", "fresh\n")
    (root / "out").symlink_to(tmp_path)
    one, every, fresh, missing = calls(
        served, ("git/diff", {"path": "tracked.txt"}), ("git/diff", None),
        ("git/diff", {"path": "fresh.txt"}), ("git/diff", {"path": "never-was.txt"}))
    assert one["result"]["path"] == "tracked.txt" and one["result"]["truncated"] is False
    assert "-two\n+TWO!\n" in one["result"]["diff"] and "fresh" not in one["result"]["diff"]
    assert every["result"]["path"] == ""
    assert "-two\n+TWO!\n" in every["result"]["diff"] and "+fresh\n" in every["result"]["diff"]
    assert ".ralph" not in every["result"]["diff"]  # the server's own store and serve.json
    assert "--- /dev/null\n+++ b/fresh.txt\n" in fresh["result"]["diff"]
    assert missing["result"] == {"path": "never-was.txt", "diff": "", "truncated": False}
    for path in ("../x", ".git/config", "out/anything", "/etc/passwd", "", "a\0b"):
        error = call(served, "git/diff", {"path": path})["error"]
        assert error == {"code": -32010, "message": "File not found", "data": {"path": path}}


def test_file_get(served: Served, tmp_path: Path) -> None:
    root = served.root
    write(root, "text.txt", "héllo\n")
    (root / "data.bin").write_bytes(b"\x89PNG\0\xff")
    (root / "big.txt").write_bytes(b"x" * (10 * MIB + 10))
    text, binary, big = calls(served, ("file/get", {"path": "text.txt"}),
                              ("file/get", {"path": "data.bin"}),
                              ("file/get", {"path": "big.txt"}))
    assert text["result"] == {"path": "text.txt", "content": "héllo\n", "size": 7,
                              "truncated": False, "encoding": "utf-8"}
    assert binary["result"]["encoding"] == "base64"
    assert base64.b64decode(binary["result"]["content"]) == b"\x89PNG\0\xff"
    assert big["result"]["truncated"] is True and big["result"]["size"] == 10 * MIB + 10
    assert len(big["result"]["content"]) == 10 * MIB


def test_file_get_refuses_whatever_is_not_a_file_of_the_repository(
        served: Served, tmp_path: Path) -> None:
    root = served.root
    write(tmp_path, "secret.txt", "secret\n")
    (root / "out").symlink_to(tmp_path / "secret.txt")
    (root / "outdir").symlink_to(tmp_path)
    os.mkfifo(root / "pipe")
    paths = ["missing.txt", "dir-not-there/x", ".", "../secret.txt", "out", "outdir/secret.txt",
             ".git/config", "./.git/HEAD", "a/../.git/HEAD", ".GIT/config", str(root / "x"),
             "", "text\0.txt", "pipe"]
    answers = calls(served, *[("file/get", {"path": path}) for path in paths])
    for path, answer in zip(paths, answers, strict=True):
        assert answer["error"] == {"code": -32010, "message": "File not found",
                                   "data": {"path": path}}, path
    # the FIFO blocked nothing: the server still answers
    assert call(served, "git/status")["result"]["branch"] == "main"
    no_path, null_path = calls(served, ("file/get", {}), ("file/get", {"path": None}))
    assert no_path["error"]["code"] == -32602 and no_path["error"]["data"]
    assert null_path["error"]["code"] == -32602


def test_outside_a_git_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # whatever holds tmp_path
    root = tmp_path / "plain"
    write(root, "notes.txt", "plain\n")
    with serving(root) as served:
        status, diff, got = calls(served, ("git/status", None), ("git/diff", None),
                                  ("file/get", {"path": "notes.txt"}))
        assert status["error"]["code"] == -32011 and status["error"]["message"] == "Git error"
        assert "not a git repository" in status["error"]["data"]["reason"]
        assert diff["error"]["code"] == -32011
        assert got["result"]["content"] == "plain\n"


def test_the_methods_are_in_the_openrpc_document(served: Served) -> None:
    status, document = served.get("/api/rpc/discover")
    assert status == 200
    methods = {method["name"]: method for method in document["methods"]}
    assert methods["git/status"]["errors"] == [{"code": -32011, "message": "Git error"}]
    assert methods["git/diff"]["errors"] == [{"code": -32010, "message": "File not found"},
                                             {"code": -32011, "message": "Git error"}]
    assert methods["file/get"]["errors"] == [{"code": -32010, "message": "File not found"}]
    for name in ("git/status", "git/diff", "file/get"):
        assert methods[name]["summary"] and methods[name]["result"]


def test_file_and_git_status_events_reach_a_client_and_are_caught_up(
        served: Served) -> None:
    async def go() -> None:
        async with websockets.connect(served.ws + f"?token={TOKEN}") as ws:
            phone = Phone(ws)
            start_seq = (await phone.call("initialize"))["result"]["last_seq"]
            status = (await phone.call("status/get"))["result"]
            assert status["watcher_enabled"] is True and status["git_enabled"] is True
            capabilities = (await phone.call("initialize"))["result"]["capabilities"]
            assert capabilities["git"]["status"] is capabilities["git"]["diff"] is True
            write(served.root, "new.txt", "hello\n")
            changed = await phone.until("event/file_changed", path="new.txt")
            assert changed["change"] == "created" and changed["seq"] > start_seq
            moved = await phone.until("event/git_status_changed")
            assert moved["untracked"] == ["new.txt"] and moved["branch"] == "main"
        async with websockets.connect(served.ws + f"?token={TOKEN}") as ws:
            again = Phone(ws)
            answer = (await again.call("initialize", {"since_seq": start_seq}))["result"]
            assert answer["replayed"] >= 2
            methods = [e["method"] for e in again.events]
            assert methods[:2] == ["event/file_changed", "event/git_status_changed"]

    asyncio.run(go())


def test_big_reads_one_at_a_time_per_connection(served: Served) -> None:
    """A batch of file/get (or requests that do not wait for their answers) cannot hold
    many large answers in memory at once: one at a time, the others told to retry."""
    (served.root / "big.bin").write_bytes(os.urandom(3 * MIB))

    async def go() -> list[Any]:
        async with websockets.connect(served.ws + f"?token={TOKEN}", max_size=None) as ws:
            await ws.send(json.dumps([{"jsonrpc": "2.0", "id": n, "method": "file/get",
                                       "params": {"path": "big.bin"}} for n in range(3)]))
            while True:
                answer = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
                if isinstance(answer, list):
                    break
            # once its answer is out, the next one is served
            await ws.send(json.dumps({"jsonrpc": "2.0", "id": 9, "method": "git/diff"}))
            while True:
                after = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
                if after.get("id") == 9:
                    return [answer, after]

    batch, after = asyncio.run(go())
    assert sum("result" in a for a in batch) == 1
    busy = [a["error"] for a in batch if "error" in a]
    assert len(busy) == 2
    assert all(e["code"] == -32000 and e["data"] == {"retry": True} for e in busy)
    assert "result" in after


def test_a_project_inside_a_larger_repository_shows_none_of_it(tmp_path: Path) -> None:
    top = make_repo(tmp_path / "top")
    write(top, "outside.txt", "not the project's\n")
    project = top / "proj"
    write(project, "in.txt", "the project's\n")
    with serving(project) as served:
        status, diff = calls(served, ("git/status", None), ("git/diff", None))
        state = call(served, "status/get")["result"]
        capabilities = call(served, "initialize")["result"]["capabilities"]
    for answer in (status, diff):
        assert answer["error"]["code"] == -32011
        assert "not the top of its git repository" in answer["error"]["data"]["reason"]
    assert state["git_enabled"] is False and capabilities["git"]["status"] is False

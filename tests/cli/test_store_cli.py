"""`ralph store ...`: every verb, its output and its exit code."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.cli.helpers import Cli, Follower, check_frame, json_lines, run_ralph, sri


def append(cli: Cli, store: Path, topic: str, *args: str, content: bytes = b"") -> dict[str, Any]:
    result = cli("store", "append", topic, *args, "--store", str(store), stdin=content)
    assert result.code == 0, result
    assert result.err == ""
    (frame,) = result.frames()
    return frame


def cat(cli: Cli, store: Path, *args: str) -> list[dict[str, Any]]:
    result = cli("store", "cat", *args, "--store", str(store))
    assert result.code == 0, result
    assert result.err == ""
    return result.frames()


def seqs(frames: list[dict[str, Any]]) -> list[int]:
    return [frame["seq"] for frame in frames]


@pytest.fixture
def mixed(cli: Cli, cli_store: Path) -> list[dict[str, Any]]:
    """Seven frames over several topics and streams, some with content."""
    spec = [
        ("a", "default", b"first"),
        ("a.b", "runs/r1", b""),
        ("a.b.c", "runs/r1", b"third"),
        ("ab", "default", b""),
        ("b", "runs/r2", b"fifth"),
        ("a.b", "runs/r2", b""),
        ("a", "runs/r1", b"seventh"),
    ]
    return [append(cli, cli_store, topic, "--stream", stream, content=content)
            for topic, stream, content in spec]


# -- append -----------------------------------------------------------------------------------


def test_append_prints_the_frame_as_one_json_line(cli: Cli, cli_store: Path) -> None:
    meta = {"k": 1, "nested": {"list": [1, 2.5, None, True], "s": "é ✓"}}
    result = cli("store", "append", "ralph.test.event", "--meta", json.dumps(meta),
                 "--stream", "runs/run_01", "--store", str(cli_store))
    assert result.code == 0
    assert result.err == ""
    assert result.out.count("\n") == 1
    assert result.out.endswith("\n")
    (frame,) = result.frames()
    check_frame(frame, topic="ralph.test.event", stream="runs/run_01", meta=meta, no_content=True)
    assert frame["seq"] == 1


def test_append_defaults_and_seq_increments(cli: Cli, cli_store: Path) -> None:
    first = append(cli, cli_store, "t")
    second = append(cli, cli_store, "t", "--meta", "{}")
    third = append(cli, cli_store, "_private-topic.x_1")
    check_frame(first, topic="t", stream="default", meta={}, no_content=True)
    check_frame(second, topic="t", stream="default", meta={}, no_content=True)
    check_frame(third, topic="_private-topic.x_1")
    assert seqs([first, second, third]) == [1, 2, 3]
    assert len({first["id"], second["id"], third["id"]}) == 3
    assert first["id"] < second["id"] < third["id"]  # SCRU128 ids sort by time
    assert first["ts"] <= second["ts"] <= third["ts"]


def test_append_reads_piped_content_in_process(cli: Cli, cli_store: Path) -> None:
    frame = append(cli, cli_store, "t", content=b"hello, store\n")
    check_frame(frame, content=b"hello, store\n")
    result = cli("store", "cas", frame["hash"], "--store", str(cli_store))
    assert result.code == 0
    assert result.out == "hello, store\n"
    assert result.err == ""


def test_append_with_empty_stdin_has_no_content(cli: Cli, cli_store: Path) -> None:
    frame = append(cli, cli_store, "t", content=b"")
    assert frame["hash"] is None


def test_append_content_piped_by_a_process_and_cas_returns_the_same_bytes(
        cli_store: Path) -> None:
    data = bytes(range(256)) + b"\nsecond line\r\n\x00tail"
    result = run_ralph("store", "append", "blob.put", "--meta", '{"name": "bytes"}',
                       "--store", str(cli_store), input=data)
    assert result.code == 0, result
    assert result.err == ""
    (frame,) = result.frames()
    check_frame(frame, topic="blob.put", meta={"name": "bytes"}, content=data)

    got = run_ralph("store", "cas", frame["hash"], "--store", str(cli_store))
    assert got.code == 0, got
    assert got.err == ""
    assert got.raw == data

    # The same content is stored once and named by the same hash.
    again = run_ralph("store", "append", "blob.put", "--store", str(cli_store), input=data)
    (second,) = again.frames()
    assert second["hash"] == frame["hash"]
    assert second["seq"] == frame["seq"] + 1
    objects = [p for p in (cli_store / "cas").rglob("*") if p.is_file()
               and p.parent.name != "tmp"]
    assert len(objects) == 1


def test_append_without_stdin_from_a_process(cli_store: Path) -> None:
    result = run_ralph("store", "append", "t", "--store", str(cli_store))  # stdin is /dev/null
    assert result.code == 0, result
    (frame,) = result.frames()
    assert frame["hash"] is None


# -- cat --------------------------------------------------------------------------------------


def test_cat_prints_every_frame_in_seq_order(cli: Cli, cli_store: Path,
                                             mixed: list[dict[str, Any]]) -> None:
    frames = cat(cli, cli_store)
    assert frames == mixed
    assert seqs(frames) == list(range(1, 8))


def test_cat_of_an_empty_store_prints_nothing(cli: Cli, cli_store: Path) -> None:
    assert cat(cli, cli_store) == []


def test_cat_topic_exact(cli: Cli, cli_store: Path, mixed: list[dict[str, Any]]) -> None:
    assert cat(cli, cli_store, "--topic", "a") == [mixed[0], mixed[6]]
    assert cat(cli, cli_store, "--topic", "a.b") == [mixed[1], mixed[5]]
    assert cat(cli, cli_store, "--topic", "ab") == [mixed[3]]
    assert cat(cli, cli_store, "--topic", "nothing.here") == []


def test_cat_topic_prefix(cli: Cli, cli_store: Path, mixed: list[dict[str, Any]]) -> None:
    # `a.*` is every topic below `a.`: not `a` itself and not `ab`.
    assert cat(cli, cli_store, "--topic", "a.*") == [mixed[1], mixed[2], mixed[5]]
    assert cat(cli, cli_store, "--topic", "a.b.*") == [mixed[2]]
    assert cat(cli, cli_store, "--topic", "*") == mixed
    assert cat(cli, cli_store, "--topic", "zzz.*") == []


def test_cat_stream(cli: Cli, cli_store: Path, mixed: list[dict[str, Any]]) -> None:
    assert cat(cli, cli_store, "--stream", "runs/r1") == [mixed[1], mixed[2], mixed[6]]
    assert cat(cli, cli_store, "--stream", "default") == [mixed[0], mixed[3]]
    assert cat(cli, cli_store, "--stream", "runs/none") == []
    assert cat(cli, cli_store, "--stream", "runs/r2", "--topic", "a.*") == [mixed[5]]


def test_cat_after_and_limit(cli: Cli, cli_store: Path, mixed: list[dict[str, Any]]) -> None:
    assert cat(cli, cli_store, "--after", "5") == mixed[5:]
    assert cat(cli, cli_store, "--after", "0") == mixed
    assert cat(cli, cli_store, "--after", "7") == []
    assert cat(cli, cli_store, "--after", "100") == []
    assert cat(cli, cli_store, "--limit", "2") == mixed[:2]
    assert cat(cli, cli_store, "--limit", "0") == []
    assert cat(cli, cli_store, "--limit", "100") == mixed
    assert cat(cli, cli_store, "--after", "1", "--limit", "3") == mixed[1:4]
    assert cat(cli, cli_store, "--topic", "a.*", "--after", "2", "--limit", "1") == [mixed[2]]


def test_cat_default_store_from_environment(cli: Cli, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    env_store = tmp_path / "from-env"
    monkeypatch.setenv("RALPH_STORE", str(env_store))
    written = cli("store", "append", "t")
    assert written.code == 0
    (frame,) = written.frames()
    assert (env_store / "streams").is_dir()
    listed = cli("store", "cat")
    assert listed.frames() == [frame]


# -- cat --follow -----------------------------------------------------------------------------


def test_follow_replays_then_prints_frames_appended_by_other_processes(cli_store: Path) -> None:
    before = [run_ralph("store", "append", "t", "--store", str(cli_store)).frames()[0]
              for _ in range(2)]
    with Follower("--store", str(cli_store)) as follower:
        assert follower.frames(2) == before
        live = []
        for n in range(3):
            result = run_ralph("store", "append", f"live.n{n}", "--meta", json.dumps({"n": n}),
                               "--store", str(cli_store), input=f"content {n}".encode())
            assert result.code == 0, result
            live.append(result.frames()[0])
            assert follower.next_frame() == live[-1]
        follower.stop()
    assert seqs(before + live) == [1, 2, 3, 4, 5]
    assert "Traceback" not in follower.stderr


def test_follow_filters_by_topic_stream_and_after(cli: Cli, cli_store: Path) -> None:
    append(cli, cli_store, "a.x")  # 1
    append(cli, cli_store, "b.x")  # 2
    append(cli, cli_store, "a.y", "--stream", "runs/r1")  # 3
    append(cli, cli_store, "a.z")  # 4
    with Follower("--topic", "a.*", "--after", "1", "--store", str(cli_store)) as by_topic, \
            Follower("--stream", "runs/r1", "--store", str(cli_store)) as by_stream:
        assert seqs(by_topic.frames(2)) == [3, 4]
        assert seqs(by_stream.frames(1)) == [3]
        append(cli, cli_store, "b.y", "--stream", "runs/r1")  # 5
        append(cli, cli_store, "a.w")  # 6
        append(cli, cli_store, "a.v", "--stream", "runs/r1")  # 7
        # Frames that do not match come first, so a filter that let them through shows here.
        assert [(f["seq"], f["topic"]) for f in by_topic.frames(2)] == [(6, "a.w"), (7, "a.v")]
        assert [(f["seq"], f["topic"]) for f in by_stream.frames(2)] == [(5, "b.y"),
                                                                         (7, "a.v")]
        by_topic.stop()
        by_stream.stop()


def test_follow_with_limit_exits_by_itself(cli: Cli, cli_store: Path) -> None:
    append(cli, cli_store, "t")
    with Follower("--limit", "2", "--store", str(cli_store)) as follower:
        assert seqs(follower.frames(1)) == [1]
        append(cli, cli_store, "t")
        assert seqs(follower.frames(1)) == [2]
        assert follower.wait() == 0
        assert follower.no_more_output()
        assert follower.stderr == ""


def test_follow_on_a_new_store_waits_for_the_first_frame(cli: Cli, cli_store: Path) -> None:
    with Follower("--store", str(cli_store)) as follower:
        frame = run_ralph("store", "append", "first", "--store", str(cli_store)).frames()[0]
        assert follower.next_frame() == frame
        follower.stop()


def test_follow_interrupted_exits_130_without_a_traceback(cli: Cli, cli_store: Path) -> None:
    append(cli, cli_store, "t")
    with Follower("--store", str(cli_store)) as follower:
        follower.next_frame()
        code = follower.stop(signal.SIGINT)
    assert code == 130
    assert "Traceback" not in follower.stderr
    assert "error" not in follower.stderr


# -- last, get, cas ---------------------------------------------------------------------------


def test_last(cli: Cli, cli_store: Path, mixed: list[dict[str, Any]]) -> None:
    def last(*args: str) -> list[dict[str, Any]]:
        result = cli("store", "last", *args, "--store", str(cli_store))
        assert result.code == 0, result
        assert result.err == ""
        return result.frames()

    assert last("a") == [mixed[6]]
    assert last("a", "1") == [mixed[6]]
    assert last("a", "2") == [mixed[0], mixed[6]]  # oldest first
    assert last("a", "50") == [mixed[0], mixed[6]]
    assert last("a.*", "2") == [mixed[2], mixed[5]]
    assert last("a.b") == [mixed[5]]
    assert last("nothing") == []


def test_get(cli: Cli, cli_store: Path, mixed: list[dict[str, Any]]) -> None:
    for frame in mixed:
        result = cli("store", "get", frame["id"], "--store", str(cli_store))
        assert result.code == 0, result
        assert result.err == ""
        assert result.frames() == [frame]


def test_cas_returns_the_content_of_each_frame(cli: Cli, cli_store: Path,
                                               mixed: list[dict[str, Any]]) -> None:
    contents = {0: "first", 2: "third", 4: "fifth", 6: "seventh"}
    for i, frame in enumerate(mixed):
        if i not in contents:
            assert frame["hash"] is None
            continue
        assert frame["hash"] == sri(contents[i].encode())
        result = cli("store", "cas", frame["hash"], "--store", str(cli_store))
        assert result.code == 0, result
        assert result.out == contents[i]  # raw bytes: no newline added
        assert result.err == ""


# -- sync, rebuild, stats, errors -------------------------------------------------------------


def test_sync(cli: Cli, cli_store: Path, mixed: list[dict[str, Any]]) -> None:
    result = cli("store", "sync", "--store", str(cli_store))
    assert result.code == 0, result
    assert result.err == ""
    body = result.json()
    assert set(body) == {"indexed", "parse_errors", "last_seq"}
    assert body["last_seq"] == 7
    assert body["parse_errors"] == 0
    assert 0 <= body["indexed"] <= 7
    # Syncing again finds nothing new.
    again = cli("store", "sync", "--store", str(cli_store)).json()
    assert again == {"indexed": 0, "parse_errors": 0, "last_seq": 7}


def test_rebuild(cli: Cli, cli_store: Path, mixed: list[dict[str, Any]]) -> None:
    result = cli("store", "rebuild", "--store", str(cli_store))
    assert result.code == 0, result
    assert result.err == ""
    assert result.json() == {"indexed": 7, "parse_errors": 0, "last_seq": 7}
    assert cat(cli, cli_store) == mixed
    frame = append(cli, cli_store, "after.rebuild")
    assert frame["seq"] == 8


def test_stats(cli: Cli, cli_store: Path, mixed: list[dict[str, Any]]) -> None:
    result = cli("store", "stats", "--store", str(cli_store))
    assert result.code == 0, result
    assert result.err == ""
    stats = result.json()
    assert stats["path"] == str(cli_store)
    assert stats["last_seq"] == 7
    assert stats["frames"] == 7
    assert stats["streams"] == 3
    assert stats["topics"] == 5
    assert stats["parse_errors"] == 0
    assert stats["content_objects"] == 4
    assert stats["content_bytes"] == len(b"first" + b"third" + b"fifth" + b"seventh")
    assert stats["stream_bytes"] == sum(p.stat().st_size
                                        for p in (cli_store / "streams").rglob("*.jsonl"))
    assert stats["index_bytes"] > 0


def test_stats_of_an_empty_store(cli: Cli, cli_store: Path) -> None:
    stats = cli("store", "stats", "--store", str(cli_store)).json()
    assert stats["frames"] == 0
    assert stats["last_seq"] == 0
    assert stats["content_objects"] == 0


def test_errors_lists_lines_that_are_not_frames(cli: Cli, cli_store: Path) -> None:
    first = append(cli, cli_store, "t")
    empty = cli("store", "errors", "--store", str(cli_store))
    assert (empty.code, empty.out, empty.err) == (0, "", "")

    stream_file = cli_store / "streams" / "default.jsonl"
    offset = stream_file.stat().st_size
    with stream_file.open("ab") as handle:
        handle.write(b"this line is not a frame\n")

    listed = cli("store", "cat", "--store", str(cli_store))
    assert listed.code == 0
    assert listed.frames() == [first]
    # Noticing the bad line is worth a warning (one line each, never an error).
    warnings = listed.err.splitlines()
    assert warnings
    assert all(line.startswith("warning: ") for line in warnings), listed.err
    assert any(f"byte {offset} is not a frame" in line for line in warnings), listed.err

    result = cli("store", "errors", "--store", str(cli_store))
    assert result.code == 0, result
    (error,) = json_lines(result.out)
    assert error["stream"] == "default"
    assert error["byte_offset"] == offset
    assert "this line is not a frame" in error["excerpt"]
    assert isinstance(error["error"], str)
    assert error["error"]
    assert error["recorded_at"].endswith("Z")

    # The store goes on: the next frame gets the next seq and the bad line stays recorded.
    second = append(cli, cli_store, "t")
    assert second["seq"] == 2
    assert cat(cli, cli_store) == [first, second]
    assert cli("store", "stats", "--store", str(cli_store)).json()["parse_errors"] == 1


# -- gc ---------------------------------------------------------------------------------------


def gc(cli: Cli, store: Path, *args: str) -> dict[str, Any]:
    result = cli("store", "gc", *args, "--store", str(store))
    assert result.code == 0, result
    assert result.err == ""
    report: dict[str, Any] = result.json()
    assert set(report) == {"frames_removed", "streams_rewritten", "content_removed",
                           "bytes_freed", "dry_run"}
    return report


@pytest.fixture
def gc_frames(cli: Cli, cli_store: Path) -> list[dict[str, Any]]:
    frames = [append(cli, cli_store, "t", content=f"c{i}".encode()) for i in range(1, 5)]
    frames.append(append(cli, cli_store, "u", content=b"u1"))
    frames.append(append(cli, cli_store, "t.sub", "--stream", "runs/r1"))
    return frames


def test_gc_dry_run_removes_nothing(cli: Cli, cli_store: Path,
                                    gc_frames: list[dict[str, Any]]) -> None:
    streams_before = {p: p.read_bytes() for p in (cli_store / "streams").rglob("*.jsonl")}
    report = gc(cli, cli_store, "--policy", "t=last:2", "--dry-run")
    assert report["dry_run"] is True
    assert report["frames_removed"] == 2
    assert report["content_removed"] == 2
    assert cat(cli, cli_store) == gc_frames
    assert {p: p.read_bytes() for p in streams_before} == streams_before
    for frame in gc_frames[:4]:
        assert cli("store", "cas", frame["hash"], "--store", str(cli_store)).code == 0


def test_gc_dry_run_reports_the_bytes_gc_frees(cli: Cli, cli_store: Path,
                                               gc_frames: list[dict[str, Any]]) -> None:
    planned = gc(cli, cli_store, "--policy", "t=last:2", "--dry-run")
    done = gc(cli, cli_store, "--policy", "t=last:2")
    assert planned["bytes_freed"] == done["bytes_freed"] > 0
    assert {k: v for k, v in planned.items() if k != "dry_run"} == {
        k: v for k, v in done.items() if k != "dry_run"}


def test_gc_last_n_removes_older_frames_and_their_content(
        cli: Cli, cli_store: Path, gc_frames: list[dict[str, Any]]) -> None:
    report = gc(cli, cli_store, "--policy", "t=last:2")
    assert report == {**report, "dry_run": False, "frames_removed": 2, "streams_rewritten": 1,
                      "content_removed": 2}
    assert report["bytes_freed"] > 0
    kept = cat(cli, cli_store)
    assert kept == gc_frames[2:]
    assert seqs(kept) == [3, 4, 5, 6]
    gone = cli("store", "cas", gc_frames[0]["hash"], "--store", str(cli_store))
    assert gone.code == 1
    assert cli("store", "get", gc_frames[1]["id"], "--store", str(cli_store)).code == 1
    assert cli("store", "cas", gc_frames[2]["hash"], "--store", str(cli_store)).out == "c3"
    # Seqs go on after the newest frame, and gc again has nothing to do.
    assert append(cli, cli_store, "t")["seq"] == 7
    assert gc(cli, cli_store, "--policy", "t=last:3")["frames_removed"] == 0


def test_gc_prefix_and_several_policies(cli: Cli, cli_store: Path,
                                        gc_frames: list[dict[str, Any]]) -> None:
    report = gc(cli, cli_store, "--policy", "t=last:1", "--policy", "u=time:86400000",
                "--policy", "t.*=last:5")
    assert report["frames_removed"] == 3
    assert cat(cli, cli_store) == gc_frames[3:]


def test_gc_without_policies_keeps_every_frame(cli: Cli, cli_store: Path,
                                               gc_frames: list[dict[str, Any]]) -> None:
    report = gc(cli, cli_store)
    assert report["frames_removed"] == 0
    assert report["streams_rewritten"] == 0
    assert cat(cli, cli_store) == gc_frames


def test_gc_reads_retention_json(cli: Cli, cli_store: Path,
                                 gc_frames: list[dict[str, Any]]) -> None:
    (cli_store / "retention.json").write_text('{"t": "last:3"}')
    assert gc(cli, cli_store, "--dry-run")["frames_removed"] == 1
    assert gc(cli, cli_store)["frames_removed"] == 1
    assert cat(cli, cli_store) == gc_frames[1:]


# -- the index is a cache: deleted or corrupt, it is rebuilt --------------------------------


def _seed_with_processes(store: Path) -> list[dict[str, Any]]:
    frames = []
    for n, (topic, stream) in enumerate([("a.one", "default"), ("a.two", "runs/r1"),
                                         ("b.three", "runs/r2"), ("a.four", "default")]):
        result = run_ralph("store", "append", topic, "--stream", stream, "--meta",
                           json.dumps({"n": n}), "--store", str(store), input=b"x" * n)
        assert result.code == 0, result
        frames.extend(result.frames())
    return frames


def _assert_one_warning(err: str, *words: str) -> None:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("warning: "), err
    for word in words:
        assert word in lines[0], (word, lines[0])


def test_deleted_index_is_rebuilt_with_a_warning(cli_store: Path) -> None:
    frames = _seed_with_processes(cli_store)
    removed = list(cli_store.glob("index.sqlite*"))
    assert removed
    for path in removed:
        path.unlink()

    result = run_ralph("store", "cat", "--store", str(cli_store))
    assert result.code == 0, result
    _assert_one_warning(result.err, "index")
    assert result.frames() == frames

    # Rebuilt once: the next command has nothing to warn about, and queries work.
    again = run_ralph("store", "cat", "--topic", "a.*", "--store", str(cli_store))
    assert again.err == ""
    assert again.frames() == [frames[0], frames[1], frames[3]]
    assert (cli_store / "index.sqlite").is_file()


def test_deleted_index_is_rebuilt_for_get_and_stats(cli_store: Path) -> None:
    frames = _seed_with_processes(cli_store)
    for path in cli_store.glob("index.sqlite*"):
        path.unlink()
    result = run_ralph("store", "get", frames[2]["id"], "--store", str(cli_store))
    assert result.code == 0, result
    _assert_one_warning(result.err, "index")
    assert result.frames() == [frames[2]]
    stats = run_ralph("store", "stats", "--store", str(cli_store))
    assert stats.err == ""
    assert stats.json()["frames"] == 4


@pytest.mark.parametrize("garbage", [b"this is not a SQLite database " * 200,
                                     b"\x00" * 4096, b"SQLite format 3\x00" + b"\xff" * 8000])
def test_corrupt_index_is_rebuilt_with_a_warning(cli_store: Path, garbage: bytes) -> None:
    frames = _seed_with_processes(cli_store)
    (cli_store / "index.sqlite").write_bytes(garbage)

    result = run_ralph("store", "cat", "--store", str(cli_store))
    assert result.code == 0, result
    _assert_one_warning(result.err, "index")
    assert result.frames() == frames

    again = run_ralph("store", "cat", "--stream", "runs/r1", "--store", str(cli_store))
    assert again.err == ""
    assert again.frames() == [frames[1]]
    appended = run_ralph("store", "append", "after", "--store", str(cli_store))
    assert appended.frames()[0]["seq"] == 5


def test_corrupt_index_in_process(cli: Cli, cli_store: Path,
                                  mixed: list[dict[str, Any]]) -> None:
    (cli_store / "index.sqlite").write_bytes(b"garbage" * 1000)
    result = cli("store", "cat", "--store", str(cli_store))
    assert result.code == 0, result
    _assert_one_warning(result.err, "index")
    assert result.frames() == mixed

"""Agent output is stored once: the log is the output, the store holds excerpts.

Sizes on disk are deterministic (times are not), so this is a unit test of the storage
target that benchmarks/storage_bench.py measures at 200 MB."""

from __future__ import annotations

from pathlib import Path

from ralph.agents.runner import EXCERPT_CHARS
from tests.loop.conftest import Project

OUTPUT_BYTES = 20_000_000


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def _tree(path: Path) -> int:
    return sum(_size(p) for p in path.rglob("*") if p.is_file())


async def test_20_mb_of_output_take_less_than_1_2_times_that_on_disk(project: Project) -> None:
    """The log, the stream files, the index (file, WAL and shared memory, after a reader
    synced it) and the content store together: at most 1.2 bytes per byte of output."""
    project.plan({"tasks": {"1": [{"tick": True, "print": ["starting"],
                                   "print_bytes": OUTPUT_BYTES, "stderr": ["a warning"]}]}})
    service = project.service()
    try:
        result = await service.step()
        outputs = list(service.store.read(topic="agent.output"))  # syncs the index
        store = service.paths.store
        index = sum(_size(store.parent / "store" / f"index.sqlite{suffix}")
                    for suffix in ("", "-wal", "-shm"))
        on_disk = _tree(store / "streams") + index + _tree(store / "cas")
    finally:
        await service.aclose()
    assert result.verified
    log = (project.root / ".ralph" / "logs" / "000001.log").read_bytes()
    assert len(log) > OUTPUT_BYTES * 0.99
    assert len(log) + on_disk <= 1.2 * len(log), (len(log), on_disk)
    assert len(outputs) < 2_000  # 1,000 lines one by one, then 64 KiB blocks
    assert sum(f.meta["chars"] for f in outputs) > OUTPUT_BYTES * 0.99
    for frame in outputs:
        meta = frame.meta
        assert len(meta["content"]) == min(meta["chars"], EXCERPT_CHARS)
        # Each event's text begins a line of the log. (Only its start is compared: the
        # stderr line may be logged between two stdout lines of a joined event.)
        start = meta["log_offset"]
        assert start == 0 or log[start - 1:start] == b"\n"
        assert log[start:].startswith(meta["content"][:20].encode())

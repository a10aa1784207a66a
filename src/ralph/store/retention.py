"""Retention: per-topic `last:N` / `time:MS` policies, applied only by an explicit gc.

gc holds the append lock while it works: it rewrites the affected stream files without the
expired frames (temp file, fsync, rename), reindexes them, and deletes content that no
remaining frame refers to. Lines that are not frames are kept: gc removes only what a policy
names.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import orjson

from ralph.store.errors import InvalidPolicyError, StoreError
from ralph.store.frame import MAX_SEQ, format_ts, topic_filter
from ralph.store.fsio import fsync_dir, write_error
from ralph.store.head import write_seq_floor
from ralph.store.streams import stream_path

if TYPE_CHECKING:
    from ralph.store.filestore import FileStore
    from ralph.store.index import Index

RETENTION_FILE = "retention.json"
# last:N counts frames (seqs fit SQLite's INTEGER); time:MS is kept below 1,000 years, which
# every timestamp computation can represent.
_LIMITS = {"last": MAX_SEQ, "time": 1000 * 365 * 24 * 3600 * 1000}
_STALE_TMP_S = 3600


@dataclass(frozen=True)
class Policy:
    kind: Literal["last", "time"]
    value: int

    @classmethod
    def parse(cls, text: str) -> Policy:
        kind, _, number = text.partition(":")
        if kind not in ("last", "time") or not (number.isascii() and number.isdigit()):
            raise InvalidPolicyError(
                f"invalid retention policy {text!r}: use last:N (keep the newest N frames) or "
                "time:MS (keep frames younger than MS milliseconds)")
        value = int(number)
        limit = _LIMITS[kind]
        if value > limit:
            raise InvalidPolicyError(f"invalid retention policy {text!r}: {kind}: allows at "
                                     f"most {limit}")
        return cls(kind, value)  # type: ignore[arg-type]  # kind checked just above

    def __str__(self) -> str:
        return f"{self.kind}:{self.value}"


@dataclass(frozen=True)
class Rule:
    """A policy for one topic, or for every topic under a prefix (`agent.*`, `*`)."""

    topic: str
    policy: Policy

    @classmethod
    def parse(cls, text: str) -> Rule:
        topic, sep, policy = text.partition("=")
        if not sep:
            raise InvalidPolicyError(f"invalid retention rule {text!r}: use TOPIC=last:N or "
                                     "TOPIC=time:MS")
        return cls.of(topic, policy)

    @classmethod
    def of(cls, topic: str, policy: str) -> Rule:
        try:
            topic_filter(topic)
        except ValueError as exc:
            raise InvalidPolicyError(str(exc)) from None
        return cls(topic, Policy.parse(policy))

    def specificity(self, topic: str) -> int | None:
        """How closely this rule names `topic` (higher wins), or None if it does not."""
        value, prefix = topic_filter(self.topic)
        if not prefix:
            return 10_000 if value == topic else None
        return len(value) if topic.startswith(value) else None


def load_rules(store_path: Path) -> list[Rule]:
    """The rules in `<store>/retention.json`: `{"agent.output": "last:1000", ...}`."""
    path = store_path / RETENTION_FILE
    if not path.exists():
        return []
    try:
        body = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise InvalidPolicyError(f"{path} is not valid JSON: {exc}") from None
    except OSError as exc:
        raise InvalidPolicyError(f"cannot read {path}: {exc.strerror}") from None
    if not isinstance(body, dict) or not all(isinstance(v, str) for v in body.values()):
        raise InvalidPolicyError(f"{path} must be a JSON object of topic: policy strings")
    return [Rule.of(topic, policy) for topic, policy in body.items()]


def rule_for(topic: str, rules: list[Rule]) -> Rule | None:
    best: tuple[int, Rule] | None = None
    for rule in rules:
        score = rule.specificity(topic)
        if score is not None and (best is None or score >= best[0]):
            best = (score, rule)
    return None if best is None else best[1]


@dataclass(frozen=True)
class GcReport:
    frames_removed: int
    streams_rewritten: int
    content_removed: int
    bytes_freed: int
    dry_run: bool


def collect_garbage(store: FileStore, rules: list[Rule], *, dry_run: bool = False,
                    now_ms: int | None = None) -> GcReport:
    """Apply `rules`; with dry_run, only count what would go."""
    files = store._opened()
    if files is None:  # a store that does not exist holds nothing to collect
        return GcReport(0, 0, 0, 0, dry_run)
    writer, index, cas = files.writer, files.index, store._cas
    now = int(time.time() * 1000) if now_ms is None else now_ms
    with writer.locked():
        last = writer.verify_locked()
        index.sync(settle_upto=last)
        doomed = _expired(index, rules, now)
        removed = sum(len(seqs) for seqs in doomed.values())
        freed = 0
        if not dry_run and doomed:
            try:
                write_seq_floor(store.path, last)  # removed seqs are never handed out again
            except OSError as exc:
                raise write_error(exc, "the seq floor") from None
            # Before any file changes: should gc die halfway, every writer still reopens its
            # descriptors instead of appending to a file that was replaced.
            writer.bump_generation()
            try:
                for stream, seqs in doomed.items():
                    freed += _rewrite_stream(stream_path(store.path / "streams", stream), seqs)
            finally:
                index.reindex_streams(sorted(doomed))
        if dry_run:
            freed += sum(_bytes_freed(stream_path(store.path / "streams", stream), seqs)
                         for stream, seqs in doomed.items())
            gone = set().union(*doomed.values()) if doomed else set()
            kept = {h for seq, h in index.execute("SELECT seq, hash FROM frames WHERE hash IS "
                                                  "NOT NULL") if seq not in gone}
        else:
            kept = index.referenced_hashes()
        orphans = [(h, size) for h, size in cas.hashes() if h not in kept]
        if not dry_run:
            freed += sum(cas.remove(h) for h, _ in orphans)
            _clear_stale_tmp(cas.root / "tmp")
        else:
            freed += sum(size for _, size in orphans)
    store.refresh()
    return GcReport(removed, len(doomed), len(orphans), freed, dry_run)


def _expired(index: Index, rules: list[Rule], now_ms: int) -> dict[str, set[int]]:
    """The seqs each policy lets go, grouped by stream."""
    doomed: dict[str, set[int]] = {}
    for topic, _count in index.topics():
        rule = rule_for(topic, rules)
        if rule is None:
            continue
        if rule.policy.kind == "last":
            rows = index.execute("SELECT seq, stream FROM frames WHERE topic = ? "
                                 "ORDER BY seq DESC LIMIT -1 OFFSET ?",
                                 (topic, rule.policy.value))
        else:
            cutoff = format_ts(now_ms - rule.policy.value)
            rows = index.execute("SELECT seq, stream FROM frames WHERE topic = ? AND ts < ?",
                                 (topic, cutoff))
        for seq, stream in rows:
            doomed.setdefault(stream, set()).add(seq)
    return doomed


def _rewrite_stream(path: Path, seqs: set[int]) -> int:
    """Rewrite a stream file without the frames in `seqs`; returns the bytes freed."""
    tmp = path.with_name(f".{path.name}.gc-tmp")
    before = path.stat().st_size
    kept = 0
    try:
        with path.open("rb") as src, tmp.open("wb") as dst:
            for line in src:
                if _line_seq(line) in seqs:
                    continue
                dst.write(line if line.endswith(b"\n") else line + b"\n")
                kept += 1
            dst.flush()
            os.fsync(dst.fileno())
        if kept:
            tmp.replace(path)
        else:
            tmp.unlink()
            path.unlink()
        fsync_dir(path.parent)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise write_error(exc, f"stream file {path} during gc") from None
    return before - (path.stat().st_size if kept else 0)


def _bytes_freed(path: Path, seqs: set[int]) -> int:
    """The bytes `_rewrite_stream(path, seqs)` would free (a dry run): it writes every line
    but those of `seqs`, each ending in a newline."""
    try:
        with path.open("rb") as src:
            before = os.fstat(src.fileno()).st_size
            after = sum(len(line) + (not line.endswith(b"\n")) for line in src
                        if _line_seq(line) not in seqs)
    except OSError as exc:
        raise StoreError(f"cannot read stream file {path}: {exc.strerror or exc}") from None
    return before - after


def _line_seq(line: bytes) -> int | None:
    try:
        body = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    seq = body.get("seq") if isinstance(body, dict) else None
    return seq if isinstance(seq, int) else None


def _clear_stale_tmp(tmp_dir: Path) -> None:
    """Temp files of content writes that died before their rename."""
    if not tmp_dir.is_dir():
        return
    cutoff = time.time() - _STALE_TMP_S
    for entry in tmp_dir.iterdir():
        with contextlib.suppress(OSError):
            if entry.stat().st_mtime < cutoff:
                entry.unlink()

"""The prompts' notes are read as they come: each note's frame and text once per feed."""

from __future__ import annotations

from pathlib import Path

import pytest

from ralph.notes import NoteFeed, add_note, list_notes
from ralph.store import Store


def test_a_feed_reads_only_the_notes_added_since_it_last_looked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Store(tmp_path / "store") as store:
        add_note(store, "learning", "first")
        store.append("iteration.started", {"iteration": 1})  # not a note: skipped
        add_note(store, "decision", "second", session="other")
        feed = NoteFeed(store)
        assert [n.text for n in feed.notes()] == ["first", "second"]
        texts_read: list[str] = []
        real = store.cas_get

        def counted(digest: str) -> bytes:
            texts_read.append(digest)
            return real(digest)

        monkeypatch.setattr(store, "cas_get", counted)
        assert [n.text for n in feed.notes()] == ["first", "second"]
        assert texts_read == []  # nothing new: nothing read
        add_note(store, "blocked", "third")
        assert [n.text for n in feed.notes()] == ["first", "second", "third"]
        assert len(texts_read) == 1
        assert [n.id for n in feed.notes()] == [n.id for n in list_notes(store)]


def test_a_feed_does_not_query_the_store_while_no_session_stream_changed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Store(tmp_path / "store") as store:
        add_note(store, "learning", "first")
        feed = NoteFeed(store)
        assert [n.text for n in feed.notes()] == ["first"]
        reads: list[object] = []
        real = store.read

        def counted(*args: object, **kwargs: object) -> object:
            reads.append(args)
            return real(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(store, "read", counted)
        for n in range(5):  # the loop's own events: not in a session stream
            store.append("iteration.started", {"iteration": n + 1}, stream="runs/run_x")
            assert [note.text for note in feed.notes()] == ["first"]
        assert reads == []
        add_note(store, "decision", "second", session="other")
        assert [n.text for n in feed.notes()] == ["first", "second"]
        assert len(reads) == 1

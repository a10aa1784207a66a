"""The event store: append-only JSONL streams, a content store, a SQLite index, subscriptions.

    from ralph.store import Store

    with Store(".ralph/store") as store:
        frame = store.append("ralph.demo.note", {"type": "learning"}, content="text")
        for f in store.read(topic="ralph.demo.*"):
            ...
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ralph.store.errors import (
        ContentCorruptError,
        ContentNotFoundError,
        FrameNotFoundError,
        InvalidContentError,
        InvalidHashError,
        InvalidMetaError,
        InvalidPolicyError,
        InvalidQueryError,
        InvalidStreamError,
        InvalidTopicError,
        StoreError,
        StoreFullError,
        StoreNotWritableError,
        StoreWriteError,
    )
    from ralph.store.filestore import FileStore
    from ralph.store.frame import DEFAULT_STREAM, Frame, check_stream, check_topic, parse_meta_json
    from ralph.store.index import ParseError, SyncResult
    from ralph.store.retention import GcReport, Policy, Rule
    from ralph.store.store import Draft, Store
    from ralph.store.subscribe import Lag, Subscription
    from ralph.store.writer import DURABILITY_MODES, Durability

_WHERE = {
    "ContentCorruptError": "errors",
    "ContentNotFoundError": "errors",
    "DEFAULT_STREAM": "frame",
    "DURABILITY_MODES": "writer",
    "Durability": "writer",
    "Frame": "frame",
    "FrameNotFoundError": "errors",
    "GcReport": "retention",
    "InvalidContentError": "errors",
    "InvalidHashError": "errors",
    "InvalidMetaError": "errors",
    "InvalidPolicyError": "errors",
    "InvalidQueryError": "errors",
    "InvalidStreamError": "errors",
    "InvalidTopicError": "errors",
    "Lag": "subscribe",
    "ParseError": "index",
    "Policy": "retention",
    "Rule": "retention",
    "Draft": "store",
    "FileStore": "filestore",
    "Store": "store",
    "StoreError": "errors",
    "StoreFullError": "errors",
    "StoreNotWritableError": "errors",
    "StoreWriteError": "errors",
    "Subscription": "subscribe",
    "SyncResult": "index",
    "check_stream": "frame",
    "check_topic": "frame",
    "parse_meta_json": "frame",
}

__all__ = [
    "DEFAULT_STREAM",
    "DURABILITY_MODES",
    "ContentCorruptError",
    "ContentNotFoundError",
    "Draft",
    "Durability",
    "FileStore",
    "Frame",
    "FrameNotFoundError",
    "GcReport",
    "InvalidContentError",
    "InvalidHashError",
    "InvalidMetaError",
    "InvalidPolicyError",
    "InvalidQueryError",
    "InvalidStreamError",
    "InvalidTopicError",
    "Lag",
    "ParseError",
    "Policy",
    "Rule",
    "Store",
    "StoreError",
    "StoreFullError",
    "StoreNotWritableError",
    "StoreWriteError",
    "Subscription",
    "SyncResult",
    "check_stream",
    "check_topic",
    "parse_meta_json",
]


def __getattr__(name: str) -> Any:
    """Names are imported on first use: the CLI starts without loading SQLite and watchfiles
    for commands that do not touch the store."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'ralph.store' has no attribute {name!r}")
    return getattr(importlib.import_module(f"ralph.store.{module}"), name)

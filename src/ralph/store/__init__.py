"""The event store: append-only JSONL streams, a content store, a SQLite index, subscriptions.

    from ralph.store import Store

    with Store(".ralph/store") as store:
        frame = store.append("ralph.demo.note", {"type": "learning"}, content="text")
        for f in store.read(topic="ralph.demo.*"):
            ...
"""

from ralph.store.errors import (
    ContentCorruptError,
    ContentNotFoundError,
    FrameNotFoundError,
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
from ralph.store.frame import DEFAULT_STREAM, Frame, check_stream, check_topic, parse_meta_json
from ralph.store.index import ParseError, SyncResult
from ralph.store.retention import GcReport, Policy, Rule
from ralph.store.store import Store
from ralph.store.subscribe import Lag, Subscription
from ralph.store.writer import DURABILITY_MODES, Durability

__all__ = [
    "DEFAULT_STREAM",
    "DURABILITY_MODES",
    "ContentCorruptError",
    "ContentNotFoundError",
    "Durability",
    "Frame",
    "FrameNotFoundError",
    "GcReport",
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

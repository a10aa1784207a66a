"""The one exception hierarchy of the store: every failure a caller can act on is a StoreError."""

from __future__ import annotations

from ralph.errors import RalphError


class StoreError(RalphError):
    """Base of every error the store raises on purpose."""


class InvalidTopicError(StoreError, ValueError):
    """A topic that breaks the naming rules (letters, digits, `_`, `-`, dot-separated)."""


class InvalidStreamError(StoreError, ValueError):
    """A stream name that cannot be mapped to a stream file."""


class InvalidMetaError(StoreError, ValueError):
    """Meta that is not a JSON object, or holds values JSON cannot carry."""


class InvalidHashError(StoreError, ValueError):
    """A content hash that is not an SRI `sha256-<base64>` string."""


class InvalidContentError(StoreError, ValueError):
    """Content given as text that has no UTF-8 form (lone surrogates)."""


class InvalidPolicyError(StoreError, ValueError):
    """A retention policy that is not `last:N` or `time:MS`."""


class InvalidQueryError(StoreError, ValueError):
    """A read whose filters make no sense (a bad time bound, a negative limit)."""


class FrameNotFoundError(StoreError, LookupError):
    """No frame has the id asked for."""


class ContentNotFoundError(StoreError, LookupError):
    """The content store holds nothing under the hash asked for."""


class ContentCorruptError(StoreError):
    """Content on disk no longer matches its hash."""


class StoreNotWritableError(StoreError):
    """The store directory cannot be created or written."""


class StoreFullError(StoreError):
    """The disk filled up during a write; nothing half-written was kept."""


class StoreWriteError(StoreError):
    """Another I/O error during a write; nothing half-written was kept."""

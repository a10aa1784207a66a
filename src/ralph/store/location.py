"""Where a store is: a directory, or a PostgreSQL URL (`postgresql://user@host:port/db`)."""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

DATABASE_SCHEMES = ("postgresql", "postgres")


def is_database_url(location: str | os.PathLike[str]) -> bool:
    """True for a `postgresql://` (or `postgres://`) URL; anything else names a directory."""
    if not isinstance(location, str):
        return False
    scheme, sep, _ = location.partition("://")
    return bool(sep) and scheme.lower() in DATABASE_SCHEMES


def masked_url(url: str) -> str:
    """The URL with its password (if any) replaced by `***`, fit for logs and status."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    netloc = f"{user}:***@{host}" + (f":{parts.port}" if parts.port is not None else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))

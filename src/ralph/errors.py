"""The root of Ralph's exceptions: every error a user can act on is a RalphError.

Each area has its own subclass (StoreError, ConfigError, TrackerError, ...); the faces turn
any RalphError into one clear line (CLI) or a JSON-RPC error, never a traceback.
"""

from __future__ import annotations


class RalphError(Exception):
    """Base of every error Ralph raises on purpose."""

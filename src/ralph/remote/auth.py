"""Who may talk to `ralph serve`: the token, the browser's origin, the address it binds.

Every HTTP request and WebSocket upgrade carries the token as `Authorization: Bearer TOKEN`
or, for browsers (which cannot set headers on a WebSocket), `?token=TOKEN`; it is compared
in constant time. A browser's upgrade from another origin than the server's own is refused
unless allowed (`--allow-origin`): a page elsewhere must not drive the agent with a token it
found. Without a token (`--no-auth`) the server may listen on loopback only.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from ralph.errors import RalphError

TOKEN_BYTES = 32


class ServeError(RalphError):
    """`ralph serve` cannot start as asked (the message says why)."""


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_binding(host: str, token: str | None) -> None:
    """Refuse to serve without a token anywhere but on loopback."""
    if token is None and not is_loopback(host):
        raise ServeError(f"--no-auth is refused with --host {host}: without a token anyone "
                         "who can reach that address could run agents here (use it on "
                         "127.0.0.1 only)")


def given_token(headers: Mapping[str, str], query: Mapping[str, str]) -> str | None:
    """The token a request carries: its Bearer header, else its `token` query parameter."""
    scheme, _, value = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return query.get("token") or None


def token_ok(given: str | None, token: str | None) -> bool:
    """`given` is the server's token (compared in constant time); any request passes when
    the server has none (`--no-auth`)."""
    if token is None:
        return True
    if given is None:
        return False
    return hmac.compare_digest(given.encode(), token.encode())


def origin_ok(origin: str | None, host: str | None, allowed: Iterable[str]) -> bool:
    """A WebSocket upgrade's `Origin` is the server's own (`http(s)://` + the Host it was
    asked under), one of `allowed`, or absent (not a browser: a native client)."""
    if origin is None:
        return True
    if origin in allowed:
        return True
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and host is not None and parts.netloc == host

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


def own_hosts(host: str, port: int) -> frozenset[str] | None:
    """The `Host` values a server bound to `host`:`port` answers to when that is a loopback
    address: its own and the loopback names, so that a page of another name resolving to
    127.0.0.1 (DNS rebinding) is refused. None (any) for another address: there the token
    is required anyway, and the machine's names cannot be known."""
    if not is_loopback(host):
        return None
    names = {host.strip("[]"), "127.0.0.1", "localhost", "::1"}
    return frozenset(f"[{n}]:{port}" if ":" in n else f"{n}:{port}" for n in names)


def normal_origin(origin: str) -> str:
    """`scheme://host:port` in lower case, without a trailing slash (as browsers send it)."""
    return origin.strip().rstrip("/").lower()


def origin_ok(origin: str | None, hosts: Iterable[str], allowed: Iterable[str]) -> bool:
    """A WebSocket upgrade's `Origin` is one of the server's own (`http(s)://` + one of
    `hosts`), one of `allowed`, or absent (not a browser: a native client)."""
    if origin is None:
        return True
    if normal_origin(origin) in {normal_origin(a) for a in allowed}:
        return True
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and parts.netloc.lower() in {
        h.lower() for h in hosts}

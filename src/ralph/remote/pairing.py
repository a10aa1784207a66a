"""What a phone needs to connect, as the document's QR code carries it: the connection JSON
`{ws, http, session, repo, token}` (`session` names this server's run), and that JSON as a
QR code drawn with text characters for a terminal."""

from __future__ import annotations

import contextlib
import io
import json
import socket
import uuid

import segno

WILDCARD_HOSTS = ("0.0.0.0", "::", "[::]", "")


def reachable_host(host: str) -> str:
    """The address a phone can use for a server listening on `host`: for a wildcard one,
    the address of the interface this machine would reach the network through (a UDP
    socket's `connect` picks it and sends nothing), else its first address that is not a
    loopback one, else its name."""
    if host not in WILDCARD_HOSTS:
        return host
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        udp.connect(("192.0.2.1", 9))  # TEST-NET-1: only the route is looked up
        address = str(udp.getsockname()[0])
        if not address.startswith("127.") and address != "0.0.0.0":
            return address
    name = socket.gethostname()
    try:
        infos = socket.getaddrinfo(name, None, socket.AF_INET, socket.SOCK_STREAM)
    except OSError:
        return name
    for info in infos:
        address = str(info[4][0])
        if not address.startswith("127."):
            return address
    return name


def connection_info(ws_url: str, http_url: str, repo: str, token: str | None,
                    session: str | None = None) -> dict[str, str]:
    info = {"ws": ws_url, "http": http_url, "session": session or uuid.uuid4().hex[:12],
            "repo": repo}
    if token is not None:
        info["token"] = token
    return info


def qr_text(data: str) -> str:
    """`data` as a QR code of text (two rows a line, with its quiet zone), for a terminal
    whose font draws block characters."""
    buffer = io.StringIO()
    segno.make(data, error="l", micro=False).terminal(out=buffer, compact=True, border=2)
    return buffer.getvalue()


def connection_qr(info: dict[str, str]) -> str:
    return qr_text(json.dumps(info, separators=(",", ":")))

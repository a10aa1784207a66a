"""JSON-RPC 2.0: a typed method registry, a transport-free dispatcher, NDJSON framing, OpenRPC.

    from ralph.rpc import Dispatcher, Registry, stdio_server

    registry = Registry(title="Ralph bridge", version="1.0.0")

    @registry.method("ping", result=PingResult)
    async def ping() -> PingResult: ...

    server, writer = await stdio_server(Dispatcher(registry))
    await server.serve()

The dispatcher implements all of JSON-RPC 2.0 (the specification's error codes, batches,
notifications) without knowing the transport; a connection runs requests concurrently, a
bounded number in flight, and writes one message at a time; NDJSON framing takes input lines
of up to 64 MiB by default.
"""

from ralph.rpc.codes import (
    APPLICATION_ERROR,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    RATE_LIMITED,
)
from ralph.rpc.connection import Connection
from ralph.rpc.dispatcher import Dispatcher
from ralph.rpc.errors import RpcError
from ralph.rpc.method import Handler, RawJson
from ralph.rpc.ndjson import NdjsonServer
from ralph.rpc.pipeserver import NdjsonPipeServer
from ralph.rpc.registry import Registry
from ralph.rpc.stdio import LineServer, fd_server, stdio_server
from ralph.rpc.streams import (
    FdWriter,
    SupportsWrite,
    Writer,
    fd_streams,
    stdio_streams,
    take_stdio,
)

__all__ = [
    "APPLICATION_ERROR",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "RATE_LIMITED",
    "Connection",
    "Dispatcher",
    "FdWriter",
    "Handler",
    "LineServer",
    "NdjsonPipeServer",
    "NdjsonServer",
    "RawJson",
    "Registry",
    "RpcError",
    "SupportsWrite",
    "Writer",
    "fd_server",
    "fd_streams",
    "stdio_server",
    "stdio_streams",
    "take_stdio",
]

"""The fake model server: a ThreadingHTTPServer on 127.0.0.1 answering from a scenario."""

from __future__ import annotations

import contextlib
import gzip
import json
import re
import socket
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO
from urllib.parse import parse_qs, urlsplit

from ralph.testing.fakellm import tools
from ralph.testing.fakellm.anthropic import AnthropicWire
from ralph.testing.fakellm.chat import ChatWire
from ralph.testing.fakellm.common import ModelTurn, RequestView, ToolCall, Wire
from ralph.testing.fakellm.gemini import GeminiWire
from ralph.testing.fakellm.responses import ResponsesWire
from ralph.testing.fakellm.scenario import ErrorSpec, Match, Reply, Rule, Scenario
from ralph.testing.fakellm.sse import StreamWriter, read_chunked

MAX_BODY = 64 * 1024 * 1024
_SECRET_HEADERS = {"authorization", "x-api-key", "x-goog-api-key", "api-key", "cookie"}
_GEMINI_PATH = re.compile(r"/models/([^/:]+):(streamGenerateContent|generateContent|countTokens)$")
_WIRES: dict[str, Wire] = {
    "responses": ResponsesWire(),
    "chat": ChatWire(),
    "anthropic": AnthropicWire(),
    "gemini": GeminiWire(),
}


@dataclass(frozen=True)
class LoggedRequest:
    """One request the server received and what it answered."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-case names; secrets redacted
    body: Any  # the parsed JSON body, or the raw text when it is not JSON, or None
    protocol: str | None  # responses, chat, anthropic, gemini; None for unknown paths
    endpoint: str  # e.g. "responses", "count_tokens", "not_found"
    stream: bool
    rule: str | None  # the rule that answered, "default", or None (no model reply)
    reply: str  # text, tool_call, error, hang, count_tokens, not_found, bad_request
    status: int
    model: str
    tools: tuple[str, ...]
    last_user_text: str | None
    last_is_tool_result: bool
    tool_result_text: str | None
    tool_calls: tuple[str, ...]  # names of the tools the reply called
    timestamp: float

    def offers(self, tool: str) -> bool:
        return tool in self.tools

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _redact(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    out = {}
    for name, value in headers:
        key = name.lower()
        out[key] = "<redacted>" if key in _SECRET_HEADERS else value
    return out


def example_for_schema(schema: Any) -> Any:
    """A small value that satisfies a JSON schema (for structured-output side calls)."""
    if not isinstance(schema, dict):
        return "OK"
    if schema.get("enum"):
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return example_for_schema(schema[key][0])
    kind = str(schema.get("type", "object")).lower()
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {name: example_for_schema(sub) for name, sub in props.items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 0
    if kind == "boolean":
        return False
    return "OK"


def _matches(match: Match, view: RequestView) -> bool:
    user = view.last_user_text
    if match.user is not None and (user is None or match.user not in user):
        return False
    if match.user_regex is not None and (user is None or not match.user_regex.search(user)):
        return False
    if match.tool_result is not None:
        if isinstance(match.tool_result, bool):
            if view.last_is_tool_result != match.tool_result:
                return False
        elif not view.last_is_tool_result or match.tool_result not in (
            view.tool_result_text or ""
        ):
            return False
    if match.tool_result_regex is not None and (
        not view.last_is_tool_result
        or not match.tool_result_regex.search(view.tool_result_text or "")
    ):
        return False
    if match.has_tools is not None and bool(view.tools) != match.has_tools:
        return False
    if match.offers is not None and view.tool(match.offers) is None:
        return False
    if match.protocol is not None and match.protocol != view.protocol:
        return False
    return match.model is None or match.model in view.model


def _callable(reply: Reply, view: RequestView) -> bool:
    if reply.write_file is not None:
        return tools.can_call(view, write=True)
    if reply.shell is not None:
        return tools.can_call(view, write=False)
    if reply.tool is not None:
        return view.tool(reply.tool[0]) is not None
    return True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, fake: FakeLLM, address: tuple[str, int]) -> None:
        self.fake = fake
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fakellm/1"
    timeout = 600  # an idle keep-alive connection is dropped after this long
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        return

    def setup(self) -> None:
        super().setup()
        self.server.fake._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.fake._track(self.connection, add=False)

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def do_PATCH(self) -> None:
        self._handle()

    def do_HEAD(self) -> None:
        self._handle()

    # -- reading -----------------------------------------------------------------------------

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            raw = read_chunked(self.rfile, MAX_BODY)  # type: ignore[arg-type]
        else:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                raise ValueError("request body too large")
            raw = self.rfile.read(length) if length > 0 else b""
        encoding = self.headers.get("Content-Encoding", "").lower()
        if encoding == "gzip":
            raw = gzip.decompress(raw)
        elif encoding == "deflate":
            raw = zlib.decompress(raw)
        elif encoding not in ("", "identity"):
            raise ValueError(f"cannot decode Content-Encoding {encoding}")
        return raw

    def _handle(self) -> None:
        fake = self.server.fake
        split = urlsplit(self.path)
        path, query = split.path, parse_qs(split.query)
        headers = _redact(self.headers.items())
        try:
            raw = self._read_body()
        except (ValueError, OSError, EOFError, zlib.error) as exc:
            fake._log(self._entry(path, query, headers, None, reply="bad_request", status=400))
            self.close_connection = True  # the body may be left unread on the connection
            self._json(400, {"error": {"message": f"fakellm: {exc}", "type": "bad_request"}})
            return
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except (ValueError, UnicodeDecodeError):
                body = raw.decode("utf-8", "replace")
        protocol, endpoint, model = self._route(path)
        if protocol is None or self.command not in ("POST", "PUT"):
            fake._log(self._entry(path, query, headers, body, reply="not_found", status=404,
                                  endpoint="not_found"))
            self._json(404, {"error": {"message": f"fakellm: no route for {self.command} {path}",
                                       "type": "not_found", "code": "not_found"}})
            return
        wire = _WIRES[protocol]
        if endpoint == "count_tokens":
            answer = (GeminiWire.count_tokens(body) if protocol == "gemini"
                      else AnthropicWire.count_tokens(body))
            fake._log(self._entry(path, query, headers, body, protocol=protocol,
                                  endpoint=endpoint, reply="count_tokens", status=200,
                                  model=model))
            self._json(200, answer)
            return
        view = wire.view(body, endpoint == "stream")
        if model and not view.model:
            view = replace(view, model=model)
        rule, reply = fake._choose(view)
        calls: tuple[ToolCall, ...] = ()
        text = reply.text
        if reply.kind == "tool_call":
            call = self._tool_call(reply, view)
            calls = (call,) if call is not None else ()
        elif reply.kind == "text" and rule == "default" and view.json_schema is not None:
            text = json.dumps(example_for_schema(view.json_schema))
        status = reply.error.status if reply.error is not None and not (
            reply.error.in_stream and view.stream) else 200
        fake._log(self._entry(
            path, query, headers, body, protocol=protocol, endpoint=endpoint, view=view,
            rule=rule, reply=reply.kind, status=0 if reply.kind == "hang" else status,
            tool_calls=tuple(c.name for c in calls),
        ))
        if reply.delay and fake._stopping.wait(reply.delay):
            self.close_connection = True
            return
        if reply.hang is not None:
            fake._stopping.wait(reply.hang)
            self.close_connection = True
            return
        if reply.error is not None:
            self._error(wire, reply.error, view)
            return
        turn = ModelTurn(
            text=text if text is not None or calls else "",
            tool_calls=calls,
            usage=reply.usage or fake.scenario.usage,
            model=view.model or "fake-model",
        )
        if view.stream:
            self._stream(wire.events(turn))
        else:
            self._json(200, wire.body(turn))

    @staticmethod
    def _route(path: str) -> tuple[str | None, str, str]:
        """(protocol, endpoint, model from the path) for a request path."""
        if path.endswith("/responses"):
            return "responses", "responses", ""
        if path.endswith("/chat/completions"):
            return "chat", "chat", ""
        if path.endswith("/messages/count_tokens"):
            return "anthropic", "count_tokens", ""
        if path.endswith("/messages"):
            return "anthropic", "messages", ""
        found = _GEMINI_PATH.search(path)
        if found:
            action = found.group(2)
            endpoint = {"streamGenerateContent": "stream", "generateContent": "generate",
                        "countTokens": "count_tokens"}[action]
            return "gemini", endpoint, found.group(1)
        return None, "not_found", ""

    @staticmethod
    def _tool_call(reply: Reply, view: RequestView) -> ToolCall | None:
        if reply.write_file is not None:
            return tools.write_file_call(view, *reply.write_file)
        if reply.shell is not None:
            return tools.shell_call(view, reply.shell)
        if reply.tool is not None:
            return tools.raw_call(view, *reply.tool)
        return None

    def _entry(self, path: str, query: dict[str, list[str]], headers: dict[str, str], body: Any,
               *, reply: str, status: int, protocol: str | None = None,
               endpoint: str = "not_found", view: RequestView | None = None,
               rule: str | None = None, model: str = "",
               tool_calls: tuple[str, ...] = ()) -> LoggedRequest:
        return LoggedRequest(
            method=self.command, path=path, query=query, headers=headers, body=body,
            protocol=protocol, endpoint=endpoint,
            stream=view.stream if view else False, rule=rule, reply=reply, status=status,
            model=view.model if view else model,
            tools=tuple(view.tool_names) if view else (),
            last_user_text=view.last_user_text if view else None,
            last_is_tool_result=view.last_is_tool_result if view else False,
            tool_result_text=view.tool_result_text if view else None,
            tool_calls=tool_calls, timestamp=time.time(),
        )

    # -- writing -----------------------------------------------------------------------------

    def _json(self, status: int, payload: Any, extra: dict[str, str] | None = None) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (extra or {}).items():
                self.send_header(name, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            self.wfile.flush()
        except OSError:
            self.close_connection = True

    def _stream(self, events: Iterable[bytes]) -> None:
        chunked = self.request_version != "HTTP/1.0"
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            if chunked:
                self.send_header("Transfer-Encoding", "chunked")
            else:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            writer = StreamWriter(self.wfile, chunked=chunked)  # type: ignore[arg-type]
            for event in events:
                writer.write(event)
            writer.close()
        except OSError:
            self.close_connection = True

    def _error(self, wire: Wire, error: ErrorSpec, view: RequestView) -> None:
        error = replace(error, model=view.model or "fake-model")
        if error.in_stream and view.stream:
            self._stream(wire.stream_error(error, view.model or "fake-model"))
            return
        extra = dict(error.headers)
        if error.retry_after is not None:
            seconds = error.retry_after
            extra.setdefault("Retry-After", str(int(seconds)) if float(seconds).is_integer()
                             else str(seconds))
            extra.setdefault("retry-after-ms", str(int(seconds * 1000)))
        self._json(error.status, wire.error_body(error), extra)


@dataclass
class _State:
    used: Counter[str] = field(default_factory=Counter)
    log: list[LoggedRequest] = field(default_factory=list)


class FakeLLM:
    """A fake model server on 127.0.0.1 that answers from a scenario and logs every request.

    >>> with FakeLLM({"default": {"text": "hi"}}) as server:   # doctest: +SKIP
    ...     base = server.url + "/v1"
    """

    def __init__(self, scenario: Scenario | dict[str, Any] | str | Path, port: int = 0, *,
                 host: str = "127.0.0.1", log_path: str | Path | None = None) -> None:
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError("the fake model server only listens on the loopback interface")
        self.scenario = Scenario.load(scenario)
        self._host = host
        self._port = port
        self._lock = threading.Lock()
        self._state = _State()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()
        self._log_path = Path(log_path) if log_path is not None else None
        self._log_file: TextIO | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> FakeLLM:
        if self._server is not None:
            return self
        self._stopping.clear()
        if self._log_path is not None:
            self._log_file = self._log_path.open("a", encoding="utf-8")
        self._server = _Server(self, (self._host, self._port))
        self._port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name=f"fakellm:{self._port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        with self._lock:
            if self._log_file is not None:
                self._log_file.close()
                self._log_file = None

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the fake model server is not running")
        return self._port

    @property
    def url(self) -> str:
        """`http://127.0.0.1:PORT`, without a trailing slash or a `/v1`."""
        return f"http://{self._host}:{self.port}"

    @property
    def v1_url(self) -> str:
        """`http://127.0.0.1:PORT/v1`: the base URL OpenAI-style clients (codex, opencode) take.
        claude (`ANTHROPIC_BASE_URL`) and gemini (`GOOGLE_GEMINI_BASE_URL`) take `url`."""
        return f"{self.url}/v1"

    # -- the request log ---------------------------------------------------------------------

    @property
    def requests(self) -> list[LoggedRequest]:
        """A snapshot of every request so far, oldest first."""
        with self._lock:
            return list(self._state.log)

    def clear(self) -> None:
        """Forget the logged requests and the rules' use counts."""
        with self._lock:
            self._state = _State()

    def matching(self, *, protocol: str | None = None, endpoint: str | None = None,
                 rule: str | None = None, offers: str | None = None, user: str | None = None,
                 reply: str | None = None, path: str | None = None) -> list[LoggedRequest]:
        """The logged requests that satisfy every given condition (`user`: a substring)."""
        return [
            entry for entry in self.requests
            if (protocol is None or entry.protocol == protocol)
            and (endpoint is None or entry.endpoint == endpoint)
            and (rule is None or entry.rule == rule)
            and (offers is None or entry.offers(offers))
            and (user is None or user in (entry.last_user_text or ""))
            and (reply is None or entry.reply == reply)
            and (path is None or entry.path == path)
        ]

    def offered(self, tool: str) -> bool:
        """Whether some request offered the tool with this name."""
        return bool(self.matching(offers=tool))

    def assert_offered(self, tool: str) -> LoggedRequest:
        """The first request that offered `tool`; an AssertionError listing what was offered."""
        found = self.matching(offers=tool)
        if not found:
            seen = sorted({name for entry in self.requests for name in entry.tools})
            raise AssertionError(f"no request offered tool {tool!r}; offered: {seen}")
        return found[0]

    def wait_for(self, predicate: Callable[[LoggedRequest], bool],
                 timeout: float = 10.0) -> LoggedRequest:
        """The first logged request satisfying `predicate`, waiting up to `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            for entry in self.requests:
                if predicate(entry):
                    return entry
            if time.monotonic() >= deadline:
                raise TimeoutError(f"no matching request within {timeout}s")
            time.sleep(0.02)

    # -- used by the handler -----------------------------------------------------------------

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def _log(self, entry: LoggedRequest) -> None:
        with self._lock:
            self._state.log.append(entry)
            if self._log_file is not None:
                self._log_file.write(json.dumps(entry.to_dict(), ensure_ascii=False) + "\n")
                self._log_file.flush()

    def _choose(self, view: RequestView) -> tuple[str, Reply]:
        with self._lock:
            used = self._state.used
            for rule in self.scenario.rules:
                reply = self._reply_for(rule, view)
                if reply is None:
                    continue
                if rule.times is not None and used[rule.name] >= rule.times:
                    continue
                used[rule.name] += 1
                return rule.name, reply
        return "default", self.scenario.default

    @staticmethod
    def _reply_for(rule: Rule, view: RequestView) -> Reply | None:
        if not _matches(rule.match, view):
            return None
        reply = rule.replies[min(view.model_turns, len(rule.replies) - 1)]
        return reply if _callable(reply, view) else None

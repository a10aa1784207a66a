"""A stand-in for `opencode serve` (1.18.33's HTTP API, as far as
ralph.approvals.opencode_run uses it; the shapes are those of tests/approvals/recorded).

    fake_opencode.py serve --port P --hostname 127.0.0.1 [--print-logs] [--log-level L]

Every request needs Basic auth `opencode:$OPENCODE_SERVER_PASSWORD` and `?directory=` this
process's cwd. A prompt's turn: the "model" runs the shell command FAKE_OPENCODE_COMMAND
(default `echo hi > proof.txt`) through the bash tool, asking first if the session's rules
say so, then says "finished". FAKE_OPENCODE_MODE changes that: `exit` (exits 3 at once,
saying why on stderr), `error` (the session reports an error), `child` (the model starts
a subagent first, with the task tool, asking for it if the session's rules say so; the
subagent's session runs the command), `die` (exits once the permission is asked), `plain-reject` (a
rejection ends the turn, as opencode's does without a message). Each request is appended to
FAKE_OPENCODE_RECORD as a JSON line {method, path, query, body}; the pid goes to
FAKE_OPENCODE_PIDFILE.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import queue
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

MODE = os.environ.get("FAKE_OPENCODE_MODE", "tool")
COMMAND = os.environ.get("FAKE_OPENCODE_COMMAND", "echo hi > proof.txt")
AUTH = "Basic " + base64.b64encode(
    f"opencode:{os.environ.get('OPENCODE_SERVER_PASSWORD', '')}".encode()).decode()
REJECTED = "The user rejected permission to use this specific tool call"
ids = itertools.count(1)
lock = threading.Lock()
subscribers: list[queue.Queue[dict[str, Any]]] = []
sessions: dict[str, dict[str, Any]] = {
    "ses_existing": {"id": "ses_existing", "title": "earlier",
                     "permission": [{"permission": "question", "pattern": "*",
                                     "action": "deny"}]}}
replies: dict[str, queue.Queue[dict[str, Any]]] = {}


def publish(kind: str, **properties: Any) -> None:
    with lock:
        for sub in subscribers:
            sub.put({"id": f"evt_{next(ids)}", "type": kind, "properties": properties})


def new_id(prefix: str) -> str:
    return f"{prefix}_{next(ids):06d}"


def part(session: str, kind: str, **fields: Any) -> dict[str, Any]:
    return {"id": fields.pop("id", None) or new_id("prt"), "sessionID": session,
            "messageID": "msg_1", "type": kind, **fields}


def asks(session: dict[str, Any], permission: str) -> bool:
    """opencode's rule: the last matching rule of the session's decides (config: allow)."""
    action = "allow"
    for rule in session["permission"]:
        if rule["permission"] in ("*", permission) and rule["pattern"] == "*":
            action = rule["action"]
    return action == "ask"


def task_call(session: dict[str, Any]) -> bool:
    """The task tool's call (a subagent); False if it was rejected."""
    sid = session["id"]
    tool = part(sid, "tool", tool="task", callID="call_fake_task",
                state={"status": "running", "input": {"prompt": "do it"}})
    publish("message.part.updated", sessionID=sid, part=tool)
    if not asks(session, "task"):
        return True
    request = new_id("per")
    replies[request] = queue.Queue()
    publish("permission.asked", id=request, sessionID=sid, permission="task",
            patterns=["general"], metadata={"description": "a subagent"}, always=["*"],
            tool={"messageID": "msg_1", "callID": "call_fake_task"})
    reply = replies[request].get(timeout=120)
    publish("permission.replied", sessionID=sid, requestID=request, reply=reply["reply"])
    if reply["reply"] == "reject":
        tool["state"] = {"status": "error", "input": {"prompt": "do it"},
                         "error": f"{REJECTED} with the following feedback: "
                                  f"{reply.get('message')}"}
        publish("message.part.updated", sessionID=sid, part=tool)
        return False
    return True


def tool_call(session: dict[str, Any], cwd: str) -> bool:
    """The bash tool's call; False if a plain rejection ended the turn."""
    sid = session["id"]
    tool = part(sid, "tool", tool="bash", callID="call_fake_1",
                state={"status": "running", "input": {"command": COMMAND}})
    publish("message.part.updated", sessionID=sid, part=tool)
    if asks(session, "bash"):
        request = new_id("per")
        replies[request] = queue.Queue()
        publish("permission.asked", id=request, sessionID=sid, permission="bash",
                patterns=[COMMAND], metadata={"command": COMMAND}, always=["echo *"],
                tool={"messageID": "msg_1", "callID": "call_fake_1"})
        if MODE == "die":
            time.sleep(0.2)
            os._exit(7)
        reply = replies[request].get(timeout=120)
        publish("permission.replied", sessionID=sid, requestID=request, reply=reply["reply"])
        if reply["reply"] == "reject":
            message = reply.get("message")
            error = (f"{REJECTED} with the following feedback: {message}" if message
                     else f"{REJECTED}.")
            tool["state"] = {"status": "error", "input": {"command": COMMAND}, "error": error}
            publish("message.part.updated", sessionID=sid, part=tool)
            return bool(message)
    subprocess.run(["sh", "-c", COMMAND], cwd=cwd, check=False, timeout=30)
    tool["state"] = {"status": "completed", "input": {"command": COMMAND},
                     "output": "(no output)", "title": COMMAND, "metadata": {}}
    publish("message.part.updated", sessionID=sid, part=tool)
    return True


def turn(session: dict[str, Any], cwd: str) -> None:
    sid = session["id"]
    publish("session.status", sessionID=sid, status={"type": "busy"})
    if MODE == "error":
        publish("session.error", sessionID=sid,
                error={"name": "UnknownError", "data": {"message": "Model not found: fake/x."}})
        publish("session.status", sessionID=sid, status={"type": "idle"})
        return
    publish("message.part.updated", sessionID=sid, part=part(sid, "step-start"))
    if MODE == "child" and not task_call(session):
        going = True  # the model goes on without a subagent
    elif MODE == "child":
        child = {"id": new_id("ses"), "parentID": sid, "title": "a subagent",
                 "permission": [{"permission": "task", "pattern": "*", "action": "deny"}]}
        sessions[child["id"]] = child
        publish("session.created", sessionID=child["id"], info=child)
        time.sleep(0.5)  # the bridge's PATCH makes it ask
        going = tool_call(child, cwd)
    else:
        going = tool_call(session, cwd)
    if going:
        text = part(sid, "text", text="", time={"start": 1})
        publish("message.part.updated", sessionID=sid, part=text)
        done = {**text, "text": "finished", "time": {"start": 1, "end": 2}}
        publish("message.part.updated", sessionID=sid, part=done)
        publish("message.part.updated", sessionID=sid, part=done)  # the same part again
        publish("message.part.updated", sessionID=sid, part=part(
            sid, "reasoning", text="thought", time={"start": 1, "end": 2}))
    publish("message.part.updated", sessionID=sid, part=part(
        sid, "step-finish", reason="stop", cost=0.25, tokens={
            "input": 100, "output": 20, "reasoning": 5, "cache": {"read": 10, "write": 0}}))
    publish("session.status", sessionID=sid, status={"type": "idle"})


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def do_GET(self) -> None:
        self.route("GET")

    def do_POST(self) -> None:
        self.route("POST")

    def do_PATCH(self) -> None:
        self.route("PATCH")

    def reply(self, status: int, body: Any = None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        if data:
            self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(data)

    def route(self, method: str) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        record = os.environ.get("FAKE_OPENCODE_RECORD")
        if record:
            with lock, open(record, "a") as out:
                out.write(json.dumps({"method": method, "path": url.path, "query": query,
                                      "body": body}) + "\n")
        if self.headers.get("Authorization") != AUTH:
            self.reply(401)
            return
        if query.get("directory") != [os.getcwd()]:
            self.reply(400, {"name": "BadRequest", "data": {"message": "wrong directory"}})
            return
        parts = url.path.strip("/").split("/")
        if url.path == "/global/health":
            self.reply(200, {"healthy": True, "version": "fake"})
        elif url.path == "/event":
            self.events()
        elif url.path == "/session" and method == "POST":
            made = {"id": new_id("ses"), "title": (body or {}).get("title", "New session"),
                    "permission": list((body or {}).get("permission", []))}
            sessions[made["id"]] = made
            self.reply(200, made)
        elif parts[0] == "session" and len(parts) == 2:
            session = sessions.get(parts[1])
            if session is None:
                self.reply(404, {"name": "NotFoundError",
                                 "data": {"message": f"Session not found: {parts[1]}"}})
                return
            if method == "PATCH":  # opencode appends the rules given
                session["permission"] += (body or {}).get("permission", [])
            self.reply(200, session)
        elif parts[0] == "session" and parts[2:] == ["prompt_async"]:
            threading.Thread(target=turn, args=(sessions[parts[1]], os.getcwd()),
                             daemon=True).start()
            self.reply(204)
        elif parts[0] == "permission" and parts[2:] == ["reply"]:
            if parts[1] not in replies:
                self.reply(404, {"_tag": "PermissionNotFoundError", "message": "not found"})
                return
            replies[parts[1]].put(body or {})
            self.reply(200, True)
        else:
            self.reply(404, {"name": "NotFoundError", "data": {"message": url.path}})

    def events(self) -> None:
        sub: queue.Queue[dict[str, Any]] = queue.Queue()
        with lock:
            subscribers.append(sub)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        sub.put({"id": "evt_0", "type": "server.connected", "properties": {}})
        try:
            while True:
                try:
                    event = sub.get(timeout=1)
                except queue.Empty:
                    event = {"type": "server.heartbeat", "properties": {}}
                data = f"data: {json.dumps(event)}\n\n".encode()
                # split across chunks: a reader must not count on one event per chunk
                for piece in (data[:7], data[7:]):
                    self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            with lock:
                subscribers.remove(sub)
            self.close_connection = True


def main(argv: list[str]) -> int:
    pidfile = os.environ.get("FAKE_OPENCODE_PIDFILE")
    if pidfile:
        with open(pidfile, "w") as out:
            out.write(str(os.getpid()))
    if MODE == "exit":
        print("fake opencode: cannot start (on purpose)", file=sys.stderr)
        return 3
    if argv[:1] != ["serve"] or "--port" not in argv:
        print(f"fake opencode: unexpected arguments {argv}", file=sys.stderr)
        return 2
    port = int(argv[argv.index("--port") + 1])
    if "--print-logs" in argv:
        print("INFO fake log line on stderr", file=sys.stderr, flush=True)
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print(f"opencode server listening on http://127.0.0.1:{port}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

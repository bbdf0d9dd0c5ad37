"""The `user` MCP server, a simulated user: one tool, `ask_user(question)`, answered
deterministically from a persona file (PERSONA, default /srv/persona.json: keyword rules,
no model), over the Model Context Protocol, in Python's standard library only.

Transports, both on port 8000 (MCP_PORT):
- streamable HTTP: `POST /mcp` takes one JSON-RPC 2.0 message (or a list) and answers
  `application/json`; a notification or a response answers 202; `GET /mcp` is 405;
- SSE: `GET /sse` is an event stream whose first event (`endpoint`) names
  `/messages?session_id=ID`; `POST` there answers 202 and the reply comes on the stream.
`GET /health` answers `ok`. Methods: `initialize` (the client's protocolVersion when it is
one this server speaks, else the newest), `ping`, `tools/list`, `tools/call`; any
`notifications/*` is taken. One line per JSON-RPC request goes to stderr:
`mcp: METHOD`, and for a tool call `mcp: tools/call NAME ARGUMENTS-AS-JSON`.

`GET /transcript` answers every question asked so far, with the topic it matched and the
answer given (JSON): the state a grader reads to see that the user was asked.
The protocol part is the same as the `warehouse` server's of harbor-mcp-tools-001.
"""

import http.server
import json
import os
import queue
import re
import sys
import threading
import urllib.parse
import uuid

VERSIONS = ["2025-06-18", "2025-03-26", "2024-11-05"]
SERVER = {"name": "user", "version": "1.0.0"}
SESSIONS = {}  # SSE session id -> queue of messages for its stream
LOCK = threading.Lock()


def log(line):
    print("mcp: " + line, file=sys.stderr, flush=True)


def text_result(value, error=False):
    return {"content": [{"type": "text", "text": json.dumps(value)}], "isError": error}


def handle(msg):
    """The reply to one JSON-RPC message, or None for a notification or a response."""
    if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
        return {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "invalid request"}}
    method, mid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    if method is None:
        return None  # a response to something this server never asks
    if method == "tools/call":
        log("tools/call %s %s" % (params.get("name"), json.dumps(params.get("arguments") or {}, sort_keys=True)))
    else:
        log(method)
    if "id" not in msg:
        return None
    ok = lambda result: {"jsonrpc": "2.0", "id": mid, "result": result}
    if method == "initialize":
        asked = params.get("protocolVersion")
        return ok({
            "protocolVersion": asked if asked in VERSIONS else VERSIONS[0],
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": SERVER,
        })
    if method == "ping":
        return ok({})
    if method == "tools/list":
        return ok({"tools": [dict(spec, name=name) for name, (spec, _) in TOOLS.items()]})
    if method == "tools/call":
        tool = TOOLS.get(params.get("name"))
        if tool is None:
            return {"jsonrpc": "2.0", "id": mid, "error": {"code": -32602, "message": "unknown tool: %s" % params.get("name")}}
        try:
            return ok(tool[1](params.get("arguments") or {}))
        except (KeyError, TypeError, ValueError) as e:
            return ok(text_result({"error": str(e)}, error=True))
    return {"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "method not found: %s" % method}}


def handle_all(body):
    """The replies to a message or a list of them; None when nothing answers."""
    try:
        msg = json.loads(body)
    except ValueError:
        return {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}}
    if isinstance(msg, list):
        replies = [r for r in map(handle, msg) if r is not None]
        return replies or None
    return handle(msg)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def send(self, code, body=b"", kind="text/plain", headers=()):
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def body(self):
        size = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(min(size, 1 << 20))

    def do_GET(self):
        path = urllib.parse.urlsplit(self.path).path
        if path == "/health":
            return self.send(200, b"ok")
        if path == "/sse":
            return self.stream()
        if path == "/mcp":
            return self.send(405, b"no server-initiated stream; POST to /mcp", headers=[("Allow", "POST")])
        return self.extra_get(path)

    def extra_get(self, path):
        if path == "/transcript":
            with LOCK:
                body = json.dumps({"asked": TRANSCRIPT}, indent=1).encode()
            return self.send(200, body, "application/json")
        return self.send(404, b"not found")

    def do_DELETE(self):
        self.send(405, b"sessions end on their own", headers=[("Allow", "POST")])

    def do_POST(self):
        url = urllib.parse.urlsplit(self.path)
        # The body is read whatever the answer: one left unread on a kept-alive connection
        # would be taken for the next request (opencode POSTs to /sse before it GETs it).
        data = self.body()
        if url.path == "/mcp":
            reply = handle_all(data)
            if reply is None:
                return self.send(202)
            first = reply[0] if isinstance(reply, list) else reply
            headers = []
            if "serverInfo" in (first.get("result") or {}):  # the answer to initialize
                headers.append(("Mcp-Session-Id", uuid.uuid4().hex))
            return self.send(200, json.dumps(reply).encode(), "application/json", headers)
        if url.path == "/messages":
            sid = urllib.parse.parse_qs(url.query).get("session_id", [""])[0]
            with LOCK:
                q = SESSIONS.get(sid)
            if q is None:
                return self.send(404, b"no such session")
            reply = handle_all(data)
            # The reply goes on the stream first: a client may close this request's
            # connection as soon as it has sent it.
            if reply is not None:
                q.put(reply)
            try:
                self.send(202, b"Accepted")
            except OSError:
                self.close_connection = True
            return None
        return self.send(404, b"not found")

    def stream(self):
        sid = uuid.uuid4().hex
        q = queue.Queue()
        with LOCK:
            SESSIONS[sid] = q
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            self.event("endpoint", "/messages?session_id=" + sid)
            while True:
                try:
                    self.event("message", json.dumps(q.get(timeout=15)))
                except queue.Empty:
                    self.wfile.write(b": keep-alive\n\n")
                    self.wfile.flush()
        except OSError:
            pass  # the client went away
        finally:
            with LOCK:
                SESSIONS.pop(sid, None)

    def event(self, name, data):
        self.wfile.write(("event: %s\ndata: %s\n\n" % (name, data)).encode())
        self.wfile.flush()

    def log_message(self, fmt, *args):
        pass  # one line per JSON-RPC request (`log`) is the log


# ---- The simulated user: keyword rules of the persona file. ----

with open(os.environ.get("PERSONA", "/srv/persona.json")) as f:
    PERSONA = json.load(f)
TRANSCRIPT = []  # {"question", "topic", "answer"}, in the order asked


def ask_user(args):
    question = str(args["question"])
    # A keyword matches where a word of the question starts ("frequen": "frequently").
    words = " " + " ".join(re.findall(r"[a-z0-9]+", question.lower()))
    topics = [r for r in PERSONA["rules"] if any(" " + k in words for k in r["keywords"])]
    if topics:
        topic = ",".join(r["topic"] for r in topics)
        answer = " ".join(r["answer"] for r in topics)
    else:
        topic, answer = None, PERSONA["otherwise"]
    with LOCK:
        TRANSCRIPT.append({"question": question, "topic": topic, "answer": answer})
    return {"content": [{"type": "text", "text": answer}], "isError": False}


TOOLS = {
    "ask_user": ({
        "description": "Ask the user (%s) a question in plain words; their answer." % PERSONA["who"],
        "inputSchema": {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]},
    }, ask_user),
}

if __name__ == "__main__":
    port = int(os.environ.get("MCP_PORT", "8000"))
    server = http.server.ThreadingHTTPServer(("0.0.0.0", port), Handler)
    server.daemon_threads = True
    log("listening on :%d (POST /mcp, GET /sse)" % port)
    server.serve_forever()

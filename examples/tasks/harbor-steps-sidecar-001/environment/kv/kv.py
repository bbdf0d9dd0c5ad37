"""A REST key-value store: GET /health, GET /keys/NAME, PUT /keys/NAME (the body is the
value). KV_SEED (`name=value,name=value`) gives its first keys. It logs every request."""

import http.server
import os
import sys

DATA = dict(kv.split("=", 1) for kv in os.environ.get("KV_SEED", "").split(",") if "=" in kv)


class Handler(http.server.BaseHTTPRequestHandler):
    def _send(self, code, body=b""):
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/health":
            return self._send(200, b"ok")
        name = self.path.removeprefix("/keys/")
        if self.path.startswith("/keys/") and name in DATA:
            return self._send(200, DATA[name].encode())
        return self._send(404, b"no such key")

    def do_PUT(self):
        if not self.path.startswith("/keys/"):
            return self._send(404, b"no such path")
        size = int(self.headers.get("Content-Length", "0"))
        if size > 4096:
            return self._send(413, b"too large")
        DATA[self.path.removeprefix("/keys/")] = self.rfile.read(size).decode().strip()
        return self._send(204)

    def log_message(self, fmt, *args):
        sys.stderr.write("kv: " + (fmt % args) + "\n")


http.server.ThreadingHTTPServer(("0.0.0.0", 8080), Handler).serve_forever()

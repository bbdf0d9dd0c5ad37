"""minisrv: serves static files from the folder its configuration names.

Reads /etc/minisrv/minisrv.ini on every request ([server] root, index), so a fixed
configuration takes effect without a restart. Started by the image's entrypoint.
"""

import configparser
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CONFIG = "/etc/minisrv/minisrv.ini"


def settings():
    c = configparser.ConfigParser()
    c.read(CONFIG)
    s = c["server"] if c.has_section("server") else {}
    return s.get("root", "/var/www"), s.get("index", "index.html")


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        root, index = settings()
        rel = self.path.split("?", 1)[0].lstrip("/") or index
        path = os.path.realpath(os.path.join(root, rel))
        if not path.startswith(os.path.realpath(root) + os.sep) or not os.path.isfile(path):
            self.send_response(404)
            self.end_headers()
            self.wfile.write(b"not found\n")
            return
        with open(path, "rb") as f:
            data = f.read()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", 8081), Handler).serve_forever()

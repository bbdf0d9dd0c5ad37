#!/bin/bash
# Reference solution: a standard-library HTTP server, started in the background.
set -euo pipefail
cat > /app/server.py <<'PY'
import csv
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def items():
    with open("/app/inventory.csv", newline="", encoding="utf-8") as f:
        return [
            {"sku": r["sku"], "name": r["name"], "qty": int(r["qty"])}
            for r in csv.DictReader(f)
        ]


class Handler(BaseHTTPRequestHandler):
    def send(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/items":
            return self.send(200, items())
        if self.path.startswith("/items/"):
            sku = self.path[len("/items/"):]
            for item in items():
                if item["sku"] == sku:
                    return self.send(200, item)
        self.send(404, {"error": "not found"})

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", 8000), Handler).serve_forever()
PY
nohup setsid python3 /app/server.py >/tmp/server.log 2>&1 < /dev/null &
# Wait until it answers.
for _ in $(seq 1 50); do
    python3 -c 'import socket; socket.create_connection(("127.0.0.1", 8000), timeout=1)' 2>/dev/null && exit 0
    sleep 0.1
done
echo "the server did not start" >&2
exit 1

#!/bin/bash
# Reference solution: a threaded socketserver, started in the background.
set -euo pipefail
mkdir -p /app
cat > /app/kv.py <<'PY'
import socketserver
import threading

store = {}
lock = threading.Lock()


def answer(line):
    cmd, _, rest = line.partition(" ")
    with lock:
        if cmd == "SET" and " " in rest:
            key, _, value = rest.partition(" ")
            store[key] = value
            return "OK"
        if cmd == "GET" and rest:
            return store.get(rest, "NIL")
        if cmd == "DEL" and rest:
            return "1" if store.pop(rest, None) is not None else "0"
        if cmd == "COUNT" and not rest:
            return str(len(store))
    return "ERR"


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        for raw in self.rfile:
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            self.wfile.write((answer(line) + "\n").encode())


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


Server(("127.0.0.1", 7000), Handler).serve_forever()
PY
nohup setsid python3 /app/kv.py >/tmp/kv.log 2>&1 < /dev/null &
for _ in $(seq 1 50); do
    python3 -c 'import socket; socket.create_connection(("127.0.0.1", 7000), timeout=1)' 2>/dev/null && exit 0
    sleep 0.1
done
echo "the service did not start" >&2
exit 1

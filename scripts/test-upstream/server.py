"""The test upstream host's server: HTTP on ports 80 and 8080, HTTPS on 443 and 8443 (the
certificate and key given), run inside the network namespace a test makes
(worker/tests/common/upstream.rs, scripts/test_upstream.py). WWW/HOST/PATH is served as it
is for http(s)://HOST/PATH; a path starting /fail gets a 503; any other path 100000 bytes
of `x`. Prints "ready" once it listens.

    server.py CERT KEY WWW
"""
import http.server, os, ssl, sys, threading
WWW = sys.argv[3]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        host = (self.headers.get("Host") or "").split(":")[0].lower()
        path = os.path.normpath(os.path.join(WWW, host, self.path.split("?")[0].lstrip("/")))
        if path.startswith(WWW + "/") and os.path.isfile(path):
            with open(path, "rb") as f:
                body = f.read()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if self.path.startswith("/fail"):
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b"x" * 100000
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
servers = []
for port, tls in [(8080, False), (80, False), (8443, True), (443, True)]:
    s = http.server.ThreadingHTTPServer(("0.0.0.0", port), H)
    if tls:
        s.socket = ctx.wrap_socket(s.socket, server_side=True)
    servers.append(s)
for s in servers[1:]:
    threading.Thread(target=s.serve_forever, daemon=True).start()
print("ready", flush=True)
servers[0].serve_forever()

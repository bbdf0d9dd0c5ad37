"""Queries the minisrv the image's entrypoint started on 127.0.0.1:8081."""

import http.client
import time
from pathlib import Path

SITE = Path("/var/www/site")


# The first request waits up to 10 s for the server; the others do not wait.
_waited = False


def get(path):
    global _waited
    deadline = time.monotonic() + (0 if _waited else 10)
    _waited = True
    while True:
        try:
            c = http.client.HTTPConnection("127.0.0.1", 8081, timeout=5)
            c.request("GET", path)
            r = c.getresponse()
            return r.status, r.read()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_index():
    status, body = get("/")
    assert status == 200
    assert body == (SITE / "index.html").read_bytes()


def test_about():
    status, body = get("/about.html")
    assert status == 200
    assert body == (SITE / "about.html").read_bytes()


def test_the_site_is_unchanged():
    assert "Harbour Café" in (SITE / "index.html").read_text(encoding="utf-8")


def test_outside_the_site_is_not_served():
    status, _ = get("/../../etc/passwd")
    assert status == 404

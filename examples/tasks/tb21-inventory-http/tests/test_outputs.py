"""Queries the inventory server the agent left running on 127.0.0.1:8000."""

import http.client
import json
import time

# The first request waits up to 5 s for the server; the others do not wait.
_waited = False


def get(path):
    global _waited
    deadline = time.monotonic() + (0 if _waited else 5)
    _waited = True
    while True:
        try:
            c = http.client.HTTPConnection("127.0.0.1", 8000, timeout=5)
            c.request("GET", path)
            r = c.getresponse()
            return r.status, r.getheader("Content-Type", ""), r.read()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_all_items_in_file_order():
    status, ctype, body = get("/items")
    assert status == 200
    assert ctype.startswith("application/json")
    assert json.loads(body) == [
        {"sku": "A-1", "name": "hex bolt", "qty": 120},
        {"sku": "B-2", "name": "wing nut", "qty": 0},
        {"sku": "C-3", "name": "washer", "qty": 75},
        {"sku": "D-4", "name": "lock washer", "qty": 12},
    ]


def test_one_item():
    status, _, body = get("/items/C-3")
    assert status == 200
    assert json.loads(body) == {"sku": "C-3", "name": "washer", "qty": 75}


def test_unknown_sku_is_404():
    status, _, body = get("/items/Z-9")
    assert status == 404
    assert json.loads(body) == {"error": "not found"}


def test_other_paths_are_404():
    status, _, _ = get("/")
    assert status == 404


def test_the_file_is_read_when_answering():
    path = "/app/inventory.csv"
    with open(path, encoding="utf-8") as f:
        before = f.read()
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write("E-5,spring,3\n")
        status, _, body = get("/items/E-5")
        assert status == 200
        assert json.loads(body)["qty"] == 3
    finally:
        with open(path, "w", encoding="utf-8") as f:
            f.write(before)

"""Checks /app/service.json against /app/service.ini."""

import json
from pathlib import Path

OUT = Path("/app/service.json")


def doc():
    return json.loads(OUT.read_text(encoding="utf-8"))


def test_sections():
    assert sorted(doc()) == ["server", "worker"]


def test_server():
    assert doc()["server"] == {
        "host": "0.0.0.0",
        "port": 8080,
        "tls": False,
        "log_level": "info",
        "retries": 3,
    }


def test_worker_overrides_the_default():
    assert doc()["worker"] == {
        "threads": 4,
        "retries": 5,
        "queue": "jobs-main",
        "log_level": "info",
    }

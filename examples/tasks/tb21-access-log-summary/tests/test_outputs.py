"""Checks /app/summary.json against /app/access.log."""

import json
from pathlib import Path

SUMMARY = Path("/app/summary.json")


def summary():
    return json.loads(SUMMARY.read_text(encoding="utf-8"))


def test_summary_exists():
    assert SUMMARY.is_file()


def test_total_counts_only_requests():
    assert summary()["total"] == 9


def test_by_status():
    assert summary()["by_status"] == {"200": 5, "302": 1, "304": 1, "404": 1, "500": 1}


def test_top_path_ties_go_to_the_first_in_order():
    # /index.html and /about.html are asked 3 times each.
    assert summary()["top_path"] == "/about.html"

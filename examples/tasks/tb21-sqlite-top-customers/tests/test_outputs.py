"""Checks /app/shop.db and /app/top_customers.csv."""

import csv
import sqlite3
from pathlib import Path


def test_database_loaded():
    db = sqlite3.connect("file:/app/shop.db?mode=ro", uri=True)
    try:
        assert db.execute("SELECT COUNT(*) FROM customers").fetchone() == (5,)
        assert db.execute("SELECT COUNT(*) FROM orders").fetchone() == (10,)
    finally:
        db.close()


def test_top_three_by_paid_orders():
    with Path("/app/top_customers.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    assert rows == [
        ["customer", "total"],
        ["Cog Works", "200.00"],
        ["Acme Ltd", "170.50"],
        ["Dynamo Inc", "165.50"],
    ]

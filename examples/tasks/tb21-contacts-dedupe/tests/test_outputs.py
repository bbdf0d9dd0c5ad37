"""Checks /app/contacts_clean.csv against /app/contacts.csv."""

import csv
import hashlib
from pathlib import Path

CLEAN = Path("/app/contacts_clean.csv")
ORIGINAL_SHA256 = "5de73b640e497b192741676b8d5b0e5500df02136d097ffca8092ee5be2c3517"


def rows():
    with CLEAN.open(newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def test_header_kept():
    assert rows()[0] == ["name", "email", "phone"]


def test_first_of_each_email_in_order():
    assert [r[0] for r in rows()[1:]] == [
        "Ada Lovelace",
        "Grace Hopper",
        "Linus Torvalds",
        "Ritchie, Dennis",
        "No Email",
        "Also No Email",
    ]


def test_rows_kept_as_written():
    assert rows()[1] == ["Ada Lovelace", "ada@example.com", "555-0100"]
    assert rows()[3] == ["Linus Torvalds", "linus@example.com", ""]


def test_original_unchanged():
    digest = hashlib.sha256(Path("/app/contacts.csv").read_bytes()).hexdigest()
    assert digest == ORIGINAL_SHA256

"""Runs /app/backup.sh on a tree with spaces and subfolders."""

import os
import subprocess
import tempfile
from pathlib import Path

FILES = {
    "top.txt": "top\n",
    "notes/2024 plans.txt": "plans\n",
    "my docs/deep/er/x.txt": "x\n",
    "skip.md": "no\n",
    "my docs/image.png": "no\n",
}


def backup():
    base = Path(tempfile.mkdtemp())
    src, dest, cwd = base / "source dir", base / "dest dir", base / "cwd"
    for rel, text in FILES.items():
        p = src / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    dest.mkdir()
    cwd.mkdir()
    (cwd / "decoy.txt").write_text("decoy\n")
    r = subprocess.run(
        ["bash", "/app/backup.sh", str(src), str(dest)],
        cwd=cwd, capture_output=True, text=True, timeout=60,
    )
    return r, dest


def copied(dest):
    return sorted(
        str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()
    )


def test_exits_zero():
    r, _ = backup()
    assert r.returncode == 0, r.stderr


def test_every_txt_file_and_nothing_else():
    _, dest = backup()
    assert copied(dest) == sorted(k for k in FILES if k.endswith(".txt"))


def test_contents():
    _, dest = backup()
    for rel, text in FILES.items():
        if rel.endswith(".txt"):
            assert (dest / rel).read_text() == text

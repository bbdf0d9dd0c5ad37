"""Clones the repository the agent published with git daemon on 127.0.0.1:9418."""

import os
import subprocess
import tempfile
import time
from pathlib import Path

PROJECT = Path("/app/project")


def git(*args, cwd=None):
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0", GIT_CONFIG_NOSYSTEM="1")
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


# The first clone waits up to 5 s for the daemon; the others do not wait.
_waited = False


def clone():
    global _waited
    dest = Path(tempfile.mkdtemp()) / "calc"
    deadline = time.monotonic() + (0 if _waited else 5)
    _waited = True
    while True:
        r = git("clone", "-q", "git://127.0.0.1:9418/calc.git", str(dest))
        if r.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert r.returncode == 0, r.stderr
    return dest


def test_one_commit_on_main():
    dest = clone()
    assert git("rev-parse", "--abbrev-ref", "HEAD", cwd=dest).stdout.strip() == "main"
    log = git("log", "--format=%s", "main", cwd=dest).stdout.splitlines()
    assert log == ["initial import"]


def test_every_file_of_the_folder():
    dest = clone()
    tracked = sorted(git("ls-files", cwd=dest).stdout.splitlines())
    want = sorted(
        str(p.relative_to(PROJECT)) for p in PROJECT.rglob("*") if p.is_file()
    )
    assert tracked == want
    for name in want:
        assert (dest / name).read_bytes() == (PROJECT / name).read_bytes()


def test_push_is_refused():
    dest = clone()
    (dest / "extra.txt").write_text("x\n")
    git("add", "extra.txt", cwd=dest)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "x", cwd=dest)
    r = git("push", "origin", "main", cwd=dest)
    assert r.returncode != 0

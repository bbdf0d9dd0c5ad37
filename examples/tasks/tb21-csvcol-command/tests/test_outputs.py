"""Runs the csvcol command the agent installed in /usr/local/bin."""

import os
import shutil
import subprocess
import tempfile

DATA = 'id,name,note\n1,Ada,"said ""hi"", then left"\n2,Grace,"two\nlines"\n3,Linus,\n'


def run(*args, stdin=None):
    cwd = tempfile.mkdtemp()
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
    return subprocess.run(
        ["csvcol", *args], input=stdin, cwd=cwd, env=env,
        capture_output=True, text=True, timeout=30,
    )


def data_file():
    fd, path = tempfile.mkstemp(suffix=".csv")
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
        f.write(DATA)
    return path


def test_installed_on_path():
    assert shutil.which("csvcol", path="/usr/local/bin") == "/usr/local/bin/csvcol"
    assert os.access("/usr/local/bin/csvcol", os.X_OK)


def test_a_column_from_a_file():
    r = run("name", data_file())
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Ada\nGrace\nLinus\n"


def test_quoted_fields():
    r = run("note", data_file())
    assert r.returncode == 0, r.stderr
    assert r.stdout == 'said "hi", then left\ntwo\nlines\n\n'


def test_standard_input():
    r = run("id", stdin=DATA)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "1\n2\n3\n"


def test_unknown_column():
    r = run("email", data_file())
    assert r.returncode == 1
    assert r.stdout == ""
    assert "email" in r.stderr

"""Checks git's system-wide configuration as a user with an empty home sees it."""

import os
import subprocess
import tempfile


def git(*args, cwd=None):
    home = tempfile.mkdtemp()
    env = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": home,
        "XDG_CONFIG_HOME": os.path.join(home, ".config"),
    }
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=30
    )


def test_new_repositories_start_on_trunk():
    repo = tempfile.mkdtemp()
    assert git("init", "-q", repo).returncode == 0
    head = git("symbolic-ref", "HEAD", cwd=repo).stdout.strip()
    assert head == "refs/heads/trunk"


def test_commits_are_made_as_the_build_bot():
    repo = tempfile.mkdtemp()
    git("init", "-q", repo)
    with open(os.path.join(repo, "f.txt"), "w") as f:
        f.write("x\n")
    git("add", "f.txt", cwd=repo)
    r = git("commit", "-q", "-m", "first", cwd=repo)
    assert r.returncode == 0, r.stderr
    who = git("log", "-1", "--format=%an <%ae>", cwd=repo).stdout.strip()
    assert who == "Build Bot <build-bot@example.invalid>"


def test_st_alias():
    repo = tempfile.mkdtemp()
    git("init", "-q", repo)
    with open(os.path.join(repo, "new.txt"), "w") as f:
        f.write("x\n")
    r = git("st", cwd=repo)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].startswith("## ")
    assert "?? new.txt" in r.stdout


def test_pull_rebases():
    r = git("config", "--system", "--get", "pull.rebase")
    assert r.stdout.strip() == "true"


def test_set_system_wide():
    for key in ("init.defaultBranch", "alias.st", "user.name", "user.email"):
        assert git("config", "--system", "--get", key).returncode == 0, key

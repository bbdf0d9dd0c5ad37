"""The test upstream host for scripts run by hand (scripts/harbor-corpus): "astral.sh" and
"github.com" serving uv's installer and release, as worker/tests/common/upstream.rs and
installers.rs serve them to the tests, from the same files (scripts/test-upstream/).

A network namespace `akbhU<pid>` linked to this machine's own by a veth pair
(`akbhH<pid>`, 10.216.<pid % 250>.1 here, .2 there), so nothing of the machine's network
changes and Docker's containers reach it through the host as they reach any address; a
CA made here with openssl (one day), a server certificate for the names; the server
(scripts/test-upstream/server.py) in the namespace. `close()` removes it all.

    with Upstream(work, "0.9.7") as u:
        u.addr, u.ca, u.names
"""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = ROOT / "scripts" / "test-upstream"
NAMES = ("astral.sh", "github.com")
TARBALL = "uv-x86_64-unknown-linux-gnu.tar.gz"


def _run(*args):
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"test_upstream: failed: {' '.join(args)}: {p.stderr.strip()}")


def uv_tarball(version):
    """uv's release tarball for `version`, built once from PyPI's wheel under
    $CARGO_TARGET_DIR/akbench-test-uv (where the tests keep it)."""
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    out = target / "akbench-test-uv" / version / TARBALL
    if not out.is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        _run(sys.executable, str(HERE / "uv-release.py"), version, str(out))
    return out


class Upstream:
    def __init__(self, work, uv_version):
        pid = os.getpid()
        self.ns, self.link = f"akbhU{pid}", f"akbhH{pid}"
        net = f"10.216.{pid % 250}"
        self.addr = f"{net}.2"
        self.range = "10.216.0.0/16"
        self.names = NAMES
        self.dir = Path(work) / "upstream"
        self.dir.mkdir(parents=True)
        self.server = None
        tarball = uv_tarball(uv_version)
        _run("ip", "netns", "add", self.ns)
        try:
            _run("ip", "link", "add", self.link, "type", "veth", "peer", "name", "eth0",
                 "netns", self.ns)
            _run("ip", "addr", "add", f"{net}.1/24", "dev", self.link)
            _run("ip", "link", "set", self.link, "up")
            for args in (["link", "set", "lo", "up"],
                         ["addr", "add", f"{self.addr}/24", "dev", "eth0"],
                         ["link", "set", "eth0", "up"]):
                _run("ip", "-n", self.ns, *args)
            self._certificates()
            www = self.dir / "www"
            install = www / "astral.sh" / "uv" / uv_version / "install.sh"
            release = www / "github.com/astral-sh/uv/releases/download" / uv_version / TARBALL
            for p in (install, release):
                p.parent.mkdir(parents=True, exist_ok=True)
            url = f"https://github.com/astral-sh/uv/releases/download/{uv_version}/{TARBALL}"
            install.write_text(
                (HERE / "uv-install.sh").read_text()
                .replace("@VERSION@", uv_version).replace("@URL@", url)
            )
            release.write_bytes(tarball.read_bytes())
            self.server = subprocess.Popen(
                ["ip", "netns", "exec", self.ns, sys.executable, str(HERE / "server.py"),
                 str(self.dir / "cert.pem"), str(self.dir / "key.pem"), str(www)],
                stdout=subprocess.PIPE, text=True,
            )
            line = self.server.stdout.readline().strip()
            if line != "ready":
                sys.exit(f"test_upstream: failed: the server did not start: {line!r}")
        except BaseException:
            self.close()
            raise

    def _certificates(self):
        d = self.dir
        _run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
             "-keyout", str(d / "ca.key"), "-out", str(d / "ca.pem"),
             "-subj", "/CN=akbench test upstream CA",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        _run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d / "key.pem"),
             "-out", str(d / "server.csr"), "-subj", f"/CN={NAMES[0]}")
        ext = d / "server.ext"
        ext.write_text(
            "subjectAltName=" + ",".join(f"DNS:{n}" for n in NAMES) + "\n"
            "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
        )
        _run("openssl", "x509", "-req", "-in", str(d / "server.csr"), "-CA", str(d / "ca.pem"),
             "-CAkey", str(d / "ca.key"), "-CAcreateserial", "-days", "1",
             "-out", str(d / "cert.pem"), "-extfile", str(ext))

    @property
    def ca(self):
        return self.dir / "ca.pem"

    def close(self):
        if self.server:
            self.server.kill()
            self.server.wait()
            self.server = None
        subprocess.run(["ip", "netns", "del", self.ns], capture_output=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

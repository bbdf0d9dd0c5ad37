"""uv's release tarball (uv-x86_64-unknown-linux-gnu.tar.gz, as github.com serves it) built
from PyPI's `uv` wheel for VERSION, its sha256 checked against PyPI's, written atomically
to OUT. PyPI is reachable from the machines the tests run on; github.com is not.

    uv-release.py VERSION OUT
"""
import hashlib, io, json, os, sys, tarfile, urllib.request, zipfile
v, out = sys.argv[1], sys.argv[2]
req = urllib.request.Request("https://pypi.org/simple/uv/",
                             headers={"Accept": "application/vnd.pypi.simple.v1+json"})
files = json.load(urllib.request.urlopen(req, timeout=120))["files"]
name = "uv-%s-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl" % v
f = next(x for x in files if x["filename"] == name)
data = urllib.request.urlopen(f["url"], timeout=600).read()
if hashlib.sha256(data).hexdigest() != f["hashes"]["sha256"]:
    sys.exit("digest mismatch for " + name)
z = zipfile.ZipFile(io.BytesIO(data))
tmp = "%s.%d" % (out, os.getpid())
with tarfile.open(tmp, "w:gz", compresslevel=1) as t:
    for prog in ["uv", "uvx"]:
        body = z.read("uv-%s.data/scripts/%s" % (v, prog))
        info = tarfile.TarInfo("uv-x86_64-unknown-linux-gnu/" + prog)
        info.size = len(body)
        info.mode = 0o755
        t.addfile(info, io.BytesIO(body))
os.rename(tmp, out)

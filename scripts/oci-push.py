#!/usr/bin/env python3
"""Pushes an OCI image made of layer files to a registry (plain HTTP, loopback in tests).

Usage: oci-push.py REGISTRY REPOSITORY:TAG [--env K=V]... [--workdir DIR] [--user USER] [--entrypoint JSON]
                   [--mount-from REPOSITORY] LAYER[:gzip|:zstd|:tar]...

Each LAYER is a tar file, uploaded as it is with the media type its suffix names (default:
tar); with --mount-from, a layer that repository of the registry already holds is mounted
from it instead (the registry API's cross-repository mount), not uploaded again. The configuration gets the environment, working directory and user given. Prints
the manifest's digest (sha256:...). Standard library only.
"""
import hashlib
import json
import sys
import urllib.request

MEDIA = {
    "tar": "application/vnd.oci.image.layer.v1.tar",
    "gzip": "application/vnd.oci.image.layer.v1.tar+gzip",
    "zstd": "application/vnd.oci.image.layer.v1.tar+zstd",
}


def request(method, url, data=None, headers=None):
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    with urllib.request.urlopen(req) as r:
        return r.status, dict(r.headers), r.read()


def push_blob(base, repo, path=None, data=None, mount_from=None):
    h = hashlib.sha256()
    size = 0
    if data is None:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
                size += len(chunk)
    else:
        h.update(data)
        size = len(data)
    digest = "sha256:" + h.hexdigest()
    try:
        request("HEAD", f"{base}/v2/{repo}/blobs/{digest}")
        return digest, size
    except urllib.error.HTTPError:
        pass
    if mount_from:
        status, _, _ = request(
            "POST", f"{base}/v2/{repo}/blobs/uploads/?mount={digest}&from={mount_from}"
        )
        if status == 201:
            return digest, size
        # 202: the registry started an upload instead (it has no such blob there): upload.
    _, headers, _ = request("POST", f"{base}/v2/{repo}/blobs/uploads/")
    loc = headers["Location"]
    if loc.startswith("/"):
        loc = base + loc
    sep = "&" if "?" in loc else "?"
    body = data if data is not None else open(path, "rb")
    request(
        "PUT",
        f"{loc}{sep}digest={digest}",
        data=body,
        headers={"Content-Type": "application/octet-stream", "Content-Length": str(size)},
    )
    return digest, size


def main(argv):
    registry, ref = argv[0], argv[1]
    repo, tag = ref.rsplit(":", 1)
    env, workdir, user, entrypoint, mount_from, layers = [], None, None, None, None, []
    args = iter(argv[2:])
    for a in args:
        if a == "--env":
            env.append(next(args))
        elif a == "--workdir":
            workdir = next(args)
        elif a == "--user":
            user = next(args)
        elif a == "--entrypoint":
            entrypoint = json.loads(next(args))
        elif a == "--mount-from":
            mount_from = next(args)
        else:
            path, _, kind = a.partition(":")
            layers.append((path, kind or "tar"))
    base = f"http://{registry}"
    descs, diff_ids = [], []
    for path, kind in layers:
        digest, size = push_blob(base, repo, path=path, mount_from=mount_from)
        descs.append({"mediaType": MEDIA[kind], "digest": digest, "size": size})
        diff_ids.append(digest)  # exact for tar layers; informative for compressed ones
    config = {
        "architecture": {"x86_64": "amd64", "aarch64": "arm64"}.get(
            __import__("platform").machine(), "amd64"
        ),
        "os": "linux",
        "config": {"Env": env or ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]},
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }
    if workdir:
        config["config"]["WorkingDir"] = workdir
    if user:
        config["config"]["User"] = user
    if entrypoint:
        config["config"]["Entrypoint"] = entrypoint
    cbytes = json.dumps(config, sort_keys=True).encode()
    cdigest, csize = push_blob(base, repo, data=cbytes)
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cdigest, "size": csize},
        "layers": descs,
    }
    mbytes = json.dumps(manifest, sort_keys=True).encode()
    request(
        "PUT",
        f"{base}/v2/{repo}/manifests/{tag}",
        data=mbytes,
        headers={"Content-Type": "application/vnd.oci.image.manifest.v1+json"},
    )
    print("sha256:" + hashlib.sha256(mbytes).hexdigest())


if __name__ == "__main__":
    main(sys.argv[1:])

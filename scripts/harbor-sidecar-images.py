#!/usr/bin/env python3
"""Builds, pushes and pins the sidecar images of a copy of an example task (scripts/check-harbor-export).

    harbor-sidecar-images.py TASK_COPY REGISTRY

TASK_COPY is a copy of an example task in Harbor's layout with
environment/docker-compose.yaml (its sidecar services). The examples pin each service's
image by a placeholder digest, `127.0.0.1:5000/REPO@sha256:000...` (64 zeros), and build it
from environment/SERVICE/ (docs/tasks.md, "Sidecar services"). For every such service this
builds that folder with `docker build` (its Dockerfile's FROM names the test base image,
which the caller has tagged locally under the name the examples use), pushes it to
REGISTRY (`127.0.0.1:PORT`, the caller's loopback docker-registry) as `REPO:check`, and
writes the pushed digest in place of the placeholder: `REGISTRY/REPO@sha256:...`, as the
worker tests do (worker/tests/common/registry.rs). The compose file's text is edited, not
re-serialised: nothing else of it changes. A service pinned otherwise is left alone; one
pinned by the placeholder without environment/SERVICE/Dockerfile is an error, and so is a
compose file with no service so pinned (nothing would be checked).

Prints one line per service; exit 0, or 1 with the problem.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

PLACEHOLDER = re.compile(r"^127\.0\.0\.1:5000/(?P<repo>[a-z0-9._/-]+)@sha256:0{64}$")


def docker(*args: str) -> str:
    run = subprocess.run(["docker", *args], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"harbor-sidecar-images: failed: docker {' '.join(args)}: {run.stderr.strip()[-2000:]}")
    return run.stdout


def main() -> int:
    task, registry = Path(sys.argv[1]), sys.argv[2]
    compose_path = task / "environment" / "docker-compose.yaml"
    text = compose_path.read_text()
    services = (yaml.safe_load(text) or {}).get("services") or {}
    pinned = 0
    for name, service in services.items():
        m = PLACEHOLDER.match(str((service or {}).get("image", "")))
        if name == "main" or not m:
            continue
        folder = task / "environment" / name
        if not (folder / "Dockerfile").is_file():
            sys.exit(f"harbor-sidecar-images: {compose_path}: service {name} is pinned by the placeholder but {folder}/Dockerfile does not exist")
        tag = f"{registry}/{m['repo']}:check"
        docker("build", "-q", "-t", tag, str(folder))
        docker("push", "-q", tag)
        digests = json.loads(docker("image", "inspect", "--format", "{{json .RepoDigests}}", tag))
        ref = next((d for d in digests if d.startswith(f"{registry}/{m['repo']}@sha256:")), None)
        if ref is None:
            sys.exit(f"harbor-sidecar-images: pushed {tag} but docker lists no digest for it: {digests}")
        text = text.replace(m.group(0), ref)
        pinned += 1
        print(f"  {task.name}: service {name} built from environment/{name}/, pinned {ref}")
    if pinned == 0:
        sys.exit(f"harbor-sidecar-images: {compose_path}: no service pinned by the placeholder (nothing to build)")
    compose_path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

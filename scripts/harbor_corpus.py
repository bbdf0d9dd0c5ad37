#!/usr/bin/env python3
"""Runs the Terminal-Bench 2.1 corpus (examples/tasks/tb21-*) with Harbor 0.25 and with
akbench, side by side (scripts/harbor-corpus; docs/harbor.md, "The corpus side by side").

    harbor_corpus.py --akbench BIN --harbor HARBOR_CLI --work DIR [--jobs N]

Every task's image is built as ctl/tests/tb21_corpus.rs builds it (the Debian test image of
scripts/build-test-image, plus one layer of its Dockerfile's COPY lines and its ENTRYPOINT)
and pushed to a docker-registry on loopback; the tasks' registry address is rewritten to it.
Harbor runs its `oracle` and `nop` agents on every task with its own docker environment
(harbor_compose1: docker-compose 1.29 in place of Compose V2, as scripts/check-harbor-export
does); akbench runs `oracle` and `noop` in one `sweep --local` under `container`. Prints a
Markdown table: per task, each harness's verdicts and seconds per trial. Exit 1 when a
verdict differs from the expected one (oracle solves, nop does not) on either side.

The graders fetch curl (Debian's real mirror), uv (its installer from "astral.sh", its
release from "github.com": the test host of scripts/test_upstream.py, with its own CA) and
pytest (the real PyPI) while grading. Both harnesses are told of the test host as a machine
is told of an internal mirror, nothing in the tasks changes: Harbor through a compose file
given with its own `--extra-docker-compose` (`extra_hosts` for the two names, a CA bundle
with the test CA and `SSL_CERT_FILE`/`CURL_CA_BUNDLE` pointing at it); akbench through
`AKBENCH_EGRESS_HOSTS`, `AKBENCH_EGRESS_OPEN_RANGES` and `AKBENCH_EGRESS_UPSTREAM_CA`, with
its egress cache on (`AKBENCH_EGRESS_CACHE_DIR`, empty when the sweep starts).
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import time
import urllib.request
from datetime import datetime
from pathlib import Path

from test_upstream import Upstream

ROOT = Path(__file__).resolve().parent.parent
BASE = "127.0.0.1:5000/akbench/base:bookworm"
UV_VERSION = "0.9.7"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_registry(work):
    port = free_port()
    (work / "registry").mkdir()
    cfg = work / "registry.yml"
    cfg.write_text(
        f"version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {work / 'registry'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
    )
    proc = subprocess.Popen(
        ["/usr/bin/docker-registry", "serve", str(cfg)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(600):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=5)
            return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    sys.exit("harbor_corpus: failed to start the loopback registry")


def push_task(task, addr, base_tar, work):
    """Rewrites the task's registry address and pushes the image its Dockerfile describes."""
    toml = task / "task.toml"
    text = toml.read_text().replace("127.0.0.1:5000", addr)
    toml.write_text(text)
    df = task / "environment" / "Dockerfile"
    lines = df.read_text().splitlines()
    df.write_text("\n".join(lines).replace("127.0.0.1:5000", addr) + "\n")
    image = next(
        l.split('"')[1] for l in text.splitlines() if l.startswith("docker_image = ")
    )
    workdir, copies, entrypoint = "/", [], None
    for line in lines:
        words = line.strip().split(" ", 1)
        if not words[0] or words[0].startswith("#"):
            continue
        if words[0] == "FROM":
            assert words[1] == BASE, (task, line)
        elif words[0] == "WORKDIR":
            workdir = words[1]
        elif words[0] == "COPY":
            src, dst = words[1].split(" ")
            copies.append((task / "environment" / src, dst))
        elif words[0] == "ENTRYPOINT":
            entrypoint = words[1]
        else:
            sys.exit(f"harbor_corpus: {df}: `{words[0]}` is not built here")
    layer = work / f"{task.name}.tar"
    with tarfile.open(layer, "w") as tar:
        def add_dir(path):
            info = tarfile.TarInfo(path)
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            tar.addfile(info)
        seen = set()
        def parents(path):
            parts = path.strip("/").split("/")
            for i in range(1, len(parts) + 1):
                p = "/".join(parts[:i])
                if p not in seen:
                    seen.add(p)
                    add_dir(p)
        parents(workdir)
        for src, dst in copies:
            parents(os.path.dirname(dst))
            info = tarfile.TarInfo(dst.strip("/"))
            data = src.read_bytes()
            info.size = len(data)
            info.mode = 0o644
            import io
            tar.addfile(info, io.BytesIO(data))
    repo_tag = image[len(addr) + 1 :]
    cmd = [
        sys.executable, str(ROOT / "scripts/oci-push.py"), addr, repo_tag,
        "--env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "--workdir", workdir,
    ]
    if entrypoint:
        cmd += ["--entrypoint", entrypoint]
    cmd += [f"{base_tar}:tar", f"{layer}:tar"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def seconds(a, b):
    parse = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00"))
    return (parse(b) - parse(a)).total_seconds()


def harbor_override(work, up):
    """The compose file Harbor is given: the test host's names and CA in the task's container."""
    bundle = work / "ca-bundle.pem"
    bundle.write_text(Path("/etc/ssl/certs/ca-certificates.crt").read_text() + up.ca.read_text())
    bundle.chmod(0o644)
    hosts = "".join(f'      - "{n}:{up.addr}"\n' for n in up.names)
    path = work / "harbor-upstream.yaml"
    path.write_text(
        "services:\n  main:\n    extra_hosts:\n" + hosts
        + f"    volumes:\n      - {bundle}:/etc/akbench-test-ca.pem:ro\n"
        + "    environment:\n      SSL_CERT_FILE: /etc/akbench-test-ca.pem\n"
        + "      CURL_CA_BUNDLE: /etc/akbench-test-ca.pem\n"
    )
    return path


def run_harbor(harbor, tasks, work, jobs, up):
    """{(task, agent): (reward or exception, seconds)} from Harbor's own trial results.

    A `no-network` task is left out: Harbor's docker environment driven through
    docker-compose 1.29 here refuses it (`network_mode='no-network' is not supported by
    EnvironmentType.DOCKER environment`), which would end the whole job."""
    out = {}
    online = work / "tasks-harbor"
    online.mkdir()
    for t in sorted(tasks.iterdir()):
        if 'network_mode = "no-network"' in (t / "task.toml").read_text():
            out[(t.name, "oracle")] = out[(t.name, "nop")] = ("refused here", 0.0)
        else:
            (online / t.name).symlink_to(t)
    tasks = online
    env = dict(os.environ, PYTHONPATH=str(ROOT / "scripts"), LITELLM_LOCAL_MODEL_COST_MAP="True")
    for agent in ("oracle", "nop"):
        jobs_dir = work / f"harbor-jobs-{agent}"
        log = work / f"harbor-{agent}.log"
        with log.open("w") as f:
            subprocess.run(
                [harbor, "run", "-p", str(tasks), "-a", agent, "--jobs-dir", str(jobs_dir),
                 "-n", str(jobs), "-e", "harbor_compose1:Compose1DockerEnvironment", "-y",
                 "--extra-docker-compose", str(harbor_override(work, up))],
                env=env, stdout=f, stderr=subprocess.STDOUT, cwd=work,
            )
        for path in sorted(jobs_dir.glob("*/*/result.json")):
            r = json.loads(path.read_text())
            if "task_name" not in r:
                continue
            exc = (r.get("exception_info") or {}).get("exception_type")
            rewards = (r.get("verifier_result") or {}).get("rewards") or {}
            verdict = exc or ("solved" if rewards.get("reward") == 1 else "not solved")
            out[(r["task_name"].split("/")[-1], agent)] = (
                verdict, seconds(r["started_at"], r["finished_at"])
            )
    return out


def run_akbench(akbench, tasks, work, jobs, addr, up):
    m = work / "experiment.yaml"
    m.write_text(
        "experiment: tb21-corpus\ntasks:\n  include: [\"tb21-*\"]\nagents:\n  conditions:\n"
        "    - descriptor: oracle\n    - descriptor: noop\nexecution:\n  runtime: container\n"
    )
    env = dict(
        os.environ,
        AKBENCH_INSECURE_REGISTRIES=addr,
        AKBENCH_EGRESS_HOSTS=",".join(f"{n}={up.addr}" for n in up.names),
        AKBENCH_EGRESS_OPEN_RANGES=up.range,
        AKBENCH_EGRESS_UPSTREAM_CA=str(up.ca),
        AKBENCH_EGRESS_CACHE_DIR=str(work / "egress-cache"),
    )
    started = time.monotonic()
    subprocess.run(
        [akbench, "sweep", str(m), "--local", "--json", "--jobs", str(jobs),
         "--tasks-root", str(tasks), "--agents-root", str(ROOT / "examples/agents"),
         "--store-root", str(work / "runs"), "--out", str(work / "out"),
         "--cache", str(work / "cache")],
        env=env, stdout=subprocess.DEVNULL, stderr=(work / "akbench.log").open("w"),
    )
    wall = time.monotonic() - started
    out = {}
    for path in (work / "out").rglob("run_record.json"):
        r = json.loads(path.read_text())
        ok = r["outcome"].get("ok")
        verdict = {True: "solved", False: "not solved"}.get(ok, r["outcome"]["state"])
        out[(r["task"]["release"]["id"], r["agent"]["name"])] = (
            verdict, seconds(r["started_at"], r["finished_at"])
        )
    return out, wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--akbench", required=True)
    ap.add_argument("--harbor", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--jobs", type=int, default=4)
    a = ap.parse_args()
    work = Path(a.work)
    tasks = work / "tasks"
    tasks.mkdir(parents=True)
    base_tar = subprocess.run(
        ["bash", str(ROOT / "scripts/build-test-image")], check=True, capture_output=True, text=True
    ).stdout.strip()
    registry, addr = start_registry(work)
    up = Upstream(work, UV_VERSION)
    try:
        names = sorted(p.name for p in (ROOT / "examples/tasks").glob("tb21-*"))
        for n in names:
            shutil.copytree(ROOT / "examples/tasks" / n, tasks / n)
            push_task(tasks / n, addr, base_tar, work)
        started = time.monotonic()
        hb = run_harbor(a.harbor, tasks, work, a.jobs, up)
        hb_wall = time.monotonic() - started
        ak, ak_wall = run_akbench(a.akbench, tasks, work, a.jobs, addr, up)
    finally:
        up.close()
        registry.kill()
    want = {"oracle": "solved", "nop": "not solved", "noop": "not solved"}
    for k, v in hb.items():
        if v[0] == "refused here" and k[1] == "oracle":
            print(f"note: {k[0]} not run by Harbor here (no-network refused by its docker environment)")
    bad = 0
    print("| task | Harbor oracle | Harbor nop | akbench oracle | akbench noop | Harbor s/trial | akbench s/trial |")
    print("|---|---|---|---|---|---|---|")
    for n in names:
        h = [hb.get((n, x), ("missing", 0.0)) for x in ("oracle", "nop")]
        k = [ak.get((n, x), ("missing", 0.0)) for x in ("oracle", "noop")]
        for (v, _), agent in zip(h + k, ("oracle", "nop", "oracle", "noop")):
            bad += v not in (want[agent], "refused here")
        hs = sum(s for _, s in h) / 2
        ks = sum(s for _, s in k) / 2
        hs = "" if h[0][0] == "refused here" else f"{hs:.1f}"
        print(f"| {n} | {h[0][0]} | {h[1][0]} | {k[0][0]} | {k[1][0]} | {hs} | {ks:.1f} |")
    hn = sum(1 for v in hb.values() if v[0] != "refused here")
    print(f"\n{a.jobs} trials at once: Harbor {hn} trials in {hb_wall:.0f} s, akbench {len(ak)} trials in {ak_wall:.0f} s (wall)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Compares the worker's security settings of the compose service and of every rendered
Kubernetes overlay: the settings scripts/compose-test proves the `sandbox` runtime works
under (deploy/README.md, "What a worker needs") must be the ones Kubernetes ships, no more.

usage: worker_security.py COMPOSE_CONFIG.yaml RENDERED_OVERLAY.yaml...
  COMPOSE_CONFIG.yaml: the output of `docker-compose -f deploy/compose/compose.yaml config`

Each side is reduced to the same facts: the user the container starts as, capabilities
dropped and added, no_new_privs, privileged, the seccomp profile, the AppArmor profile,
/proc masking, the cgroups, a read-only root file system. Exit 0 when every overlay equals
compose, 1 (printing the differences) otherwise.

Cgroups: compose runs on this cgroup v1 host and binds the node's memory, pids and cpu
folders; an overlay for cgroup v1 nodes (components/cgroup-v1) must bind the same. An
overlay for cgroup v2 nodes (the base) binds nothing under /sys/fs/cgroup (the pod's own
cgroup namespace, made writable by the entry point): its `cgroup` fact is "v2: own
namespace" and is the one fact not compared with compose.
"""
import os
import sys

import yaml

# The seccomp profile: deploy/security/worker-seccomp.json, installed on Kubernetes nodes
# as /var/lib/kubelet/seccomp/profiles/akbench-worker.json.
SECCOMP_FILE = "worker-seccomp.json"
K8S_SECCOMP = "profiles/akbench-worker.json"


def compose_facts(config):
    w = config["services"]["worker"]
    opts = w.get("security_opt", [])
    # `docker-compose config` writes seccomp=FILE as seccomp:FILE.
    seccomp = [o[len("seccomp") + 1:] for o in opts if o.startswith(("seccomp=", "seccomp:"))]
    cgroup_rw = []
    for v in w.get("volumes", []):
        if isinstance(v, str):
            parts = v.split(":") + [None, None]
            src, dst, mode = parts[0], parts[1] or parts[0], parts[2] or "rw"
        else:
            src, dst = v.get("source"), v.get("target")
            mode = "ro" if v.get("read_only") else "rw"
        if dst.startswith("/sys/fs/cgroup"):
            if src != dst:
                raise SystemExit(f"compose: {src} is mounted at {dst}, not at its own path")
            if mode == "rw":
                cgroup_rw.append(dst)
    user = str(w.get("user", "0")).split(":")[0]
    apparmor = [o[len("apparmor") + 1:] for o in opts if o.startswith(("apparmor=", "apparmor:"))]
    return {
        "start_uid": int(user) if user.isdigit() else user,
        "caps_drop": sorted(w.get("cap_drop", [])),
        "caps_add": sorted(w.get("cap_add", [])),
        "no_new_privs": "no-new-privileges:true" in opts or "no-new-privileges" in opts,
        "privileged": bool(w.get("privileged", False)),
        "seccomp": SECCOMP_FILE if len(seccomp) == 1 and os.path.basename(seccomp[0]) == SECCOMP_FILE else seccomp,
        "apparmor": apparmor[0] if len(apparmor) == 1 else "runtime default",
        "proc": "unmasked" if "systempaths=unconfined" in opts else "as the runtime mounts it",
        "cgroup": f"v1: {sorted(cgroup_rw)}",
        "read_only_root": bool(w.get("read_only", False)),
    }


def k8s_facts(doc):
    pod = doc["spec"]["template"]["spec"]
    (c,) = [c for c in pod["containers"] if c["name"] == "worker"]
    psc, csc = pod.get("securityContext", {}), c.get("securityContext", {})
    prof = csc.get("seccompProfile") or psc.get("seccompProfile") or {}
    seccomp = SECCOMP_FILE if prof.get("type") == "Localhost" and prof.get("localhostProfile") == K8S_SECCOMP else prof
    host = {
        v["name"]: v["hostPath"]["path"] for v in pod.get("volumes", []) if "hostPath" in v
    }
    cgroup_rw = []
    for m in c.get("volumeMounts", []):
        if m["mountPath"].startswith("/sys/fs/cgroup"):
            if host.get(m["name"]) != m["mountPath"]:
                raise SystemExit(f"kubernetes: {m['mountPath']} is not the node's own folder")
            if not m.get("readOnly"):
                cgroup_rw.append(m["mountPath"])
    caps = csc.get("capabilities", {})
    aa = csc.get("appArmorProfile") or psc.get("appArmorProfile") or {}
    if any(v.get("hostPath", {}).get("path", "").startswith("/sys/fs/cgroup") for v in pod.get("volumes", [])) and not cgroup_rw:
        raise SystemExit("kubernetes: a hostPath into /sys/fs/cgroup that the worker does not mount read-write")
    return {
        "start_uid": csc.get("runAsUser", psc.get("runAsUser", 0)),
        "caps_drop": sorted(caps.get("drop", [])),
        "caps_add": sorted(caps.get("add", [])),
        "no_new_privs": csc.get("allowPrivilegeEscalation") is False,
        "privileged": bool(csc.get("privileged", False)),
        "seccomp": seccomp,
        "apparmor": {"Unconfined": "unconfined"}.get(aa.get("type"), aa.get("type", "runtime default")),
        "proc": "unmasked" if csc.get("procMount") == "Unmasked" else "as the runtime mounts it",
        "cgroup": f"v1: {sorted(cgroup_rw)}" if cgroup_rw else "v2: own namespace",
        "read_only_root": bool(csc.get("readOnlyRootFilesystem", False)),
    }


def main(compose_path, rendered):
    with open(compose_path) as f:
        want = compose_facts(yaml.safe_load(f))
    bad = 0
    for path in rendered:
        with open(path) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        workers = [d for d in docs if d.get("kind") == "Deployment" and d["metadata"]["name"] == "akbench-worker"]
        if len(workers) != 1:
            print(f"{path}: {len(workers)} akbench-worker Deployments, want 1", file=sys.stderr)
            bad += 1
            continue
        got = k8s_facts(workers[0])
        compared = [k for k in want if not (k == "cgroup" and got.get(k) == "v2: own namespace")]
        diff = {k: (want[k], got.get(k)) for k in compared if want[k] != got.get(k)}
        if diff:
            bad += 1
            for k, (c, g) in diff.items():
                print(f"{path}: worker {k}: compose {c!r}, kubernetes {g!r}", file=sys.stderr)
    print(f"worker_security: compose {want}")
    print(f"worker_security: {len(rendered) - bad} of {len(rendered)} overlays ship the same worker settings (cgroup v2 overlays: all but the cgroups)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))

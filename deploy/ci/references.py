#!/usr/bin/env python3
"""Checks that everything a rendered overlay references exists: every Secret, ConfigMap and
PersistentVolumeClaim a workload names (volumes, envFrom, env valueFrom, KEDA's
TriggerAuthentication) is either an object of the rendered overlay or listed in the
overlay's kustomization.yaml under "create them first" (a comment line `#   <name>  ...`),
where deploy/README.md says how to make it. A pod would otherwise stay Pending or fail.

usage: references.py OVERLAY_DIR RENDERED.yaml
Exit 0 when nothing is missing, 1 (naming each missing object) otherwise.
"""
import os
import re
import sys

import yaml


def referenced(docs):
    """(kind, name, where) of every object the workloads reference."""
    out = []
    for d in docs:
        kind, name = d.get("kind"), d["metadata"]["name"]
        where = f"{kind}/{name}"
        if kind == "TriggerAuthentication":
            for s in d["spec"].get("secretTargetRef", []):
                out.append(("Secret", s["name"], where))
            continue
        pod = (d.get("spec", {}).get("template") or {}).get("spec")
        if not pod:
            continue
        for v in pod.get("volumes", []):
            if "secret" in v:
                out.append(("Secret", v["secret"]["secretName"], where))
            if "configMap" in v:
                out.append(("ConfigMap", v["configMap"]["name"], where))
            if "persistentVolumeClaim" in v:
                out.append(("PersistentVolumeClaim", v["persistentVolumeClaim"]["claimName"], where))
        for c in pod.get("containers", []) + pod.get("initContainers", []):
            for e in c.get("envFrom", []):
                if "secretRef" in e:
                    out.append(("Secret", e["secretRef"]["name"], where))
                if "configMapRef" in e:
                    out.append(("ConfigMap", e["configMapRef"]["name"], where))
            for e in c.get("env", []):
                src = e.get("valueFrom") or {}
                if "secretKeyRef" in src:
                    out.append(("Secret", src["secretKeyRef"]["name"], where))
                if "configMapKeyRef" in src:
                    out.append(("ConfigMap", src["configMapKeyRef"]["name"], where))
    return out


def listed_first(overlay):
    """Names listed in the overlay's kustomization.yaml comment block as made beforehand."""
    with open(os.path.join(overlay, "kustomization.yaml")) as f:
        return set(re.findall(r"^#   ([a-z0-9][a-z0-9.-]+)\s", f.read(), re.M))


def main(overlay, rendered):
    with open(rendered) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    made = {(d["kind"], d["metadata"]["name"]) for d in docs}
    # StatefulSets' volumeClaimTemplates make their claims.
    first = listed_first(overlay)
    missing = sorted(
        {(k, n, w) for k, n, w in referenced(docs) if (k, n) not in made and n not in first}
    )
    for k, n, w in missing:
        print(f"{overlay}: {w} references {k} {n}, which the overlay neither makes nor lists under 'create first'", file=sys.stderr)
    print(f"references: {overlay}: {len(referenced(docs))} references, {len(missing)} missing")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))

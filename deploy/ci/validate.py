#!/usr/bin/env python3
"""Validates rendered Kubernetes manifests (multi-document YAML files given as arguments).

Core kinds: strictly against the Kubernetes schemas (kubernetes-validate, offline; unknown
fields are errors). KEDA kinds (keda.sh): against deploy/ci/keda.schema.json. Any other API
group is an error (it would go unchecked). Exit 0 when every document is valid, 1 otherwise.
"""
import json
import os
import sys

import jsonschema
import kubernetes_validate
import yaml

K8S_VERSION = os.environ.get("AKBENCH_K8S_VERSION", "1.30.0")
HERE = os.path.dirname(os.path.abspath(__file__))


def main(paths):
    with open(os.path.join(HERE, "keda.schema.json")) as f:
        keda = json.load(f)
    failures = 0
    checked = 0
    for path in paths:
        with open(path) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        for doc in docs:
            kind = doc.get("kind", "?")
            name = (doc.get("metadata") or {}).get("name", "?")
            where = f"{path}: {kind}/{name}"
            api = doc.get("apiVersion", "")
            try:
                if api.startswith("keda.sh/"):
                    if kind not in ("ScaledObject", "TriggerAuthentication"):
                        raise ValueError(f"no schema for KEDA kind {kind}")
                    schema = dict(keda, **{"$ref": f"#/definitions/{kind}"})
                    jsonschema.validate(doc, schema)
                else:
                    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
                checked += 1
            except (jsonschema.ValidationError, ValueError) as e:
                failures += 1
                print(f"INVALID {where}: {getattr(e, 'message', e)}", file=sys.stderr)
            except kubernetes_validate.ValidationError as e:
                failures += 1
                print(f"INVALID {where}: {e.message} at {list(e.path)}", file=sys.stderr)
            except (kubernetes_validate.SchemaNotFoundError, kubernetes_validate.InvalidSchemaError) as e:
                failures += 1
                print(f"UNCHECKABLE {where}: {e}", file=sys.stderr)
    print(f"validate: {checked} documents valid, {failures} invalid")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env bash
# Benchmark (issue 46): one three-step trial against three one-step trials doing the same
# work. The three-step trial is the oracle on examples/tasks/harbor-steps-001 (one
# environment; per step: workdir upload, setup.sh, healthcheck, agent, artifacts, grading
# with its tripwire twin). The one-step trials are three image-only tasks made from it: task
# k's tests are step k's merged tests, its solution replays steps 1..k (each step's workdir
# and setup.sh, then its solution), so it ends where step k of the trial ends, each in a
# fresh environment of its own. Both under `runtime: container` over the Debian test image
# of scripts/build-test-image (pulled by digest from a docker-registry on loopback, unpacked
# once into the shared cache by a warm-up run), `akbench run single --agent oracle`, grading
# on. Alternated ROUNDS times (default 3); prints each round, the medians and the ratio
# three-step / three one-step.
# usage: bench/steps_trial.sh [rounds]   (env: AKBENCH: an akbench binary to use instead of
#        building this checkout's release)
# Needs root, bubblewrap, /usr/bin/docker-registry and mmdebstrap (the image's first build).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
rounds=${1:-3}
if [ -n "${AKBENCH:-}" ]; then
    akbench=$AKBENCH
else
    cargo build --release -q -p akbench --manifest-path "$root/Cargo.toml"
    akbench="${CARGO_TARGET_DIR:-$root/target}/release/akbench"
fi
scratch=$(mktemp -d)
chmod 755 "$scratch" # traversed from the container's user namespace
registry_pid=
cleanup() {
    if [ -n "$registry_pid" ]; then
        kill "$registry_pid" 2>/dev/null || true
        wait "$registry_pid" 2>/dev/null || true
    fi
    rm -rf "$scratch"
}
trap cleanup EXIT
now() { date +%s.%N; }

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$scratch/registry"
printf 'version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: 127.0.0.1:%s\n' \
    "$scratch/registry" "$port" >"$scratch/registry.yml"
/usr/bin/docker-registry serve "$scratch/registry.yml" >"$scratch/registry.log" 2>&1 &
registry_pid=$!
python3 - "$port" <<'PY'
import sys, time, urllib.request
url = f"http://127.0.0.1:{sys.argv[1]}/v2/"
for _ in range(600):
    try:
        urllib.request.urlopen(url, timeout=5)
        sys.exit(0)
    except OSError:
        time.sleep(0.1)
sys.exit(f"steps_trial: failed to reach the loopback registry at {url}")
PY
export AKBENCH_INSECURE_REGISTRIES="127.0.0.1:$port"
image="127.0.0.1:$port/akbench/base:bookworm"
python3 "$root/scripts/oci-push.py" "127.0.0.1:$port" akbench/base:bookworm \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    "$(bash "$root/scripts/build-test-image"):tar" >/dev/null

# The three-step task, naming the image.
tasks="$scratch/tasks"
mkdir -p "$tasks"
src="$root/examples/tasks/harbor-steps-001"
cp -a "$src" "$tasks/steps"
sed -i "s|^workdir = \"/app\"|workdir = \"/app\"\ndocker_image = \"$image\"|" "$tasks/steps/task.toml"
# Three one-step tasks: step k's tests, a solution that replays steps 1..k.
names=(open deposit report)
for k in 1 2 3; do
    t="$tasks/one-$k"
    mkdir -p "$t/tests" "$t/solution"
    cp -a "$src/tests/." "$t/tests/"
    cp -a "$src/steps/${names[k - 1]}/tests/." "$t/tests/"
    {
        echo '#!/bin/bash'
        echo 'set -euo pipefail'
        echo 'here=$(cd "$(dirname "$0")" && pwd)'
        echo 'cd /app'
    } >"$t/solution/solve.sh"
    for ((j = 0; j < k; j++)); do
        s=${names[j]}
        mkdir -p "$t/solution/$s"
        cp -a "$src/steps/$s/." "$t/solution/$s/"
        if [ -d "$src/steps/$s/workdir" ]; then
            echo "cp -R \"\$here/$s/workdir/.\" /app/" >>"$t/solution/solve.sh"
            if [ -f "$src/steps/$s/workdir/setup.sh" ]; then
                echo "bash /app/setup.sh" >>"$t/solution/solve.sh"
            fi
        fi
        echo "bash \"\$here/$s/solution/solve.sh\"" >>"$t/solution/solve.sh"
    done
    cat >"$t/task.toml" <<EOF
schema_version = "1.4"

[task]
name = "akbench-bench/steps-one-$k"
description = "Step ${names[k - 1]} of harbor-steps-001 as a one-step task."

[agent]
timeout_sec = 300.0

[verifier]
timeout_sec = 120.0
env = { EXPECTED_BALANCE = "150" }

[environment]
workdir = "/app"
docker_image = "$image"
allow_internet = false
EOF
    echo "Step ${names[k - 1]} of the ledger task (the steps before it done by its solution)." >"$t/instruction.md"
done

single() { # $1 = task, $2 = out folder
    "$akbench" run single "$1" --agent oracle --runtime container --tasks-root "$tasks" \
        --agents-root "$root/examples/agents" --out "$2" --cache "$scratch/cache" \
        --json >"$2.json" 2>"$2.err" || { echo "steps_trial: $1 failed:" >&2; cat "$2.json" "$2.err" >&2; exit 1; }
    python3 - "$2.json" "$1" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
if not v.get("ok"):
    sys.exit(f"steps_trial: {sys.argv[2]} was not solved: {v}")
PY
}
# Warm-up: the image pulled and unpacked once, each task run once.
single steps "$scratch/warm-steps"
for k in 1 2 3; do single "one-$k" "$scratch/warm-one-$k"; done

three=(); ones=()
for i in $(seq "$rounds"); do
    start=$(now)
    single steps "$scratch/r$i-steps"
    a=$(python3 -c "print(round($(now) - $start, 3))")
    start=$(now)
    for k in 1 2 3; do single "one-$k" "$scratch/r$i-one-$k"; done
    b=$(python3 -c "print(round($(now) - $start, 3))")
    echo "round $i: one three-step trial ${a}s, three one-step trials ${b}s"
    three+=("$a"); ones+=("$b")
done
python3 - "${three[*]}" "${ones[*]}" <<'PY'
import statistics, sys
a = [float(x) for x in sys.argv[1].split()]
b = [float(x) for x in sys.argv[2].split()]
ma, mb = statistics.median(a), statistics.median(b)
print(f"median three-step trial {ma:.2f}s, three one-step trials {mb:.2f}s, ratio {ma / mb:.3f}")
PY

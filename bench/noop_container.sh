#!/usr/bin/env bash
# Benchmark (issue 26): the same N no-op trials (default 400: the 8 good example tasks x the
# `noop` agent x 50 repetitions, grading off) through `akbench sweep` on ONE embedded worker
# with SLOTS slots (default 32), under runtime `sandbox` (bubblewrap over the host's root)
# and under runtime `container` (bubblewrap over the Debian test image of
# scripts/build-test-image, pulled by digest from a docker-registry on loopback and unpacked
# once into the image cache, a copy-on-write view per attempt). The container corpus is a
# copy of the same 8 tasks with `[environment] image` naming that registry; nothing else
# differs. A first small sweep of each warms PostgreSQL's data folder, the mirrors and
# baselines, and (container) the image cache; then both are alternated ROUNDS times
# (default 2). Prints per round, the medians and the ratio container / sandbox (goal <= 1.2),
# plus the per-state medians of each runtime's records (as bench/noop_trials.sh).
# usage: bench/noop_container.sh [rounds]   (env: SLOTS, REPS, DATA_DIR: PostgreSQL data
#        folder, AKBENCH: an akbench binary to use instead of building this checkout's release)
# Needs root, bubblewrap, /usr/bin/docker-registry and mmdebstrap (the image's first build).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
rounds=${1:-2}
slots=${SLOTS:-32}
reps=${REPS:-50}
if [ -n "${AKBENCH:-}" ]; then
    akbench=$AKBENCH
else
    cargo build --release -q -p akbench --manifest-path "$root/Cargo.toml"
    akbench="${CARGO_TARGET_DIR:-$root/target}/release/akbench"
fi
scratch=$(mktemp -d)
chmod 755 "$scratch" # the embedded PostgreSQL may run as user postgres
registry_pid=
cleanup() {
    if [ -n "$registry_pid" ]; then
        kill "$registry_pid" 2>/dev/null || true
        wait "$registry_pid" 2>/dev/null || true
    fi
    rm -rf "$scratch"
}
trap cleanup EXIT
data_dir=${DATA_DIR:-$scratch/pg}
now() { date +%s.%N; }

# The registry on loopback, the test image pushed to it.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$scratch/registry"
printf 'version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: 127.0.0.1:%s\n' \
    "$scratch/registry" "$port" >"$scratch/registry.yml"
/usr/bin/docker-registry serve "$scratch/registry.yml" >"$scratch/registry.log" 2>&1 &
registry_pid=$!
python3 - "$port" <<'PY'
import sys, time, urllib.request
url = f"http://127.0.0.1:{sys.argv[1]}/v2/"
for _ in range(600):  # up to a minute, until it serves
    try:
        urllib.request.urlopen(url, timeout=5)
        sys.exit(0)
    except OSError:
        time.sleep(0.1)
sys.exit(f"noop_container: failed to reach the loopback registry at {url}")
PY
export AKBENCH_INSECURE_REGISTRIES="127.0.0.1:$port"
python3 "$root/scripts/oci-push.py" "127.0.0.1:$port" akbench/base:bookworm \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    "$(bash "$root/scripts/build-test-image"):tar" >/dev/null

# The container corpus: the same tasks, naming the image (their repositories beside them).
mkdir -p "$scratch/image-tasks"
ln -s "$root/examples/repos" "$scratch/repos"
for t in "$root"/examples/tasks/wordcount-* "$root"/examples/tasks/pyslug-*; do
    cp -a "$t" "$scratch/image-tasks/"
    printf '\n[environment]\nimage = "127.0.0.1:%s/akbench/base:bookworm"\n' "$port" \
        >>"$scratch/image-tasks/$(basename "$t")/task.toml"
done

sweep() { # $1 = runtime, $2 = repetitions, $3 = out folder
    local tasks_root="$root/examples/tasks"
    [ "$1" = container ] && tasks_root="$scratch/image-tasks"
    cat >"$3.yaml" <<EOF
experiment: noop-$1
tasks:
  root: $tasks_root
  include: ["wordcount-*", "pyslug-*"]
agents:
  root: $root/examples/agents
  conditions:
    - descriptor: noop
repetitions: $2
execution:
  runtime: $1
evaluation:
  grade: false
visibility: private
EOF
    "$akbench" sweep "$3.yaml" --workers 1 --slots "$slots" \
        --data-dir "$data_dir" --store-root "$scratch/runs" --out "$3" \
        --cache "$scratch/ak-cache" --json >"$3.json" 2>"$3.err" || {
        rc=$?
        [ "$rc" = 1 ] || { echo "akbench sweep ($1) failed ($rc)" >&2; tail "$3.err" >&2; exit 1; }
    }
    local n; n=$(find "$3" -name run_record.json | wc -l)
    [ "$n" = "$((8 * $2))" ] || { echo "$1: $n records, expected $((8 * $2))" >&2; exit 1; }
}
timed() { # $@ = sweep's arguments; prints the seconds
    local start; start=$(now)
    sweep "$@"
    python3 -c "print(round($(now) - $start, 3))"
}

sweep sandbox 1 "$scratch/warm-sandbox"
sweep container 1 "$scratch/warm-container"
sb=(); ct=()
for i in $(seq "$rounds"); do
    s=$(timed sandbox "$reps" "$scratch/sandbox-$i") || exit 1
    c=$(timed container "$reps" "$scratch/container-$i") || exit 1
    echo "round $i: $((8 * reps)) trials, $slots slots: sandbox ${s}s, container ${c}s (load $(cut -d' ' -f1-3 /proc/loadavg))"
    sb+=("$s"); ct+=("$c")
done
python3 - "${sb[*]}" "${ct[*]}" "$scratch" <<'PY'
import glob, json, statistics, sys
s = [float(x) for x in sys.argv[1].split()]
c = [float(x) for x in sys.argv[2].split()]
ms, mc = statistics.median(s), statistics.median(c)
print(f"median sandbox {ms:.2f}s, container {mc:.2f}s, ratio {mc / ms:.3f} (goal <= 1.2)")
for runtime in ("sandbox", "container"):
    phases = {}
    for p in glob.glob(f"{sys.argv[3]}/{runtime}-*/**/run_record.json", recursive=True):
        rec = json.load(open(p))
        # The container trials must have run in the image (pinned by digest), the others not.
        if bool(rec["task"].get("image")) != (runtime == "container"):
            sys.exit(f"{p}: a {runtime} trial whose record names image {rec['task'].get('image')!r}")
        for att in rec["attempts"]:
            for state, t in att.get("timings_ms", {}).items():
                phases.setdefault(state, []).append(t)
    print(f"{runtime} per state, median / p90 (ms): " + ", ".join(
        f"{k} {statistics.median(v):.0f}/{sorted(v)[int(len(v) * 0.9)]}"
        for k, v in sorted(phases.items())))
PY

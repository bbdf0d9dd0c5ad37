#!/usr/bin/env bash
# Benchmark: what the tripwire twin costs per solved grade (docs/performance-notebook.md, "The
# tripwire twin"). ROUNDS times (default 5) per task, `akbench run single TASK --agent
# oracle` (every grade solved, so every grade runs the twin); from each record: the trial's
# wall time (the sum of its phase timings), the grade's own `duration_ms` (both grading
# runs) and the twin's `grade.tripwire.duration_ms`. Prints per task the medians, the twin's
# share of the grade and of the trial, and checks every trial was solved with the twin
# failing as it must.
# usage: bench/twin_cost.sh [rounds]   (env: TASKS (default: the sandbox example tasks),
#        RUNTIME (default sandbox), AKBENCH: an akbench binary instead of building this
#        checkout's release)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
rounds=${1:-5}
case "$rounds" in '' | *[!0-9]*) echo "twin_cost.sh: rounds must be a whole number, not '$rounds'" >&2; exit 2 ;; esac
tasks=${TASKS:-pyslug-001 pyslug-002 wordcount-001 wordcount-002}
runtime=${RUNTIME:-sandbox}
if [ -n "${AKBENCH:-}" ]; then
    akbench=$AKBENCH
else
    cargo build --release -q -p akbench --manifest-path "$root/Cargo.toml"
    akbench="${CARGO_TARGET_DIR:-$root/target}/release/akbench"
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
: >"$scratch/rows"
for ((i = 1; i <= rounds; i++)); do
    for task in $tasks; do
        "$akbench" run single "$task" --agent oracle --runtime "$runtime" \
            --tasks-root "$root/examples/tasks" --agents-root "$root/examples/agents" \
            --cache "$scratch/cache" --out "$scratch/out" --json >"$scratch/one.json" 2>"$scratch/one.err" || {
            echo "run single $task failed:" >&2
            cat "$scratch/one.err" >&2
            exit 1
        }
        python3 - "$scratch/one.json" "$task" >>"$scratch/rows" <<'PY'
import json, sys
rec = json.load(open(json.load(open(sys.argv[1]))["record"]))
a = rec["attempts"][-1]
g = a.get("grade") or {}
t = g.get("tripwire") or {}
if not g.get("ok") or t.get("result") != "failed as it must":
    sys.exit("%s: not solved with the twin failing as it must: %s / %s" % (sys.argv[2], g.get("ok"), t.get("result")))
trial = sum(a.get("timings_ms", {}).values())
print(sys.argv[2], trial, g["duration_ms"], t.get("duration_ms", 0))
PY
    done
done
python3 - "$scratch/rows" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    task, trial, grade, twin = line.split()
    rows.setdefault(task, []).append((int(trial), int(grade), int(twin)))
print("| task | trials | trial (median) | grade (median) | twin (median) | twin / grade | twin / trial |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for task, rs in rows.items():
    tr = statistics.median(r[0] for r in rs)
    gr = statistics.median(r[1] for r in rs)
    tw = statistics.median(r[2] for r in rs)
    print("| %s | %d | %.0f ms | %.0f ms | %.0f ms | %.2f | %.2f |" % (task, len(rs), tr, gr, tw, tw / gr, tw / tr))
PY

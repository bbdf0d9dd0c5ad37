#!/usr/bin/env bash
# Benchmark: what issue 25's grading costs per grade, A/B in one run. One recorded trial per
# runtime (`run single TASK --agent AGENT --keep-workspace`, grading as recorded), then
# ROUNDS times (default 20), alternating, `akbench run evaluate` of it:
#   sandbox, clean room  (the default: a fresh copy of the baseline plus the recorded diff,
#                          the verifier in bwrap as an unprivileged user with seccomp)
#   sandbox, --in-place  (the same sandbox in the kept worktree: no clean-room copy)
#   direct,  clean room  (no sandbox: no user namespace / setpriv hand-over, seccomp, cgroups)
#   direct,  --in-place
# Prints per variant the median wall time of `run evaluate` and the median of the grade's
# own duration_ms, and the differences: clean room = copy - in place; sandbox = sandbox -
# direct. With AGENT=oracle every grade is solved and so also pays the tripwire run.
# usage: bench/grading_cost.sh [rounds]   (env: TASK (default pyslug-001), AGENT (default
#        noop), AKBENCH: an akbench binary instead of building this checkout's release)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
rounds=${1:-20}
task=${TASK:-pyslug-001}
agent=${AGENT:-noop}
if [ -n "${AKBENCH:-}" ]; then
    akbench=$AKBENCH
else
    cargo build --release -q -p akbench --manifest-path "$root/Cargo.toml"
    akbench="${CARGO_TARGET_DIR:-$root/target}/release/akbench"
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
common=(--tasks-root "$root/examples/tasks" --cache "$scratch/cache")

declare -A dir
for rt in sandbox direct; do
    "$akbench" run single "$task" --agent "$agent" --runtime "$rt" --keep-workspace \
        --agents-root "$root/examples/agents" --out "$scratch/$rt" "${common[@]}" \
        --json >"$scratch/$rt.json" 2>"$scratch/$rt.err" || true
    rec=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["record"])' "$scratch/$rt.json") || {
        echo "run single ($rt) failed:" >&2
        cat "$scratch/$rt.err" >&2
        exit 1
    }
    dir[$rt]=$(dirname "$rec")
done

variants=("sandbox copy" "sandbox in-place" "direct copy" "direct in-place")
: >"$scratch/times"
for ((i = 1; i <= rounds; i++)); do
    for v in "${variants[@]}"; do
        read -r rt how <<<"$v"
        flag=()
        [ "$how" = in-place ] && flag=(--in-place)
        t0=$(date +%s%N)
        "$akbench" run evaluate "${dir[$rt]}" "${flag[@]}" "${common[@]}" --json \
            >"$scratch/eval.json" 2>"$scratch/eval.err" || true
        t1=$(date +%s%N)
        ms=$(python3 - "${dir[$rt]}/run_record.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
g = r["attempts"][-1].get("grade")
if g is None:
    sys.exit("no grade: %s" % r["attempts"][-1].get("cause"))
print(g["duration_ms"])
EOF
        ) || { cat "$scratch/eval.err" >&2; exit 1; }
        echo "$rt-$how $(((t1 - t0) / 1000000)) $ms" >>"$scratch/times"
    done
done

python3 - "$scratch/times" "$rounds" "$task" "$agent" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
wall, grade = {}, {}
for v, w, g in rows:
    wall.setdefault(v, []).append(int(w))
    grade.setdefault(v, []).append(int(g))
med = lambda xs: statistics.median(xs)
print(f"{sys.argv[3]} x {sys.argv[4]}, {sys.argv[2]} rounds (median ms: run evaluate wall / grade duration_ms)")
for v in ["sandbox-copy", "sandbox-in-place", "direct-copy", "direct-in-place"]:
    print(f"  {v:18} {med(wall[v]):8.0f} {med(grade[v]):8.0f}")
for name, a, b in [
    ("clean room (sandbox)", "sandbox-copy", "sandbox-in-place"),
    ("clean room (direct)", "direct-copy", "direct-in-place"),
    ("sandbox (clean room)", "sandbox-copy", "direct-copy"),
    ("sandbox (in place)", "sandbox-in-place", "direct-in-place"),
]:
    print(f"  {name:22} +{med(wall[a]) - med(wall[b]):.0f} ms wall, +{med(grade[a]) - med(grade[b]):.0f} ms grade")
EOF

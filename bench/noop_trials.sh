#!/usr/bin/env bash
# Benchmark: N no-op trials (default 400: the 8 good example tasks x the `noop` agent x 50
# repetitions, grading off) on ONE embedded worker with SLOTS slots (default 32), end to end
# (`akbench sweep`, its PostgreSQL data folder warmed first), against the same git steps by
# hand at the same parallelism: per trial `git worktree add --detach` of the pinned commit
# from a bare mirror, `git apply` of the mutation, the no-op agent (`bash noop.sh`), `git add
# -A` + `git diff --cached` (the agent's diff), `git worktree remove` (add and remove under a
# flock of the mirror, without which concurrent worktree commands fail); SLOTS at a time with
# xargs -P. Mirrors (and, for akbench, the task baselines) are warmed by a first small round.
# Both are measured in the same run, alternating, ROUNDS times (default 2).
# Prints per round and the medians, and the ratio (goal <= 1.5), plus akbench's
# creating_workspace median from the records.
# usage: bench/noop_trials.sh [rounds]   (env: SLOTS, REPS, DATA_DIR: PostgreSQL data folder,
#        RUNTIME: the trials' runtime, `sandbox` (the default runtime) or `direct`,
#        AKBENCH: an akbench binary to use instead of building this checkout's)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
rounds=${1:-2}
slots=${SLOTS:-32}
reps=${REPS:-50}
runtime=${RUNTIME:-sandbox}
if [ -n "${AKBENCH:-}" ]; then
    akbench=$AKBENCH # a given build (e.g. one saved before a change, to compare)
else
    cargo build --release -q -p akbench --manifest-path "$root/Cargo.toml"
    akbench="${CARGO_TARGET_DIR:-$root/target}/release/akbench"
fi
scratch=$(mktemp -d)
chmod 755 "$scratch" # the embedded PostgreSQL may run as user postgres
trap 'rm -rf "$scratch"' EXIT
data_dir=${DATA_DIR:-$scratch/pg}
tasks_root="$root/examples/tasks"
agents_root="$root/examples/agents"
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
G=(git -c init.defaultBranch=main -c advice.detachedHead=false -c core.autocrlf=false)
now() { date +%s.%N; }
# CPU seconds (user + sys) of the finished children of the calling (sub)shell, from `times`.
cpu_of_children() {
    times >"$scratch/times" # a builtin in this shell: a pipe would run it in a subshell
    tail -1 "$scratch/times" | python3 -c 'import re, sys
print(round(sum(float(m) * 60 + float(s) for m, s in re.findall(r"(\d+)m([\d.]+)s", sys.stdin.read())), 2))'
}

manifest() { # $1 = repetitions
    cat >"$scratch/noop-$1.yaml" <<EOF
experiment: noop-bench
tasks:
  root: $tasks_root
  include: ["wordcount-*", "pyslug-*"]
agents:
  root: $agents_root
  conditions:
    - descriptor: noop
repetitions: $1
execution:
  runtime: $runtime
evaluation:
  grade: false
visibility: private
EOF
    echo "$scratch/noop-$1.yaml"
}

sweep() { # $1 = repetitions, $2 = out folder
    "$akbench" sweep "$(manifest "$1")" --workers 1 --slots "$slots" \
        --data-dir "$data_dir" --store-root "$scratch/runs" --out "$2" \
        --cache "$scratch/ak-cache" --json >"$2.json" 2>"$2.err" || {
        rc=$?
        [ "$rc" = 1 ] || { echo "akbench sweep failed ($rc)" >&2; tail "$2.err" >&2; exit 1; }
    }
}

# The trials by hand: one line per trial "task rep" -> xargs -P.
items="$scratch/items"
: >"$items"
for task in "$tasks_root"/*/; do
    id=$(basename "$task")
    # The tasks the sweep's manifest includes (`wordcount-*`, `pyslug-*`), nothing else: the
    # broken ones, and the image and Harbor tasks (no [source]) are not in it.
    case $id in wordcount-* | pyslug-*) ;; *) continue ;; esac
    read -r repo commit patch < <(python3 -c 'import sys, tomllib
d = tomllib.load(open(sys.argv[1], "rb"))
print(d["source"]["repo"], d["source"]["commit"], d.get("mutation", {}).get("patch", "-"))' "$task/task.toml")
    case $repo in /*) ;; *) repo="$tasks_root/$repo" ;; esac
    mirror="$scratch/hand-cache/$(basename "$repo").git"
    [ -d "$mirror" ] || "${G[@]}" clone -q --mirror "$repo" "$mirror"
    for r in $(seq "$reps"); do echo "$id $r $mirror $commit $task/$patch" >>"$items"; done
done
cat >"$scratch/one.sh" <<'EOF'
set -euo pipefail
id=$1 r=$2 mirror=$3 commit=$4 patch=$5 base=$6
G=(git -c advice.detachedHead=false -c core.autocrlf=false)
t="$base/$id-$r"; ws="$t/$id-$r" # unique basenames: git names worktrees after them
mkdir -p "$t/home"
# git worktree add/remove on one repository race each other (a half-made worktree entry
# fails the others), so they take the mirror's lock: the least correct by-hand form.
flock "$mirror.lock" "${G[@]}" -C "$mirror" worktree add -q --detach "$ws" "$commit"
case $patch in */-) ;; *) "${G[@]}" -C "$ws" apply "$patch" ;; esac
(cd "$ws" && HOME="$t/home" bash "$AGENT") >"$t/agent.log" 2>&1
"${G[@]}" -C "$ws" add -A
"${G[@]}" -C "$ws" diff --cached --binary >"$t/agent.diff"
flock "$mirror.lock" "${G[@]}" -C "$mirror" worktree remove --force "$ws"
rm -rf "$t"
EOF
export AGENT="$agents_root/scripts/noop.sh"
by_hand() {
    local base="$scratch/hand-trials"
    mkdir -p "$base"
    local start; start=$(now)
    xargs -P "$slots" -L 1 bash -c 'bash "$0" "$@" "'"$base"'"' "$scratch/one.sh" <"$items" ||
        { echo "a trial by hand failed" >&2; exit 1; }
    cpu_of_children >"$scratch/cpu"
    python3 -c "print(round($(now) - $start, 3))"
}

# Warm-up: PostgreSQL's data folder, mirrors and baselines; the hand mirrors are made above.
sweep 1 "$scratch/warm"
trials=$(wc -l <"$items")
hand=(); ak=()
for i in $(seq "$rounds"); do
    h=$(by_hand) || exit 1
    hc=$(cat "$scratch/cpu")
    out="$scratch/out-$i"
    start=$(now)
    ac=$(sweep "$reps" "$out" && cpu_of_children)
    a=$(python3 -c "print(round($(now) - $start, 3))")
    n=$(find "$out" -name run_record.json | wc -l)
    [ "$n" = "$trials" ] || { echo "akbench wrote $n records, expected $trials" >&2; exit 1; }
    echo "round $i: $trials trials, $slots slots: by hand ${h}s, akbench sweep ${a}s" \
        "(CPU of the processes each started and waited for: ${hc}s / ${ac}s)"
    hand+=("$h"); ak+=("$a")
done
python3 - "${hand[*]}" "${ak[*]}" "$scratch" <<'PY'
import glob, json, statistics, sys
h = [float(x) for x in sys.argv[1].split()]
a = [float(x) for x in sys.argv[2].split()]
mh, ma = statistics.median(h), statistics.median(a)
print(f"median by hand {mh:.2f}s, akbench {ma:.2f}s, ratio {ma / mh:.3f} (goal <= 1.5)")
phases = {}
for p in glob.glob(f"{sys.argv[3]}/out-*/**/run_record.json", recursive=True):
    for att in json.load(open(p))["attempts"]:
        for state, t in att.get("timings_ms", {}).items():
            phases.setdefault(state, []).append(t)
cw = sorted(phases.get("creating_workspace", []))
if cw:
    print(f"creating_workspace over {len(cw)} attempts: median {statistics.median(cw):.0f} ms, "
          f"p90 {cw[int(len(cw) * 0.9)]} ms")
# Time per attempt in each state (STARTING_AGENT: runtime set-up and spawn; EXECUTING: the
# agent, its end and the runtime's teardown), summed over the attempts of every round.
print("per state, median / p90 / total over attempts (ms): " + ", ".join(
    f"{k} {statistics.median(v):.0f}/{sorted(v)[int(len(v) * 0.9)]}/{sum(v)}"
    for k, v in sorted(phases.items())))
PY

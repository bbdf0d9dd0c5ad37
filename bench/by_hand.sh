#!/usr/bin/env bash
# Baseline for benchmarks: the same git and test steps akbench does for a trial with the
# oracle agent, done by hand. For every good task (broken-* skipped): a bare mirror clone of
# its repository made once per repository (cached), `git worktree add --detach`, apply the
# mutation, run solution/solve.sh, copy tests/ out, run tests/test.sh, remove the worktree.
# Prints one line per task and the total wall time as TOTAL_SECONDS=<x>.
# usage: bench/by_hand.sh [tasks root]   (default: examples/tasks)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tasks_root=$(cd "${1:-$here/../examples/tasks}" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
G=(git -c init.defaultBranch=main -c advice.detachedHead=false -c core.autocrlf=false)

now() { date +%s.%N; }
start=$(now)
declare -A mirrors=()
n=0
for task in "$tasks_root"/*/; do
    task=${task%/}
    id=$(basename "$task")
    case $id in broken-*) continue ;; esac
    [ -f "$task/task.toml" ] || continue
    t0=$(now)
    read -r repo commit patch < <(python3 -c 'import sys, tomllib
d = tomllib.load(open(sys.argv[1], "rb"))
print(d["source"]["repo"], d["source"]["commit"], d.get("mutation", {}).get("patch", "-"))' "$task/task.toml")
    case $repo in /*) ;; *) repo="$tasks_root/$repo" ;; esac
    mirror=${mirrors[$repo]:-}
    if [ -z "$mirror" ]; then
        mirror="$scratch/cache/$(basename "$repo").git"
        "${G[@]}" clone -q --mirror "$repo" "$mirror"
        mirrors[$repo]=$mirror
    fi
    trial="$scratch/trials/$id"
    mkdir -p "$trial/home" "$trial/verifier"
    ws="$trial/workspace"
    "${G[@]}" -C "$mirror" worktree add -q --detach "$ws" "$commit"
    [ "$patch" = - ] || "${G[@]}" -C "$ws" apply "$task/$patch"
    (cd "$ws" && HOME="$trial/home" AKBENCH_WORKSPACE="$ws" AKBENCH_SOLUTION_DIR="$task/solution" \
        bash "$task/solution/solve.sh") >"$trial/solve.log" 2>&1
    cp -R "$task/tests" "$trial/tests"
    rc=0
    (cd "$ws" && HOME="$trial/home" AKBENCH_WORKSPACE="$ws" AKBENCH_TESTS_DIR="$trial/tests" \
        AKBENCH_VERIFIER_DIR="$trial/verifier" bash "$trial/tests/test.sh") >"$trial/test.log" 2>&1 || rc=$?
    reward=$(tr -d '[:space:]' <"$trial/verifier/reward.txt" 2>/dev/null || echo "?")
    "${G[@]}" -C "$mirror" worktree remove --force "$ws"
    n=$((n + 1))
    printf '%-24s reward=%s exit=%s %.2fs\n' "$id" "$reward" "$rc" "$(python3 -c "print($(now) - $t0)")"
done
end=$(now)
echo "TASKS=$n"
echo "TOTAL_SECONDS=$(python3 -c "print(round($end - $start, 3))")"

#!/usr/bin/env bash
# Validates the example corpus without akbench. For every task (broken-* aside):
#   1. the pinned commit, unmutated, passes the hidden tests (reward 1);
#   2. with mutation.patch applied, the hidden tests catch the bug (reward 0);
#   3. after solution/solve.sh, the hidden tests pass again (reward 1).
# test.sh runs as akbench runs it: cwd = workspace, a fresh copy of tests/ outside the
# workspace, an empty verifier folder, an empty private HOME. Every run must exit 0 and
# write reward.txt and a junit.xml with at least one <testcase>.
# The broken-* tasks are checked to be broken the intended way. A task without [source]
# (its workspace is its image's) and a task in Harbor's layout (`[environment]
# docker_image`: its test.sh works in /app and /logs) are skipped: they need akbench's
# container runtime.
# usage: examples/check.sh [tasks root]   (default: examples/tasks)
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tasks_root=$(cd "${1:-$here/tasks}" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
G=(git -c init.defaultBranch=main -c advice.detachedHead=false -c core.autocrlf=false)

passed=0
failed=0

# toml_get <task.toml> <section> <key>
toml_get() {
    python3 -c 'import sys, tomllib
d = tomllib.load(open(sys.argv[1], "rb"))
print(d.get(sys.argv[2], {}).get(sys.argv[3], ""))' "$@"
}

# evaluate <task dir> <workspace> <label>: prints the reward; returns non-zero when the
# evaluation broke (non-zero exit, no reward, bad junit).
evaluate() {
    local task=$1 ws=$2 label=$3
    local run="$scratch/run-$(basename "$task")-$label"
    mkdir -p "$run/home" "$run/verifier"
    cp -R "$task/tests" "$run/tests"
    (cd "$ws" && env HOME="$run/home" AKBENCH_WORKSPACE="$ws" AKBENCH_TESTS_DIR="$run/tests" \
        AKBENCH_VERIFIER_DIR="$run/verifier" bash "$run/tests/test.sh") >"$run/log" 2>&1
    local rc=$?
    if [ $rc -ne 0 ]; then
        echo "test.sh exited $rc ($label), log: $(tail -5 "$run/log" | tr '\n' ' ')" >&2
        return 1
    fi
    [ -f "$run/verifier/reward.txt" ] || { echo "no reward.txt ($label)" >&2; return 1; }
    python3 - "$run/verifier/junit.xml" <<'PY' || { echo "bad junit.xml ($label)" >&2; return 1; }
import sys, xml.etree.ElementTree as ET
n = len(ET.parse(sys.argv[1]).getroot().findall(".//testcase"))
sys.exit(0 if n > 0 else 1)
PY
    tr -d '[:space:]' <"$run/verifier/reward.txt"
}

check_task() {
    local task=$1 id; id=$(basename "$task")
    local repo commit patch
    repo=$(toml_get "$task/task.toml" source repo)
    commit=$(toml_get "$task/task.toml" source commit)
    patch=$(toml_get "$task/task.toml" mutation patch)
    case $repo in /*) ;; *) repo="$tasks_root/$repo" ;; esac
    # The shared helpers must be identical to examples/common.
    local lang=python; [ -f "$task/tests/hidden.rs" ] && lang=rust
    local f
    for f in "$here/common/$lang"/*; do
        cmp -s "$f" "$task/tests/$(basename "$f")" || { echo "tests/$(basename "$f") differs from common/$lang" >&2; return 1; }
    done
    local ws="$scratch/ws-$id"
    "${G[@]}" clone -q --no-checkout "$repo" "$ws" || return 1
    "${G[@]}" -C "$ws" checkout -q --detach "$commit" || return 1
    local r0 r1 r2
    r0=$(evaluate "$task" "$ws" pristine) || return 1
    [ "$r0" = 1 ] || { echo "pristine commit: reward $r0, expected 1" >&2; return 1; }
    "${G[@]}" -C "$ws" apply "$task/$patch" || { echo "mutation does not apply" >&2; return 1; }
    r1=$(evaluate "$task" "$ws" mutated) || return 1
    [ "$r1" = 0 ] || { echo "mutated: reward $r1, expected 0 (tests miss the bug)" >&2; return 1; }
    local home="$scratch/solve-home-$id"; mkdir -p "$home"
    (cd "$ws" && env HOME="$home" AKBENCH_WORKSPACE="$ws" AKBENCH_SOLUTION_DIR="$task/solution" \
        bash "$task/solution/solve.sh") >"$scratch/solve-$id.log" 2>&1 ||
        { echo "solve.sh failed: $(cat "$scratch/solve-$id.log")" >&2; return 1; }
    r2=$(evaluate "$task" "$ws" solved) || return 1
    [ "$r2" = 1 ] || { echo "solved: reward $r2, expected 1" >&2; return 1; }
    echo "pristine=$r0 mutated=$r1 solved=$r2"
}

check_broken() {
    local task=$1 id; id=$(basename "$task")
    local repo commit
    repo=$(toml_get "$task/task.toml" source repo)
    commit=$(toml_get "$task/task.toml" source commit)
    case $repo in /*) ;; *) repo="$tasks_root/$repo" ;; esac
    case $id in
    broken-missing-commit)
        [[ $commit =~ ^[0-9a-f]{40}$ ]] || { echo "commit is not a full hash" >&2; return 1; }
        local ws="$scratch/ws-$id"
        "${G[@]}" clone -q --no-checkout "$repo" "$ws" || return 1
        if "${G[@]}" -C "$ws" cat-file -e "$commit^{commit}" 2>/dev/null; then
            echo "commit $commit exists in the bundle" >&2; return 1
        fi
        echo "commit absent from the bundle, as intended" ;;
    broken-malformed)
        if [[ $commit =~ ^([0-9a-fA-F]{40}|[0-9a-fA-F]{64})$ ]]; then
            echo "commit is a full hash; the loader would accept it" >&2; return 1
        fi
        echo "commit = \"$commit\" is refused by the loader, as intended" ;;
    *) echo "unknown broken task" >&2; return 1 ;;
    esac
}

for task in "$tasks_root"/*/; do
    task=${task%/}
    id=$(basename "$task")
    [ -f "$task/task.toml" ] || continue
    start=$(date +%s)
    if [ -z "$(toml_get "$task/task.toml" source repo)" ] && [[ $id != broken-* ]]; then
        # An image-only task (Terminal-Bench's layout): its workspace is its image's, so
        # only akbench can run it (`akbench task check DIR --runtime container`).
        printf 'SKIP %-24s no [source]: checked in its image by akbench task check\n' "$id"
        continue
    fi
    if [ -n "$(toml_get "$task/task.toml" environment docker_image)" ]; then
        # Harbor's layout: its tests/test.sh follows Harbor's contract (the working folder
        # /app, the reward in /logs/verifier), which exists only in the container's view.
        printf 'SKIP %-24s Harbor layout: checked under --runtime container (ctl/tests/container.rs)\n' "$id"
        continue
    fi
    case $id in
    broken-*) out=$(check_broken "$task" 2>"$scratch/err") ;;
    *) out=$(check_task "$task" 2>"$scratch/err") ;;
    esac
    rc=$?
    secs=$(( $(date +%s) - start ))
    if [ $rc -eq 0 ]; then
        passed=$((passed + 1))
        printf 'PASS %-24s %s (%ss)\n' "$id" "$out" "$secs"
    else
        failed=$((failed + 1))
        printf 'FAIL %-24s %s\n' "$id" "$(tr '\n' ' ' <"$scratch/err")"
    fi
done
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]

#!/usr/bin/env bash
# peek agent: tries hard to read the task's hidden tests, which must be out of its reach
# while it runs. Looks for a tests/test.sh (or a test.sh in a folder named by the
# environment) in: the workspace, $HOME, the parent folders of the workspace, every
# environment-variable value that is a path (its own and its ancestors' environments,
# when readable). Prints "PEEK: found <path>" per hit, or "PEEK: nothing found"; writes
# the same report to $HOME/peek-report.txt; exits 0.
set -u
ws=${AKBENCH_WORKSPACE:-$PWD}
report="${HOME:-/tmp}/peek-report.txt"
hits=$(mktemp)
trap 'rm -f "$hits"' EXIT

# search <dir> <maxdepth>: test.sh files under a folder named tests (or directly in a
# folder named by the environment when depth is 1).
search() {
    local dir=$1 depth=$2
    [ -d "$dir" ] && [ -r "$dir" ] || return 0
    timeout 20 find "$dir" -maxdepth "$depth" \( -name .git -o -name target -o -name proc -o -name sys \) -prune \
        -o -type f -path '*/tests/test.sh' -print 2>/dev/null >>"$hits"
}

# 1. the workspace and 2. HOME, entirely.
search "$ws" 12
search "${HOME:-/nonexistent}" 12

# 3. parent folders of the workspace (a few levels down each; only shallow at /).
p=$(dirname "$ws")
while [ "$p" != "/" ]; do
    search "$p" 4
    p=$(dirname "$p")
done
[ -f /tests/test.sh ] && echo /tests/test.sh >>"$hits"

# 4. environment values that are paths: ours and our ancestors' (when readable).
envs=$(env -0 | tr '\0' '\n')
pid=$PPID
while [ -n "$pid" ] && [ "$pid" -gt 1 ] 2>/dev/null; do
    if [ -r "/proc/$pid/environ" ]; then
        envs+=$'\n'$(tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null)
    fi
    pid=$(awk '/^PPid:/ {print $2}' "/proc/$pid/status" 2>/dev/null)
done
while IFS= read -r kv; do
    value=${kv#*=}
    IFS=':' read -ra parts <<<"$value"
    for v in "${parts[@]}"; do
        case $v in /*) ;; *) continue ;; esac
        [ "$v" = / ] && continue
        if [ -f "$v" ] && [ "$(basename "$v")" = test.sh ]; then
            echo "$v" >>"$hits"
        elif [ -d "$v" ]; then
            [ -f "$v/test.sh" ] && echo "$v/test.sh" >>"$hits"
            search "$v" 3
        fi
    done
done <<<"$envs"

{
    echo "peek report for task ${AKBENCH_TASK_ID:-?} (workspace $ws)"
    if [ -s "$hits" ]; then
        sort -u "$hits" | while IFS= read -r f; do
            echo "PEEK: found $f"
        done
        sort -u "$hits" | while IFS= read -r f; do
            echo "----- $f"
            head -c 2000 "$f" 2>/dev/null
            echo
        done
    else
        echo "PEEK: nothing found"
    fi
} >"$report.tmp"
grep '^PEEK:' "$report.tmp"
mv "$report.tmp" "$report"
exit 0

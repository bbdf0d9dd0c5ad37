#!/usr/bin/env bash
# Benchmark: `akbench run single --agent oracle` over every good example task, against the
# same git and test steps done by hand (bench/by_hand.sh), measured in the same run,
# alternating, each with a cold mirror cache. Prints both medians and the ratio.
# usage: bench/run_single.sh [rounds]   (default 3)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
rounds=${1:-3}
cargo build --release -q -p akbench --manifest-path "$root/Cargo.toml"
akbench="${CARGO_TARGET_DIR:-$root/target}/release/akbench"
tasks=$(cd "$root/examples/tasks" && ls -d */ | tr -d / | grep -v '^broken-')
now() { date +%s.%N; }

run_akbench() {
    local scratch; scratch=$(mktemp -d)
    local start; start=$(now)
    for t in $tasks; do
        "$akbench" run single "$t" --agent oracle --tasks-root "$root/examples/tasks" \
            --agents-root "$root/examples/agents" --out "$scratch/out" --cache "$scratch/cache" \
            --json >/dev/null || { echo "akbench failed on $t" >&2; exit 1; }
    done
    python3 -c "print(round($(now) - $start, 3))"
    rm -rf "$scratch"
}

hand=(); ak=()
for i in $(seq "$rounds"); do
    h=$(bash "$here/by_hand.sh" | sed -n 's/^TOTAL_SECONDS=//p')
    a=$(run_akbench)
    echo "round $i: by hand ${h}s, akbench ${a}s"
    hand+=("$h"); ak+=("$a")
done
python3 - "${hand[*]}" "${ak[*]}" <<'PY'
import statistics, sys
h = [float(x) for x in sys.argv[1].split()]
a = [float(x) for x in sys.argv[2].split()]
mh, ma = statistics.median(h), statistics.median(a)
print(f"median by hand {mh:.2f}s, akbench {ma:.2f}s, ratio {ma / mh:.3f} (goal <= 1.2)")
PY

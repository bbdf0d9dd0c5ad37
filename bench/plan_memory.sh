#!/usr/bin/env bash
# Client memory of `akbench run plan` and `akbench run submit` against plan size (issue 12:
# 100,000 trials in memory that does not grow with the plan). For each size (trials: the 8
# good example tasks x `oracle` and `fail` x repetitions), plans locally and submits to a
# coordinator started by `akbench up` on a private PostgreSQL data folder (no local
# workers run anything: the run is never started), each under `/usr/bin/time`; prints the
# peak RSS (max resident set) and wall time of each command.
# usage: bench/plan_memory.sh [sizes...]   (default: 10000 100000; multiples of 16)
#        env: PORT (gRPC port, default 7470; HTTP is PORT + 1), AKBENCH_BIN (an akbench
#        binary to measure instead of building the release one)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
if [ $# -gt 0 ]; then sizes=("$@"); else sizes=(10000 100000); fi
port=${PORT:-7470}
if [ -n "${AKBENCH_BIN:-}" ]; then
    akbench=$AKBENCH_BIN
else
    cargo build --release -q -p akbench --bin akbench --manifest-path "$root/Cargo.toml"
    akbench="${CARGO_TARGET_DIR:-$root/target}/release/akbench"
fi
scratch=$(mktemp -d)
chmod 755 "$scratch" # the embedded PostgreSQL may run as user postgres
up_pid=
cleanup() {
    [ -z "$up_pid" ] || { kill -INT "$up_pid" 2>/dev/null || true; wait "$up_pid" 2>/dev/null || true; }
    rm -rf "$scratch"
}
trap cleanup EXIT
"$akbench" up --data-dir "$scratch/pg" --grpc-listen "127.0.0.1:$port" \
    --http-listen "127.0.0.1:$((port + 1))" --workers 1 --slots 1 --out "$scratch/out" \
    --cache "$scratch/cache" --tasks-root "$root/examples/tasks" \
    --agents-root "$root/examples/agents" >"$scratch/up.log" 2>&1 &
up_pid=$!
url="http://127.0.0.1:$port"
for _ in $(seq 600); do
    grep -q "$port" "$scratch/up.log" 2>/dev/null && (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.2
done
for n in "${sizes[@]}"; do
    reps=$((n / 16))
    m="$scratch/m-$n.yaml"
    cat >"$m" <<YAML
experiment: plan-memory-$n
tasks:
  root: $root/examples/tasks
  include: ["pyslug-*", "wordcount-*"]
agents:
  root: $root/examples/agents
  conditions:
    - descriptor: oracle
    - descriptor: fail
repetitions: $reps
visibility: private
YAML
    /usr/bin/time -f "%M %e" -o "$scratch/plan.time" \
        "$akbench" run plan --config "$m" --store-root "$scratch/runs" --json >"$scratch/plan.json"
    key=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run_key"])' "$scratch/plan.json")
    read -r plan_kib plan_s <"$scratch/plan.time"
    /usr/bin/time -f "%M %e" -o "$scratch/submit.time" \
        "$akbench" run submit "$key" --coordinator "$url" --store-root "$scratch/runs" --json >/dev/null
    read -r submit_kib submit_s <"$scratch/submit.time"
    printf 'trials=%s run_plan_peak_rss_mib=%s run_plan_s=%s run_submit_peak_rss_mib=%s run_submit_s=%s plan_file_mib=%s\n' \
        "$((reps * 16))" "$((plan_kib / 1024))" "$plan_s" "$((submit_kib / 1024))" "$submit_s" \
        "$(du -sm "$scratch/runs/$key" | cut -f1)"
done

#!/usr/bin/env bash
# The control plane at a million trials (issue 30, item 1), end to end with the release
# binaries: `akbench up` (a private PostgreSQL, its coordinator and one local worker of SLOTS
# slots that executes the trials) and a second coordinator, the real `akbench-coordinator`
# binary as its own process on the same database (a replica), which every `akbench` command
# below talks to, so that its RSS and CPU are its own. For N trials (the 8 good example tasks x
# AGENTS conditions of the `noop` agent x repetitions), prints one line per step: wall time,
# peak RSS and CPU of the `akbench` client (`/usr/bin/time`), the coordinator's RSS and its peak
# during the step (VmHWM, reset through clear_refs), its CPU and PostgreSQL's (every server
# process), and the load average:
#   plan, submit (SubmitPlanStream), start (StartRun), GetStatus x STATUS_CALLS while the
#   worker executes (p50 / p99 of `akbench run status --json`, each call a new client
#   process), reconcile (the coordinator's own records), records (every accepted record);
# then PostgreSQL's size of every table with its indexes (pg_total_relation_size) before the
# submit, after it and after start, and while trials finish: bytes per planned trial, per
# started trial and per finished trial.
# usage: bench/million.sh [N]   (default 1000000; a multiple of 8 x AGENTS)
#        env: PORT (gRPC port of `akbench up`, default 7480; its HTTP PORT+1, the replica's
#        gRPC PORT+2 and HTTP PORT+3), AGENTS (conditions, default 20: at most 10,000
#        repetitions each), SLOTS (the worker's slots, default 4), STATUS_CALLS (default 40),
#        FINISH_S (seconds to let trials finish before reconcile, default 60),
#        AKBENCH_BIN / COORDINATOR_BIN (binaries to measure instead of building release ones)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
n=${1:-1000000}
port=${PORT:-7480}
agents=${AGENTS:-20}
slots=${SLOTS:-4}
calls=${STATUS_CALLS:-40}
finish_s=${FINISH_S:-60}
reps=$((n / (8 * agents)))
if [ $((reps * 8 * agents)) -ne "$n" ] || [ "$reps" -gt 10000 ]; then
    echo "million.sh: $n trials is not 8 tasks x $agents conditions x at most 10,000 repetitions; fix: pick N or AGENTS" >&2
    exit 2
fi
if [ -z "${AKBENCH_BIN:-}" ] || [ -z "${COORDINATOR_BIN:-}" ]; then
    cargo build --release -q -p akbench --bin akbench -p akbench-coordinator \
        --bin akbench-coordinator --manifest-path "$root/Cargo.toml"
fi
target="${CARGO_TARGET_DIR:-$root/target}/release"
akbench=${AKBENCH_BIN:-$target/akbench}
coordinator_bin=${COORDINATOR_BIN:-$target/akbench-coordinator}
scratch=$(mktemp -d)
chmod 755 "$scratch" # the embedded PostgreSQL may run as user postgres
up_pid=
co_pid=
cleanup() {
    [ -z "$co_pid" ] || { kill -TERM "$co_pid" 2>/dev/null || true; wait "$co_pid" 2>/dev/null || true; }
    [ -z "$up_pid" ] || { kill -INT "$up_pid" 2>/dev/null || true; wait "$up_pid" 2>/dev/null || true; }
    rm -rf "$scratch"
    [ -z "${mem:-}" ] || rm -rf "$mem"
}
trap cleanup EXIT
load() { cut -d' ' -f1 /proc/loadavg; }
# wait_port PORT [PID LOG]: until PORT accepts; fails at once, printing LOG, when PID exits.
wait_port() {
    for _ in $(seq 1500); do
        (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        if [ -n "${2:-}" ] && ! kill -0 "$2" 2>/dev/null; then
            echo "million.sh: the process listening on port $1 exited:" >&2
            head -5 "$3" >&2
            exit 1
        fi
        sleep 0.2
    done
    echo "million.sh: nothing listens on port $1 after 300 s" >&2
    exit 1
}
# One lease TTL for both coordinators: replicas of one database must agree on it (the
# replica refuses to start otherwise).
ttl_ms=10000
"$akbench" up --data-dir "$scratch/pg" --grpc-listen "127.0.0.1:$port" --lease-ttl-ms "$ttl_ms" \
    --http-listen "127.0.0.1:$((port + 1))" --workers 1 --slots "$slots" --out "$scratch/out" \
    --cache "$scratch/cache" --tasks-root "$root/examples/tasks" \
    --agents-root "$root/examples/agents" >"$scratch/up.log" 2>&1 &
up_pid=$!
for _ in $(seq 1500); do
    grep -q "coordinator  http://127.0.0.1:$port" "$scratch/up.log" 2>/dev/null && break
    sleep 0.2
done
wait_port "$port"
db_port=$(sed -n 's|.*database *postgres://postgres@127.0.0.1:\([0-9]*\)/akbench.*|\1|p' "$scratch/up.log")
export PGPASSWORD
PGPASSWORD=$(cat "$scratch/pg/akbench.secret")
db_url="postgres://postgres:$PGPASSWORD@127.0.0.1:$db_port/akbench"
sql() { psql -qAtX -h 127.0.0.1 -p "$db_port" -U postgres -d akbench -c "$1"; }
"$coordinator_bin" --database-url "$db_url" --grpc-listen "127.0.0.1:$((port + 2))" \
    --lease-ttl-ms "$ttl_ms" --http-listen "127.0.0.1:$((port + 3))" >"$scratch/coordinator.log" 2>&1 &
co_pid=$!
wait_port $((port + 2)) "$co_pid" "$scratch/coordinator.log"
url="http://127.0.0.1:$((port + 2))"
kib() { awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status"; }
# The coordinator's CPU seconds so far (utime + stime of /proc/<pid>/stat).
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$1/stat"; }
# PostgreSQL's CPU seconds so far: the postmaster and its processes, and those it reaped.
postmaster=$(head -1 "$(find "$scratch/pg" -name postmaster.pid | head -1)")
pg_cpu_s() {
    { echo "$postmaster"; ps -o pid= --ppid "$postmaster"; } | while read -r p; do
        cat "/proc/$p/stat" 2>/dev/null || true
    done | awk -v hz="$(getconf CLK_TCK)" '{ t += $14 + $15 + $16 + $17 } END { printf "%.2f", t / hz }'
}
tables() {
    sql "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace WHERE c.relkind = 'r' AND s.nspname = 'public'"
}
sizes() {
    sql "SELECT c.relname || '=' || pg_total_relation_size(c.oid) FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace WHERE c.relkind = 'r' AND s.nspname = 'public' AND pg_total_relation_size(c.oid) > 1048576 ORDER BY 1" | tr '\n' ' '
}
# step NAME COMMAND...: runs an `akbench` command under /usr/bin/time and prints its line.
step() {
    local name=$1
    shift
    local l0 c0
    l0=$(load)
    c0=$(cpu_s "$co_pid")
    p0=$(pg_cpu_s)
    echo 5 >"/proc/$co_pid/clear_refs" 2>/dev/null || true
    /usr/bin/time -f "%M %e %U %S" -o "$scratch/$name.time" "$@" >"$scratch/$name.out" 2>"$scratch/$name.err" || {
        echo "million.sh: $name failed:" >&2
        cat "$scratch/$name.err" >&2
        exit 1
    }
    local client_kib wall user sys
    read -r client_kib wall user sys <"$scratch/$name.time"
    printf '%s: %s s, client CPU %s s, client peak RSS %s MiB, coordinator RSS %s MiB (peak during %s MiB), coordinator CPU %s s, PostgreSQL CPU %s s, load %s -> %s\n' \
        "$name" "$wall" "$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')" "$((client_kib / 1024))" "$(($(kib "$co_pid" VmRSS) / 1024))" \
        "$(($(kib "$co_pid" VmHWM) / 1024))" \
        "$(awk -v a="$c0" -v b="$(cpu_s "$co_pid")" 'BEGIN { printf "%.2f", b - a }')" \
        "$(awk -v a="$p0" -v b="$(pg_cpu_s)" 'BEGIN { printf "%.2f", b - a }')" "$l0" "$(load)"
}

m="$scratch/m.yaml"
{
    echo "experiment: million-$n"
    echo "tasks:"
    echo "  root: $root/examples/tasks"
    echo '  include: ["pyslug-*", "wordcount-*"]'
    echo "agents:"
    echo "  root: $root/examples/agents"
    echo "  conditions:"
    for i in $(seq "$agents"); do
        printf '    - descriptor: noop\n      name: noop-%s\n' "$i"
    done
    echo "repetitions: $reps"
    echo "visibility: private"
    echo "evaluation:"
    echo "  grade: false"
} >"$m"
echo "million.sh: $n trials (8 tasks x $agents conditions x $reps repetitions), worker slots $slots"
echo "coordinator RSS at start: $(($(kib "$co_pid" VmRSS) / 1024)) MiB; tables $(tables) bytes"
step plan "$akbench" run plan --config "$m" --store-root "$scratch/runs" --json
key=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run_key"])' "$scratch/plan.out")
echo "  plan files: $(du -sm "$scratch/runs/$key" | cut -f1) MiB"
before=$(tables)
step submit "$akbench" run submit "$key" --coordinator "$url" --store-root "$scratch/runs" --json
submitted=$(tables)
echo "  tables: $before -> $submitted bytes: $(((submitted - before) / n)) bytes per planned trial; $(sizes)"
step start "$akbench" run start "$key" --coordinator "$url" --json
sql "VACUUM ANALYZE" >/dev/null
# The vacuum leaves ~1.5 GB of pages dirty (hint bits, visibility map) that the kernel then
# writes back for tens of seconds; a commit's flush meanwhile took up to 503 ms and the status
# calls beside it 52-260 ms (2026-12-03). Written out here, so that the calls below measure
# status, not this script's own vacuum.
sql "CHECKPOINT" >/dev/null
sync
started=$(tables)
echo "  tables after start: $started bytes: $(((started - submitted) / n)) bytes more per started trial; $(sizes)"
# GetStatus while the worker executes: each call a new client process, timed by the shell.
# The server logs what was slow meanwhile (statements over 20 ms, COMMIT included,
# autovacuum, checkpoints, lock waits), printed after the calls with each call's start.
pg_log=$(find "$scratch/pg" -name postmaster.log | head -1)
log_from=$(stat -c %s "$pg_log" 2>/dev/null || echo 0)
sql "ALTER SYSTEM SET log_min_duration_statement = '20ms'" >/dev/null
sql "ALTER SYSTEM SET log_autovacuum_min_duration = 0" >/dev/null
sql "ALTER SYSTEM SET log_checkpoints = on" >/dev/null
sql "ALTER SYSTEM SET log_lock_waits = on" >/dev/null
sql "SELECT pg_reload_conf()" >/dev/null
# The floor: a client process whose GetStatus names no run (refused at once, exit 4 or so):
# start-up, connection and one round trip, no status work.
# Each call's output and timing go to memory (/dev/shm), not to this disk: a file written on
# it inside the timed region waited for the journal when the worker's commits stalled the
# disk (a 398 ms call beside a 379 ms COMMIT, 2026-12-03).
mem=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
: >"$mem/floor.ms"
for _ in $(seq 10); do
    t0=$(date +%s%N)
    "$akbench" run status no-such-run --coordinator "$url" --json >/dev/null 2>&1 || true
    t1=$(date +%s%N)
    echo $(((t1 - t0) / 1000000)) >>"$mem/floor.ms"
done
# The coordinator's own answer time (akbench_control_seconds{rpc="GetStatus"}) before and
# after the calls: the part of each call that is not the client's process or the network.
control_buckets() {
    curl -s "http://127.0.0.1:$((port + 3))/metrics" |
        sed -n 's/^akbench_control_seconds_bucket{le="\([^"]*\)",rpc="GetStatus"} \([0-9]*\)$/\1 \2/p'
}
control_buckets >"$scratch/control.before"
: >"$mem/status.calls"
l0=$(load)
for _ in $(seq "$calls"); do
    t0=$(date +%s%N)
    "$akbench" run status "$key" --coordinator "$url" --json >"$mem/status.json"
    t1=$(date +%s%N)
    echo "$t0 $(((t1 - t0) / 1000000))" >>"$mem/status.calls"
done
cut -d' ' -f2 "$mem/status.calls" >"$scratch/status.ms"
sort -n "$scratch/status.ms" >"$scratch/status.sorted"
p50=$(sed -n "$(((calls + 1) / 2))p" "$scratch/status.sorted")
p99=$(sed -n "$(((calls * 99 + 99) / 100))p" "$scratch/status.sorted")
echo "status x $calls while executing: p50 $p50 ms, p99 $p99 ms (whole client process), max $(tail -1 "$scratch/status.sorted") ms, load $l0 -> $(load)"
echo "  each call in order (ms): $(tr '\n' ' ' <"$scratch/status.ms")"
control_buckets >"$scratch/control.after"
echo "  the coordinator's own answer time (akbench_control_seconds, calls at or under each bound): $(
    paste -d' ' "$scratch/control.before" "$scratch/control.after" |
        awk '$1 == $3 { printf "<= %s s: %d; ", $1, $4 - $2 }')"
echo "  the floor (a status naming no run, 10 calls, ms): $(sort -n "$mem/floor.ms" | tr '\n' ' ')"
echo "  calls over 50 ms, with their start (UTC): $(while read -r at ms; do
    [ "$ms" -gt 50 ] && printf '%s (%s ms) ' "$(date -u -d "@$((at / 1000000000)).$(printf '%09d' $((at % 1000000000)))" +%H:%M:%S.%3N)" "$ms"
done <"$mem/status.calls")"
if [ -n "$pg_log" ]; then
    echo "  the server log meanwhile (slow statements, autovacuum, checkpoints, lock waits):"
    tail -c +"$((log_from + 1))" "$pg_log" | grep -E 'duration:|automatic (vacuum|analyze)|checkpoint|still waiting' |
        sed -E 's/(duration: [0-9.]+ ms +(statement|execute [^:]*): .{0,80}).*/\1/' | head -40 | sed 's/^/    /' || true
    echo "    (end of the server log's lines)"
fi
for setting in log_min_duration_statement log_autovacuum_min_duration log_checkpoints log_lock_waits; do
    sql "ALTER SYSTEM RESET $setting" >/dev/null
done
sql "SELECT pg_reload_conf()" >/dev/null
finished() { sql "SELECT count(*) FROM attempts WHERE terminal_state IS NOT NULL"; }
f0=$(finished)
s0=$(tables)
sleep "$finish_s"
f1=$(finished)
s1=$(tables)
if [ "$f1" -gt "$f0" ]; then
    echo "finished attempts $f0 -> $f1 in $finish_s s; tables $s0 -> $s1 bytes: $(((s1 - s0) / (f1 - f0))) bytes per finished trial (with the dead rows of its updates until vacuum); $(sizes)"
else
    echo "no attempt finished in $finish_s s ($f0): bytes per finished trial not measured"
fi
step reconcile "$akbench" run reconcile "$key" --coordinator "$url" --json
step records "$akbench" run records "$key" --coordinator "$url" --out "$scratch/records"
echo "  records exported: $(find "$scratch/records" -name run_record.json | wc -l)"
echo "coordinator CPU total $(cpu_s "$co_pid") s; load at the end $(load)"

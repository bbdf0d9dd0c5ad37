#!/usr/bin/env bash
# Benchmark: the trial page of an attempt whose trajectory has 1,000 agent steps (each with a
# shell tool call and its output), served by `akbench view`. A fake claude-code agent replays
# a generated stream-json transcript through `run single` (so the worker writes
# trajectory.json as in a real run); then the page is fetched N times with curl.
# usage: bench/transcript_page.sh [steps] [fetches]   (defaults 1000 and 10)
# AKBENCH=path/to/akbench uses that binary (default: a release build).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
steps=${1:-1000}
fetches=${2:-10}
if [ -z "${AKBENCH:-}" ]; then
    cargo build --release -q -p akbench --manifest-path "$root/Cargo.toml"
    AKBENCH="${CARGO_TARGET_DIR:-$root/target}/release/akbench"
fi
scratch=$(mktemp -d)
trap 'if [ -n "${viewer:-}" ]; then kill "$viewer"; fi; rm -rf "$scratch"' EXIT
mkdir -p "$scratch/agents"
python3 - "$steps" > "$scratch/agents/stream.jsonl" <<'PY'
import json, sys
n = int(sys.argv[1])
print(json.dumps({"type": "system", "subtype": "init", "model": "m", "claude_code_version": "2.0.0", "session_id": "s"}))
for i in range(n):
    print(json.dumps({"type": "assistant", "message": {"id": f"msg{i}", "model": "m", "content": [
        {"type": "text", "text": f"Step {i}: running the tests again."},
        {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": f"pytest -x -k case{i}"}}],
        "usage": {"input_tokens": 10, "cache_read_input_tokens": 1000 + i, "output_tokens": 40}}}))
    out = "\n".join(f"line {j} of the output of step {i}" for j in range(30))
    print(json.dumps({"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": out}]}}))
print(json.dumps({"type": "result", "subtype": "success", "is_error": False, "num_turns": n, "result": "done", "total_cost_usd": 1.5}))
PY
{ echo '#!/bin/sh'; echo "cat '$scratch/agents/stream.jsonl'"; } > "$scratch/agents/cc.sh"
chmod +x "$scratch/agents/cc.sh"
printf 'adapter = "claude-code"\nprogram = "%s"\n' "$scratch/agents/cc.sh" > "$scratch/agents/cc.toml"
# The sandbox exposes the program, not the scratch folder: run the agent unsandboxed.
# (exit 1: the fake agent does not solve the task.)
single=$("$AKBENCH" run single wordcount-001 --agent cc --runtime direct \
    --tasks-root "$root/examples/tasks" --agents-root "$scratch/agents" \
    --out "$scratch/out" --cache "$scratch/cache" --json || true)
record=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["record"])' "$single")
key=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["trial"]["key"])' "$record")
echo "trajectory: $(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["steps"]))' "$(dirname "$record")/a1/trajectory.json") steps, $(du -h "$(dirname "$record")/a1/trajectory.json" | cut -f1)"
"$AKBENCH" view "$scratch/out" --listen 127.0.0.1:0 > "$scratch/view.log" &
viewer=$!
for _ in $(seq 100); do grep -q http:// "$scratch/view.log" && break; sleep 0.1; done
url=$(grep -o 'http://[^ ]*' "$scratch/view.log" | head -1)
times=()
for _ in $(seq "$fetches"); do
    times+=("$(curl -s -o "$scratch/page.html" -w '%{time_total}' "${url}trials/$key")")
done
echo "page: $(du -h "$scratch/page.html" | cut -f1), $(grep -o '<li class="step' "$scratch/page.html" | wc -l) steps"
printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {printf "seconds: min %s median %s max %s (%d fetches)\n", a[1], a[int((NR+1)/2)], a[NR], NR}'

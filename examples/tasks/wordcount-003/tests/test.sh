#!/usr/bin/env bash
# Hidden evaluation for a wordcount (Rust) task. cwd = the workspace.
# Copies the hidden integration test into tests/, runs the whole suite with
# `cargo test --offline`, writes $AKBENCH_VERIFIER_DIR/{reward.txt,junit.xml,cargo-test.log}.
# Exits 0 once the reward is written; non-zero only when the evaluation itself broke.
set -uo pipefail
: "${AKBENCH_TESTS_DIR:?AKBENCH_TESTS_DIR is not set}"
: "${AKBENCH_VERIFIER_DIR:?AKBENCH_VERIFIER_DIR is not set}"
ws=${AKBENCH_WORKSPACE:-$PWD}
cd "$ws" || { echo "test.sh: cannot enter workspace $ws" >&2; exit 2; }

# HOME is an empty private folder: a rustup proxy there finds no toolchain, so point it
# at the rustup home next to the cargo proxy when needed.
if ! cargo --version >/dev/null 2>&1; then
    bin=$(command -v cargo) || { echo "test.sh: cargo is not on PATH" >&2; exit 2; }
    cargo_home=$(dirname "$(dirname "$bin")")
    found=
    for cand in "${RUSTUP_HOME:-}" "$(dirname "$cargo_home")/.rustup" "$cargo_home/../rustup" /usr/local/rustup /opt/rustup; do
        if [ -n "$cand" ] && [ -d "$cand" ] && RUSTUP_HOME=$cand cargo --version >/dev/null 2>&1; then
            export RUSTUP_HOME=$cand
            found=1
            break
        fi
    done
    [ -n "$found" ] || { echo "test.sh: no working cargo (set RUSTUP_HOME)" >&2; exit 2; }
fi
PY=python3
"$PY" -c 'import sys' 2>/dev/null || PY=/usr/bin/python3

export CARGO_TARGET_DIR="$ws/target" CARGO_TERM_COLOR=never
hidden="$ws/tests/akbench_hidden.rs"
mkdir -p "$ws/tests"
cp "$AKBENCH_TESTS_DIR/hidden.rs" "$hidden" || exit 2
trap 'rm -f "$hidden"' EXIT

log="$AKBENCH_VERIFIER_DIR/cargo-test.log"
cargo test --offline --no-fail-fast >"$log" 2>&1
rc=$?
cat "$log"
"$PY" "$AKBENCH_TESTS_DIR/cargo_junit.py" "$log" "$rc" "$AKBENCH_VERIFIER_DIR" || exit 2
echo "reward: $(cat "$AKBENCH_VERIFIER_DIR/reward.txt")"

# The worker image: `akbench-worker` plus what attempts need: git (workspaces), bubblewrap
# and setpriv (the `sandbox` runtime), python3 and Debian's cargo-web/rustc-web (Rust
# 1.85+: the example corpus has Python and Rust tasks, and its Cargo.lock files are
# version 4), Node.js (CLI agents such as claude-code and codex are npm packages: install
# them in a derived image with `apt-get install npm && npm install -g ...`).
# From the repository root:
#   cargo build --release -p akbench-worker -p akbench
#   docker build -f deploy/images/worker.Dockerfile -t akbench-worker .
# scripts/compose-images builds it in CI from the Debian base of scripts/base-image.
#
# The container starts as root only for deploy/images/worker-entrypoint.sh, which hands the
# worker a cgroup of its own and then runs it as uid 10001 with no capabilities; what the
# container must be allowed is in deploy/README.md ("What a worker needs").
ARG BASE=debian:bookworm-slim
FROM ${BASE}
ARG BIN_DIR=target/release
RUN set -e; pkgs="ca-certificates git bubblewrap util-linux python3 cargo-web rustc-web nodejs"; \
    dpkg -s $pkgs >/dev/null 2>&1 || { apt-get update && apt-get install -y --no-install-recommends $pkgs && rm -rf /var/lib/apt/lists/*; }; \
    useradd --system --uid 10001 --user-group --create-home --home-dir /home/akbench --shell /usr/sbin/nologin akbench
COPY deploy/images/worker-entrypoint.sh /usr/local/bin/akbench-worker-entrypoint
COPY ${BIN_DIR}/akbench-worker ${BIN_DIR}/akbench /usr/local/bin/
WORKDIR /home/akbench
ENTRYPOINT ["/usr/local/bin/akbench-worker-entrypoint"]

# The worker image: the release binary plus what attempts need: git (workspaces), bubblewrap
# (the sandboxed runtime) and Node.js (CLI agents such as claude-code and codex are npm
# packages). Build from the repository root after `cargo build --release`:
#   docker build -f deploy/images/worker.Dockerfile -t akbench-worker .
# Not built in this repository's CI (no container engine or base image is reachable there).
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates git bubblewrap nodejs npm \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --create-home --home-dir /home/akbench --shell /usr/sbin/nologin akbench
COPY target/release/akbench-worker target/release/akbench /usr/local/bin/
USER 10001:10001
WORKDIR /home/akbench
ENTRYPOINT ["/usr/local/bin/akbench-worker"]

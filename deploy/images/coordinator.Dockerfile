# The coordinator image: the release binary on a small Debian base, run as an unprivileged
# user. Build the binaries first (cargo build --release -p akbench-coordinator -p akbench
# -p akbench-worker), then, from the repository root:
#   docker build -f deploy/images/coordinator.Dockerfile -t akbench-coordinator .
# Not built in this repository's CI (no container engine or base image is reachable there).
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin akbench
COPY target/release/akbench-coordinator target/release/akbench /usr/local/bin/
USER 10001:10001
EXPOSE 7400 7401
ENTRYPOINT ["/usr/local/bin/akbench-coordinator"]

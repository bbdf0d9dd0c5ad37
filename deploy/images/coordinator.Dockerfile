# The coordinator image: `akbench-coordinator` and `akbench` (for `akbench certs`) on a
# Debian base, run as the unprivileged user 10001. From the repository root (the
# .dockerignore there keeps the build context to the binaries and deploy/):
#   cargo build --release -p akbench-coordinator -p akbench
#   docker build -f deploy/images/coordinator.Dockerfile -t akbench-coordinator .
# scripts/compose-images builds it in CI from the Debian base of scripts/base-image
# (--build-arg BASE=akbench-base:KEY, BIN_DIR=target/debug), where every package below is
# installed already and nothing is downloaded.
ARG BASE=debian:bookworm-slim
FROM ${BASE}
ARG BIN_DIR=target/release
RUN set -e; pkgs="ca-certificates curl"; \
    dpkg -s $pkgs >/dev/null 2>&1 || { apt-get update && apt-get install -y --no-install-recommends $pkgs && rm -rf /var/lib/apt/lists/*; }; \
    useradd --system --uid 10001 --user-group --home-dir /nonexistent --shell /usr/sbin/nologin akbench; \
    # /certs and its role folders: a named volume mounted at one of them starts owned by
    # 10001 (compose's `certs` job writes the CA into /certs/ca and each role's files into
    # /certs/<role> as that user; deploy/compose/compose.yaml).
    mkdir -m 0755 /certs /certs/ca /certs/coordinator /certs/worker /certs/public && \
    chmod 0700 /certs/ca && chown -R 10001:10001 /certs
COPY ${BIN_DIR}/akbench-coordinator ${BIN_DIR}/akbench /usr/local/bin/
USER 10001:10001
EXPOSE 7400 7401
ENTRYPOINT ["/usr/local/bin/akbench-coordinator"]

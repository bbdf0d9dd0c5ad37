# Prometheus for compose, from Debian's `prometheus` package. The configuration is mounted
# at /etc/akbench/prometheus.yml (deploy/observability/prometheus.yml); data in /prometheus.
ARG BASE=debian:bookworm-slim
FROM ${BASE}
RUN set -e; pkgs="prometheus"; \
    dpkg -s $pkgs >/dev/null 2>&1 || { apt-get update && apt-get install -y --no-install-recommends $pkgs && rm -rf /var/lib/apt/lists/*; }; \
    mkdir -p /prometheus && chown prometheus:prometheus /prometheus
USER prometheus
EXPOSE 9090
ENTRYPOINT ["/usr/bin/prometheus", "--config.file=/etc/akbench/prometheus.yml", "--storage.tsdb.path=/prometheus", "--web.listen-address=0.0.0.0:9090"]

# The compose stack's stand-in for the OpenTelemetry Collector (no Debian package):
# deploy/observability/otlp-sink.py, an OTLP/gRPC trace receiver on 4317 that counts what it
# receives and serves the counts as Prometheus metrics on 8889.
ARG BASE=debian:bookworm-slim
FROM ${BASE}
RUN set -e; pkgs="python3 python3-grpcio"; \
    dpkg -s $pkgs >/dev/null 2>&1 || { apt-get update && apt-get install -y --no-install-recommends $pkgs && rm -rf /var/lib/apt/lists/*; }
COPY deploy/observability/otlp-sink.py /usr/local/bin/otlp-sink
USER 65534:65534
EXPOSE 4317 8889
ENTRYPOINT ["python3", "/usr/local/bin/otlp-sink"]

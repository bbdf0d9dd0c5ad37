# PostgreSQL for compose, from Debian's `postgresql` package (no public image registry is
# reachable where CI builds this). deploy/images/postgres-entrypoint.sh makes the cluster on
# the first start (POSTGRES_USER / POSTGRES_PASSWORD / POSTGRES_DB) and runs it as the
# `postgres` user. Production uses a managed or operator-run PostgreSQL instead.
ARG BASE=debian:bookworm-slim
FROM ${BASE}
RUN set -e; pkgs="postgresql"; \
    dpkg -s $pkgs >/dev/null 2>&1 || { apt-get update && apt-get install -y --no-install-recommends $pkgs && rm -rf /var/lib/apt/lists/*; }; \
    mkdir -p /var/lib/postgresql/data /var/run/postgresql; \
    chown postgres:postgres /var/lib/postgresql/data /var/run/postgresql; chmod 0700 /var/lib/postgresql/data
COPY deploy/images/postgres-entrypoint.sh /usr/local/bin/akbench-postgres
USER postgres
ENV PGDATA=/var/lib/postgresql/data
EXPOSE 5432
ENTRYPOINT ["/usr/local/bin/akbench-postgres"]

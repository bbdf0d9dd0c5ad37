#!/bin/sh
# Starts Debian's PostgreSQL in the foreground; on the first start (empty $PGDATA) makes the
# cluster with the superuser $POSTGRES_USER / $POSTGRES_PASSWORD, database $POSTGRES_DB, and
# password logins from the container network.
set -eu
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
: "${POSTGRES_USER:?set POSTGRES_USER}" "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
db=${POSTGRES_DB:-$POSTGRES_USER}
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pw=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" > "$pw"
  "$bin/initdb" -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pw" --auth-local=trust \
    --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >/dev/null
  rm -f "$pw"
  echo "host all all 0.0.0.0/0 scram-sha-256" >> "$PGDATA/pg_hba.conf"
  "$bin/pg_ctl" -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
  "$bin/psql" -v ON_ERROR_STOP=1 -U "$POSTGRES_USER" -d postgres -qc "CREATE DATABASE \"$db\"" \
    2>/dev/null || true
  "$bin/pg_ctl" -D "$PGDATA" -m fast -w stop >/dev/null
  echo "akbench-postgres: made the cluster in $PGDATA (database $db)"
fi
exec "$bin/postgres" -D "$PGDATA" -c listen_addresses='*' -c unix_socket_directories=/var/run/postgresql

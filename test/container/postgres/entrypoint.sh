#!/usr/bin/env bash
# What the official image's entrypoint does for compose.yaml, and no more: on an empty data
# folder, initdb with POSTGRES_USER / POSTGRES_PASSWORD (scram) and POSTGRES_DB, then the *.sql
# and *.sh of /docker-entrypoint-initdb.d against a server listening on the socket only; then,
# as the postgres user, the server itself, listening on every address.
set -euo pipefail
if [ "$(id -u)" = 0 ]; then
  chown -R postgres:postgres "$PGDATA" /var/run/postgresql
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi
export POSTGRES_USER=${POSTGRES_USER:-postgres} POSTGRES_DB=${POSTGRES_DB:-${POSTGRES_USER:-postgres}}
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  initdb --username="$POSTGRES_USER" --pwfile=<(printf '%s\n' "$POSTGRES_PASSWORD") \
    --auth-local=trust --auth-host=scram-sha-256 -D "$PGDATA" >/dev/null
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
  if [ "$POSTGRES_DB" != postgres ]; then
    psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
      -c "CREATE DATABASE \"$POSTGRES_DB\"" >/dev/null
  fi
  for f in /docker-entrypoint-initdb.d/*; do
    case $f in
    *.sh) echo "running $f"; . "$f" ;;
    *.sql) echo "running $f"; psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" -f "$f" ;;
    esac
  done
  pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
  echo 'PostgreSQL init process complete; ready for start up.'
fi
exec "$@" -c listen_addresses='*'

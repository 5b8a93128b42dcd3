#!/bin/sh
# Run by the postgres image once, on the database's first start (an empty volume), as the
# superuser that POSTGRES_USER / POSTGRES_PASSWORD name: the service's own login role (no
# superuser, no role or database creation) and its own database, which it owns, so that its
# start-up can create its tables and the pg_trgm extension (a trusted one) there; nobody else may
# connect to it.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  -v role="${NOTES_DB_USER:-notes}" -v password="$NOTES_DB_PASSWORD" -v db="${NOTES_DB_NAME:-notes}" <<'SQL'
CREATE ROLE :"role" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD :'password';
CREATE DATABASE :"db" OWNER :"role";
REVOKE ALL ON DATABASE :"db" FROM PUBLIC;
SQL

#!/bin/sh
# The stand-in postgres image's entrypoint: what compose.yaml uses of the official image's contract.
# POSTGRES_USER (default postgres), POSTGRES_PASSWORD (required on a new data folder), POSTGRES_DB
# (default POSTGRES_USER); PGDATA; on a new data folder, /docker-entrypoint-initdb.d/*.sql and *.sh run
# once, in name order, against a server listening on its socket only; then the server listens on every
# address (password required: scram-sha-256), as the user postgres.
set -eu
export POSTGRES_USER="${POSTGRES_USER:-postgres}"
export POSTGRES_DB="${POSTGRES_DB:-$POSTGRES_USER}"
export PGDATA="${PGDATA:-/var/lib/postgresql/data}"

if [ "$(id -u)" = 0 ]; then
    mkdir -p "$PGDATA"
    chown postgres:postgres "$PGDATA"
    chmod 0700 "$PGDATA"
    exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi

if [ ! -s "$PGDATA/PG_VERSION" ]; then
    : "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD is not set: the database cannot be initialised without it}"
    pwfile=$(mktemp)
    printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
    initdb --username="$POSTGRES_USER" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 \
        --encoding=UTF8 --locale=C.UTF-8 -D "$PGDATA"
    rm -f "$pwfile"
    printf 'host all all all scram-sha-256\n' >> "$PGDATA/pg_hba.conf"
    printf "listen_addresses = '*'\n" >> "$PGDATA/postgresql.conf"
    pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start
    if [ "$POSTGRES_DB" != postgres ]; then
        # (psql puts a variable in from standard input only, not into -c)
        echo 'CREATE DATABASE :"db"' | psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres -v db="$POSTGRES_DB"
    fi
    for f in /docker-entrypoint-initdb.d/*; do
        case "$f" in
            *.sh)
                echo "running $f"
                if [ -x "$f" ]; then "$f"; else . "$f"; fi ;;
            *.sql)
                echo "running $f"
                psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" -f "$f" ;;
            *) ;;
        esac
    done
    pg_ctl -D "$PGDATA" -m fast -w stop
fi
exec "$@"

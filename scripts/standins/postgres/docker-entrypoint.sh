#!/bin/bash
# Initialises PGDATA on first start the way the upstream postgres image does, then runs postgres.
set -euo pipefail
: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"
: "${PGDATA:=/var/lib/postgresql/data}"
export PGDATA
as_postgres() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }

mkdir -p "$PGDATA" /var/run/postgresql
chown postgres:postgres "$PGDATA" /var/run/postgresql
chmod 700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
	if [ -z "${POSTGRES_PASSWORD:-}" ]; then
		echo "docker-entrypoint: POSTGRES_PASSWORD must be set" >&2
		exit 1
	fi
	pwfile="$(mktemp)"
	printf '%s' "$POSTGRES_PASSWORD" >"$pwfile"
	chown postgres "$pwfile"
	as_postgres initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pwfile" \
		--auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >/dev/null
	rm -f "$pwfile"
	echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
	echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"
	if [ "$POSTGRES_DB" != postgres ]; then
		echo "CREATE DATABASE \"$POSTGRES_DB\";" | as_postgres postgres --single -D "$PGDATA" postgres >/dev/null
	fi
	echo "docker-entrypoint: initialised $PGDATA for $POSTGRES_USER/$POSTGRES_DB"
fi
if [ "${1:-postgres}" = postgres ]; then
	shift || true
	exec setpriv --reuid=postgres --regid=postgres --init-groups postgres -D "$PGDATA" "$@"
fi
exec "$@"

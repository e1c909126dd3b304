#!/usr/bin/env bash
# Throwaway PostgreSQL 15 + PostGIS 3 with logical replication, for the tests (no Docker here).
# Usage (as root):
#   .ci/postgis.sh [DATA_DIR] [PORT]       install if missing, wipe DATA_DIR, initdb, start, verify
#   .ci/postgis.sh stop [DATA_DIR]         stop the server running on DATA_DIR
#   .ci/postgis.sh DATA_DIR PORT stop      same
# Defaults: DATA_DIR=/tmp/geofence-postgis PORT=55432. JDBC: user=postgres password=postgres.
set -euo pipefail

PG_BIN=/usr/lib/postgresql/15/bin   # Debian keeps initdb/pg_ctl off PATH
if [ "${1:-}" = stop ]; then action=stop data=${2:-/tmp/geofence-postgis} port=
else data=${1:-/tmp/geofence-postgis} port=${2:-55432} action=${3:-start}; fi
data=$(realpath -m "$data")   # absolute, because we cd / below
cd /                          # postgres may not be allowed into the caller's cwd (e.g. /root)

die() { echo "postgis.sh: $*" >&2; [ -f "$data/server.log" ] && tail -n 20 "$data/server.log" >&2; exit 1; }
as_pg() { runuser -u postgres -- "$@"; }   # initdb and pg_ctl refuse to run as root

stop_server() {   # only if a server is running on that dir, so re-runs and 'stop' are safe
  if [ -f "$data/PG_VERSION" ] && as_pg "$PG_BIN/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    as_pg "$PG_BIN/pg_ctl" -D "$data" -m fast -w stop >/dev/null || die "could not stop server on $data"
  fi
}
if [ "$action" = stop ]; then stop_server; echo "postgis stopped: $data"; exit 0; fi

# 1. Install only what is missing (dpkg check keeps re-runs instant); --no-upgrade leaves the
#    already-installed server version alone, no recommends keeps the download small.
missing=
for p in postgresql-15 postgresql-15-postgis-3; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing="$missing $p"
done
if [ -n "$missing" ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null || die "apt-get update failed"
  # shellcheck disable=SC2086
  apt-get install -y -q --no-install-recommends --no-upgrade $missing >/dev/null || die "apt-get install$missing failed"
fi

# 2. Fresh cluster owned by postgres. C.UTF-8 is the only UTF-8 locale a slim Debian has.
stop_server
rm -rf "$data"
install -d -o postgres -g postgres -m 700 "$data"
pwfile=$(mktemp); trap 'rm -f "$pwfile"' EXIT
echo postgres >"$pwfile"; chown postgres "$pwfile"
as_pg "$PG_BIN/initdb" -D "$data" -U postgres --pwfile="$pwfile" -E UTF8 --locale=C.UTF-8 \
  --auth-local=peer --auth-host=scram-sha-256 >"$data.initdb.log" 2>&1 \
  || { cat "$data.initdb.log" >&2; die "initdb failed"; }
rm -f "$data.initdb.log"

# 3. Settings go into postgresql.conf (no quoting trouble with pg_ctl -o). The socket lives in the
#    data dir so /var/run/postgresql need not exist; fsync etc. off because the data is throwaway.
cat >>"$data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$data'
wal_level = logical
max_replication_slots = 20
max_wal_senders = 20
fsync = off
synchronous_commit = off
full_page_writes = off
EOF
as_pg "$PG_BIN/pg_ctl" -D "$data" -l "$data/server.log" -w -t 60 start >/dev/null \
  || die "server did not start on port $port"

# 4. Prove PostGIS loads and logical replication is on, over TCP with the password, as JDBC will.
out=$(PGPASSWORD=postgres "$PG_BIN/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -X -At \
  -v ON_ERROR_STOP=1 -c 'CREATE EXTENSION IF NOT EXISTS postgis' -c 'SELECT postgis_full_version()' \
  -c 'SHOW wal_level' 2>&1) || die "verification failed: $out"
echo "$out" | grep -qx logical || die "wal_level is not logical: $out"
echo "$out" | grep -m1 POSTGIS
echo "postgis ready: jdbc:postgresql://127.0.0.1:$port/postgres user=postgres"

#!/usr/bin/env bash
# Prepares the fence database, once, when the postgres-data volume is new (the image runs the
# scripts of /docker-entrypoint-initdb.d as POSTGRES_USER in POSTGRES_DB, after its own
# 10_postgis.sh). In the order the files' comments require, in one transaction: the fences, their
# versioning and the publication, the output tables, then the least-privileged roles geofence_job
# (the job) and geofence_reader (the Flink SQL tables). Then their passwords, which psql reads from
# the environment (\getenv), so that they are on no command line. To change one later:
# ALTER ROLE ... PASSWORD '...', and the same in docker/.env (and for the reader, the DDL).
#
# The image sources this file unless it is executable, so it neither sets shell options nor relies
# on them; any failure stops the container's first start.

for variable in GEOFENCE_SOURCE_PASSWORD GEOFENCE_READER_PASSWORD; do
  if [ -z "${!variable:-}" ]; then
    echo "20-geofence.sh: $variable is not set (docker/.env)" >&2
    exit 1
  fi
done

sql=/opt/geofence/sql
psql -v ON_ERROR_STOP=1 --single-transaction --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  -f "$sql/source/fences-postgis.sql" \
  -f "$sql/source/fence-versioning.sql" \
  -f "$sql/sink/geofence-outputs.sql" \
  -f "$sql/source/geofence-role.sql" \
  || exit 1

psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" <<'SQL' || exit 1
\getenv job_password GEOFENCE_SOURCE_PASSWORD
\getenv reader_password GEOFENCE_READER_PASSWORD
ALTER ROLE geofence_job PASSWORD :'job_password';
ALTER ROLE geofence_reader PASSWORD :'reader_password';
SQL

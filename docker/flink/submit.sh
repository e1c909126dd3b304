#!/usr/bin/env bash
# The submit service of compose.yaml: flink run -d [-s SAVEPOINT] ARGS..., where ARGS are the
# service's command (-m jobmanager:8081, the job jar, run and the job's options).
#
# GEOFENCE_RESTORE_FROM, when set, is the savepoint (or retained checkpoint) to restore from, e.g.
# file:///opt/flink/savepoints/savepoint-0a1b2c-3d4e5f6a7b8c. A job named geofence that is
# running already is left alone: `docker compose up` starts this service again on every call, and
# a second instance would fight the first over the replication slot and the Kafka transactions.
# The job reads its database password from GEOFENCE_SOURCE_PASSWORD; nothing here passes it on.
set -euo pipefail

args=("$@")
jobmanager=
for ((i = 0; i + 1 < ${#args[@]}; i++)); do
  [[ "${args[i]}" == -m ]] && jobmanager="${args[i + 1]}"
done
[[ -n "$jobmanager" ]] || { echo "submit: give the JobManager as -m HOST:PORT" >&2; exit 2; }

running="$(flink list -r -m "$jobmanager" 2>/dev/null | grep -F ' : geofence (' || true)"
if [[ -n "$running" ]]; then
  echo "submit: the geofence job is running already, not submitting another:"
  echo "$running"
  if [[ -n "${GEOFENCE_RESTORE_FROM:-}" ]]; then
    echo "submit: stop it with a savepoint first (docker/README.md), then restore" >&2
    exit 1
  fi
  exit 0
fi

restore=()
if [[ -n "${GEOFENCE_RESTORE_FROM:-}" ]]; then
  restore=(-s "$GEOFENCE_RESTORE_FROM")
  echo "submit: restoring from $GEOFENCE_RESTORE_FROM"
fi
exec flink run -d "${restore[@]}" "$@"

# The whole job under java -jar and what its REST API, jcmd and the database say of it, for the
# benchmarks that run it (bench/job, bench/soak). Sourced from the repository's root after setting
#   PORT  the bench PostGIS's port     DATA  its data directory (wiped at start)
#   REST  the job's REST port          WORK  the run's work directory (job.log, cp/, sp/, tmp/)
#   HEAP  the job JVM's -Xmx           MARK  (set by the caller) epoch ms before a start, for wait_ready
#   BACKEND  the job's state backend (rocksdb unless set)
#   JAR  the job jar (job/target/geofence-job.jar unless set)   JVM_OPTS  the JVM's options besides -Xmx
#        and its GC log (-XX:+UseParallelGC unless set)        N  the fences loaded, for edit
#   JOB_OPTS  options for every run of the job (e.g. Flink's -Dkey=value), to compare configurations
# Only processes this shell started are stopped, by their ids: others run the job on this machine too.

# psql as a client over TCP (the password is in PGPASSWORD): it reads the SQL files as this user,
# wherever the clone lies.
PSQL="/usr/lib/postgresql/15/bin/psql -U postgres -h 127.0.0.1 -p $PORT -q -t -A -v ON_ERROR_STOP=1"
export PGPASSWORD=postgres GEOFENCE_SOURCE_PASSWORD=postgres
sql() { $PSQL -d bench -c "$1"; }
now_ms() { date +%s%3N; }
MARK=0
JOB_PID=
. bench/pg-cpu.sh

# Starts the PostGIS on DATA and PORT and builds the job jar.
start_postgis_and_build() {
  bash .ci/postgis.sh "$DATA" "$PORT" >/dev/null
  mvn -q -B -DskipTests package -pl job,bench -am >&2
}

# Database bench with N fences of 96 vertices and the source migration.
load_fences() {  # load_fences N
  $PSQL -d postgres -c "DROP DATABASE IF EXISTS bench" -c "CREATE DATABASE bench"
  $PSQL -d bench -c "CREATE EXTENSION IF NOT EXISTS postgis" -f docker/sql/source/fences-postgis.sql >/dev/null
  # GEOFENCE_BENCH_TABLE_SQL: statements on the empty table before the load (its storage, e.g.).
  if [ -n "${GEOFENCE_BENCH_TABLE_SQL:-}" ]; then sql "$GEOFENCE_BENCH_TABLE_SQL"; fi
  # A buffered point with 24 segments per quarter: 96 vertices and the closing one.
  sql "INSERT INTO fences (id, geom) SELECT 'f-' || g,
      ST_SetSRID(ST_Buffer(ST_MakePoint(random() * 30, random() * 30), 0.002 + random() * 0.018, 24), 4326)
      FROM generate_series(1, $1) g"
  # GEOFENCE_BENCH_VERSIONING: another version of the source contract to load the fences under
  # (a prototype of one, measured against this tree's in two runs).
  $PSQL -d bench --single-transaction -f "${GEOFENCE_BENCH_VERSIONING:-docker/sql/source/fence-versioning.sql}" >/dev/null 2>&1
  sql "VACUUM ANALYZE fences"
}

# EDITS single-statement edits over EDITS * (1 - SUPERSEDED) of the N fences, each its own commit.
edit() {  # edit EDITS SUPERSEDED
  # Past 200,000 edits, three sessions share them (each edit still its own transaction; a day's
  # 3.5 M took too long from one), split by fence so that each fence's edits keep their order.
  local sessions=1 pids=() i prefix
  [ "$1" -gt 200000 ] && sessions=3
  prefix=$(mktemp -u "$WORK/edits.XXXXXX")  # edits_at_rate runs several at once
  python3 - "$1" "$2" "$N" "$sessions" "$prefix" <<'EOF'
import random, sys
edits, superseded, n, sessions, prefix = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
distinct = min(n, max(1, round(edits * (1 - superseded))))
targets = random.sample(range(1, n + 1), distinct)
order = targets + [random.choice(targets) for _ in range(edits - distinct)]
random.shuffle(order)
files = [open(f"{prefix}-{i}.sql", "w") for i in range(sessions)]
for f in order:
    files[f % sessions].write(f"UPDATE fences SET geom = ST_Translate(geom, 0.00001, 0) WHERE id = 'f-{f}';\n")
for file in files:
    file.close()
EOF
  for i in $(seq 0 $((sessions - 1))); do
    $PSQL -d bench -f "$prefix-$i.sql" >/dev/null & pids+=($!)
  done
  wait "${pids[@]}"
  rm -f "$prefix"-*.sql
}

# RATE single-statement edits every second for SECONDS seconds, as edit makes them.
edits_at_rate() {  # edits_at_rate PER_SECOND SECONDS: a steady trickle while the job runs
  local rate=$1 secs=$2 pids=()
  for _ in $(seq 1 "$secs"); do
    edit "$rate" 0 & pids+=($!)
    sleep 1
  done
  wait "${pids[@]}"  # not the job, which runs in the background too
}

# The job in the background, its launcher's id in JOB_PID (java -jar restarts itself: the launcher
# starts the JVM that runs the job, and a SIGTERM to it stops both).
run() {  # run PARALLELISM LOCATIONS [options...]
  local p=$1 loc=$2; shift 2
  # A GC log per JVM (the launcher's and the job's): the heap left after each collection, for gc_peak.
  # shellcheck disable=SC2086 # JVM_OPTS, JOB_OPTS: options, split as the shell splits words
  java -Xmx"$HEAP" ${JVM_OPTS:--XX:+UseParallelGC} -Xlog:gc:file="$WORK/gc-%p.log":time -jar "${JAR:-job/target/geofence-job.jar}" run \
    --source-url "jdbc:postgresql://127.0.0.1:$PORT/bench" --source-user postgres --locations "$loc" \
    --parallelism "$p" --state-backend "${BACKEND:-rocksdb}" --checkpoint-dir "file://$WORK/cp" --rest-port "$REST" \
    --checkpoint-interval 10s -Dprocess.working-dir="$WORK/tmp" ${JOB_OPTS:-} "$@" >> "$WORK/job.log" 2>&1 &
  JOB_PID=$!
}
alive() {  # alive PID: running (a zombie is not)
  [ -r "/proc/$1/stat" ] && [ "$(sed 's/.*) //' "/proc/$1/stat" | cut -d' ' -f1)" != Z ]
}
# The JVM that runs the job: the launcher's child.
jvm_pid() { pgrep -P "$JOB_PID" -x java | sed -n 1p; }
json() { curl -sf "localhost:$REST$1" | python3 -c "import json,sys; d=json.load(sys.stdin); print($2)"; }
job_id() {
  for _ in $(seq 1 120); do
    id=$(json /jobs/overview '[j["jid"] for j in d["jobs"] if j["state"]=="RUNNING"][0]' 2>/dev/null) && { echo "$id"; return; }
    sleep 1
  done
  echo "no running job; see $WORK/job.log" >&2; exit 1
}
# Waits for PARALLELISM hydrated episodes of START_MODE installed after MARK, then prints the
# slowest episode's installed -> hydrated seconds, its replayed and coalesced edits, its peak heap
# (in use, garbage included: the episode's peak_heap_bytes) and gc_peak.
wait_ready() {  # wait_ready START_MODE PARALLELISM
  local mode=$1 p=$2
  for _ in $(seq 1 3600); do
    if [ "$(sql "SELECT count(*) FROM hydration_history WHERE start_mode = '$mode' AND hydrated_at IS NOT NULL
        AND installed_at > to_timestamp($MARK / 1000.0)" 2>/dev/null)" = "$p" ]; then
      sql "SELECT round(extract(epoch FROM max(hydrated_at) - min(installed_at))::numeric, 2), sum(edits_replayed),
          sum(edits_coalesced), max(peak_heap_bytes) FROM hydration_history WHERE start_mode = '$mode'
          AND installed_at > to_timestamp($MARK / 1000.0)" | tr '|' ' ' | tr '\n' ' '
      gc_peak
      return
    fi
    alive "$JOB_PID" || { echo "the job exited before it was ready ($mode); see $WORK/job.log" >&2; exit 1; }
    sleep 1
  done
  echo "never ready ($mode); see $WORK/job.log" >&2; exit 1
}
# The most heap the job's JVM held after any collection so far, bytes: what a warm-up kept alive
# (garbage the old generation has not collected yet included), where peak_heap_bytes counts every
# allocation the young generation had room for.
gc_peak() {
  python3 - "$WORK/gc-$(jvm_pid).log" <<'PY'
import re, sys
units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
after = [int(n) * units[u] for n, u in re.findall(r"\d+[KMG]->(\d+)([KMG])\(", open(sys.argv[1]).read())]
print(max(after, default=0))
PY
}
steady_heap() {  # used heap right after a full GC, bytes
  local pid; pid=$(jvm_pid)
  jcmd "$pid" GC.run >/dev/null
  # Parallel GC's young and old generations (Metaspace is not heap): 0 under another JVM_OPTS collector.
  jcmd "$pid" GC.heap_info | python3 -c "import re,sys; print(1024 * sum(int(u) for u in re.findall(r'(?m)^\s*(?:PSYoungGen|ParOldGen)\s+total \d+K, used (\d+)K', sys.stdin.read())))"
}
jvm_cpu_s() {  # CPU seconds of a process, every thread
  python3 -c "import os; f = open('/proc/$1/stat').read().rsplit(')', 1)[1].split(); print((int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK'))"
}
# CPU seconds of a JVM's live threads by name, digits left out (GC Thread#0 and #1 are one), the
# most first: "name=seconds" separated by ", ", the first LIMIT.
jvm_threads_cpu() {  # jvm_threads_cpu PID LIMIT
  python3 - "$1" "$2" <<'PY'
import collections, os, re, sys
pid, limit, by = sys.argv[1], int(sys.argv[2]), collections.Counter()
for tid in os.listdir(f'/proc/{pid}/task'):
    try:
        stat = open(f'/proc/{pid}/task/{tid}/stat').read()
    except OSError:
        continue
    name = re.sub(r'\d+', '', stat[stat.index('(') + 1:stat.rindex(')')]).strip()
    f = stat[stat.rindex(')') + 2:].split()
    by[name] += (int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK')
print(', '.join(f'{name}={s:.1f}' for name, s in by.most_common(limit)))
PY
}
# Stops the job's processes and waits until they are gone and the replication slot is free (the
# embedded cluster stays up after its job ends; the process goes, and with it the slot).
stop_job() {
  local child; child=$(jvm_pid)
  alive "$JOB_PID" && kill "$JOB_PID" 2>/dev/null || true
  while alive "$JOB_PID" || { [ -n "$child" ] && alive "$child"; } \
      || [ "$(sql "SELECT count(*) FROM pg_replication_slots WHERE active")" != 0 ]; do sleep 1; done
  rm -rf "$WORK/tmp"  # the stopped job's RocksDB working files
}
# For an EXIT trap: the job, if it still runs (and the id is still the jar's, not a reused one).
kill_job() {
  if [ -n "$JOB_PID" ] && alive "$JOB_PID" && grep -q geofence-job.jar "/proc/$JOB_PID/cmdline" 2>/dev/null; then
    kill "$JOB_PID" 2>/dev/null || true
    while alive "$JOB_PID"; do sleep 1; done
  fi
}
stop_with_savepoint() {  # stop_with_savepoint JOB [FORMAT]: prints the savepoint path
  local job=$1 format=${2:-CANONICAL} req sp
  req=$(curl -sf -X POST "localhost:$REST/jobs/$job/stop" -H 'Content-Type: application/json' \
    -d "{\"targetDirectory\":\"file://$WORK/sp\",\"drain\":false,\"formatType\":\"$format\"}" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["request-id"])')
  for _ in $(seq 1 600); do
    sp=$(json "/jobs/$job/savepoints/$req" 'd.get("operation",{}).get("location","") if d["status"]["id"]=="COMPLETED" else ""' 2>/dev/null || true)
    [ -n "$sp" ] && break
    sleep 1
  done
  if [ -z "$sp" ]; then
    # Where each thread of the job's JVM waits, for whoever looks into why.
    jstack "$(jvm_pid)" > "$WORK/threads-at-savepoint-timeout.txt" 2>&1 || true
    echo "no savepoint; see $WORK/job.log and $WORK/threads-at-savepoint-timeout.txt" >&2; exit 1
  fi
  stop_job
  echo "${sp#file:}"
}
checkpoints() {  # completed checkpoints, newest first: id, checkpointed (incremental) size, full state size
  json "/jobs/$1/checkpoints" "'\\n'.join('%d %d %d' % (c['id'], c['checkpointed_size'], c['state_size']) for c in d['history'] if c['status'] == 'COMPLETED')"
}

# The changelog's files (java -jar keeps them in <checkpoint-dir>/changelog), listed every second
# into FILE until it is stopped: Flink deletes them while the job runs (once a materialization
# makes them unneeded), so what the directory holds at the end is not what was written.
watch_changelog() {  # watch_changelog FILE &
  while true; do
    find "$WORK/cp/changelog" -type f -printf '%p %s\n' 2>/dev/null >> "$1" || true
    sleep 1
  done
}
# Starts watch_changelog into $WORK/NAME.files, the files already there set aside.
changelog_watch_start() {  # changelog_watch_start NAME: sets WATCHER
  find "$WORK/cp/changelog" -type f -printf '%p\n' 2>/dev/null | sort > "$WORK/$1.before" || true
  : > "$WORK/$1.files"
  watch_changelog "$WORK/$1.files" & WATCHER=$!
}
# Stops the watch; prints the bytes of the changelog files written since its start.
changelog_watch_stop() {  # changelog_watch_stop NAME
  kill "$WATCHER"; wait "$WATCHER" 2>/dev/null || true
  grep -v -F -f "$WORK/$1.before" "$WORK/$1.files" > "$WORK/$1.new" || true
  changelog_written "$WORK/$1.new"
}
# Bytes of the files in FILE, each at its largest.
changelog_written() {  # changelog_written FILE
  python3 - "$1" <<'PY'
import sys
sizes = {}
for line in open(sys.argv[1]):
    path, size = line.rsplit(" ", 1)
    sizes[path] = max(sizes.get(path, 0), int(size))
print(sum(sizes.values()))
PY
}

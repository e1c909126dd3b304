"""CPU per location by stage of the whole job, for bench/job's fleet runs (issue 18, item 2).

Usage: python3 bench/job-stages.py THREADS_BEFORE THREADS_AFTER PROFILE LOCATIONS POSTGRES_CPU_S FROM_MS TO_MS

THREADS_* are `jcmd PID Thread.print` dumps at the start and the end of the window (each thread's
cpu=...ms); PROFILE is `jfr print --stack-depth 64 --events jdk.ExecutionSample` of a
recording that covers the window, whose samples outside [FROM_MS, TO_MS] (epoch milliseconds)
are left out; LOCATIONS the locations the source emitted in the window; POSTGRES_CPU_S the CPU
seconds PostgreSQL spent meanwhile. Each thread's CPU time is split over
the stages in proportion to its samples (a sample belongs to the first stage, in the order below,
that one of its frames names); threads without samples (the collector, the compiler) count whole.
Prints one Markdown table: microseconds of CPU per location, by stage.
"""
import datetime
import re
import sys
from collections import defaultdict

STAGES = [
    ("generate (the benchmark's fleet, JSON lines)", ("dev.geofence.connectors.location.Fleet", "LocationJson.format")),
    ("parse (JSON)", ("LocationJson.parse", "ParseLocations")),
    ("sinks (JDBC client side)", ("PresenceSink", "org.postgresql", "connector.jdbc", "JdbcOutputs")),
    ("index (batch and single queries)", ("FenceIndex.forEachCovering", "FenceIndex.covering", "LocationBatch.query")),
    ("presence (keyed state)", ("KeyedMembership", "rocksdb", "RocksDB", "heap.CopyOnWriteStateMap")),
    ("clock (hold, release)", ("EventClock",)),
    ("evaluation (ENTER/EXIT, in-memory presence)", ("operator.Evaluation", "GeofenceTrigger")),
    ("broadcast: serialize, buffers", ("RecordWriter", "StreamElementSerializer.serialize", "PojoSerializer.serialize",
                                       "BufferBuilder", "ChannelSelectorRecordWriter", "BroadcastRecordWriter")),
    ("broadcast: deserialize", ("RecordDeserializer", "StreamElementSerializer.deserialize", "PojoSerializer.deserialize",
                                "StreamTaskNetworkInput", "InputGate", "StringSerializer.deserialize")),
    ("fence stream (CDC, heartbeats)", ("debezium", "cdc.", "FenceChange")),
]
THREAD_STAGES = [
    (re.compile(r"GC Thread|VM Thread|G1|ParGC|PSYoung|VM Periodic"), "garbage collection, VM"),
    (re.compile(r"C[12] CompilerThread|Compiler"), "JIT compiler"),
    (re.compile(r"Fence changes|Fence edits|debezium|blc-|pgjdbc"), "fence stream (CDC, heartbeats)"),
    (re.compile(r"OutputFlusher"), "broadcast: serialize, buffers"),
    (re.compile(r"jdbc|Jdbc"), "sinks (JDBC client side)"),
]


def thread_cpu(path):
    cpu = {}
    for line in open(path):
        m = re.match(r'^"(.*?)" .*?cpu=([\d.]+)ms', line)
        if m:
            cpu[m.group(1)] = cpu.get(m.group(1), 0) + float(m.group(2))
    return cpu


def stage_of_frames(frames):
    for name, needles in STAGES:
        for frame in frames:
            if any(n in frame for n in needles):
                return name
    return None


def thread_stage(thread):
    for pattern, name in THREAD_STAGES:
        if pattern.search(thread):
            return name
    return "other (Flink runtime, timers, network)"


def main():
    before, after = thread_cpu(sys.argv[1]), thread_cpu(sys.argv[2])
    locations = float(sys.argv[4])
    postgres_s = float(sys.argv[5])
    # jfr prints a sample's startTime as the local time of day.
    window = [datetime.datetime.fromtimestamp(int(ms) / 1000).time() for ms in sys.argv[6:8]]
    def inside(t):
        return window[0] <= t <= window[1] if window[0] <= window[1] else t >= window[0] or t <= window[1]
    samples = defaultdict(lambda: defaultdict(int))
    thread, frames, wanted = None, None, True
    for line in open(sys.argv[3]):
        m = re.match(r'\s*sampledThread = "(.*)" \(javaThreadId', line)
        t = re.match(r'\s*startTime = (\d\d:\d\d:\d\d(?:\.\d+)?)', line)
        if t:
            wanted = inside(datetime.time.fromisoformat(t.group(1)))
        elif m:
            thread = m.group(1)
        elif line.strip() == "stackTrace = [":
            frames = []
        elif frames is not None and line.strip() in ("]", "...") :
            if wanted:
                samples[thread][stage_of_frames(frames) or thread_stage(thread)] += 1
            frames = None
        elif frames is not None:
            frames.append(line.strip())
    micros = defaultdict(float)
    for thread, ms in after.items():
        spent = ms - before.get(thread, 0)
        if spent <= 0:
            continue
        counted = samples.get(thread)
        if counted:
            total = sum(counted.values())
            for stage, n in counted.items():
                micros[stage] += spent * 1000 * n / total / locations
        else:
            micros[thread_stage(thread)] += spent * 1000 / locations
    micros["PostgreSQL (sink writes, CDC)"] = postgres_s * 1e6 / locations
    total = sum(micros.values())
    print("| stage | CPU µs per location | share |")
    print("|---|---:|---:|")
    for stage, us in sorted(micros.items(), key=lambda kv: -kv[1]):
        print(f"| {stage} | {us:.2f} | {100 * us / total:.0f} % |")
    print(f"| all | {total:.2f} | 100 % |")


main()

package dev.geofence.bench;

import dev.geofence.connectors.model.GeofenceTrigger;
import dev.geofence.connectors.model.TriggerCause;
import dev.geofence.connectors.model.TriggerKind;
import dev.geofence.connectors.sink.JdbcOutputs;
import dev.geofence.connectors.source.Migrations;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import java.sql.Timestamp;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.connector.jdbc.JdbcConnectionOptions;
import org.apache.flink.connector.jdbc.JdbcExecutionOptions;
import org.apache.flink.connector.jdbc.core.datastream.sink.JdbcSink;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * The triggers per second the output sinks sustain on their own (issue 18, item 3): a bounded
 * Flink job on a local cluster turns a sequence into triggers and writes each to geofence_triggers
 * and geofence_presence, as the job does, for each sink configuration in turn, interleaved over
 * rounds. The first half of the triggers are ENTERs of distinct (object, fence) pairs over 200,000
 * objects, the second half the EXITs of the same pairs, so that presence rows come and go and no
 * batch holds both triggers of a pair (which the new presence writer would fold into one).
 *
 * <p>The baseline is the sinks as they were before: 500 rows or 200 ms per batch, no statement
 * rewriting, presence as one CTE statement per trigger (kept here, verbatim, for the comparison).
 * Each run reports the clock, the CPU of this JVM and that of the PostgreSQL server (its
 * postmaster's own and its exited backends' time, from /proc), all per trigger.
 *
 * <p>Usage: SinkBenchmark JDBC_URL USER POSTMASTER_PID [--triggers N] [--rounds R] [--parallelism P]
 * (the password from PGPASSWORD).
 */
public final class SinkBenchmark {

  /** The presence statement of the sinks before issue 18: one per trigger, in order. */
  private static final String BASELINE_PRESENCE =
      "WITH gone AS (DELETE FROM geofence_presence WHERE ? = 'EXIT' AND object_id = ? AND fence_id = ?)"
          + " INSERT INTO geofence_presence (object_id, fence_id, entered_at, fence_seq, tenant)"
          + " SELECT ?, ?, ?::timestamptz, ?::bigint, ? WHERE ? = 'ENTER'"
          + " ON CONFLICT (object_id, fence_id) DO UPDATE SET entered_at = excluded.entered_at,"
          + " fence_seq = excluded.fence_seq, tenant = excluded.tenant";

  private static final int OBJECTS = 200_000;
  private static final int FENCES = 1_200_000;

  /** Which output tables a run writes. */
  private enum Tables { BOTH, TRIGGERS, PRESENCE }

  private record Variant(String name, boolean baseline, int batchSize, Duration interval, Tables tables) {}

  private SinkBenchmark() {}

  public static void main(String[] args) throws Exception {
    String url = args[0];
    String user = args[1];
    long postmaster = Long.parseLong(args[2]);
    long triggers = 1_000_000;
    int rounds = 2;
    int parallelism = 2;
    for (int i = 3; i < args.length; i += 2) {
      switch (args[i]) {
        case "--triggers" -> triggers = Long.parseLong(args[i + 1]);
        case "--rounds" -> rounds = Integer.parseInt(args[i + 1]);
        case "--parallelism" -> parallelism = Integer.parseInt(args[i + 1]);
        default -> throw new IllegalArgumentException("unknown option " + args[i]);
      }
    }
    String password = System.getenv().getOrDefault("PGPASSWORD", "");
    try (Connection c = DriverManager.getConnection(url, user, password)) {
      Migrations.ensureOutputs(c);
    }
    List<Variant> variants = List.of(
        new Variant("before: 500 rows / 200 ms, row by row", true, 500, Duration.ofMillis(200), Tables.BOTH),
        new Variant("now, 500 rows / 200 ms", false, 500, Duration.ofMillis(200), Tables.BOTH),
        new Variant("now, 2000 rows / 200 ms (the default)", false, 2000, Duration.ofMillis(200), Tables.BOTH),
        new Variant("now, 5000 rows / 200 ms", false, 5000, Duration.ofMillis(200), Tables.BOTH),
        new Variant("before, geofence_triggers alone", true, 500, Duration.ofMillis(200), Tables.TRIGGERS),
        new Variant("now (default), geofence_triggers alone", false, 2000, Duration.ofMillis(200), Tables.TRIGGERS),
        new Variant("before, geofence_presence alone", true, 500, Duration.ofMillis(200), Tables.PRESENCE),
        new Variant("now (default), geofence_presence alone", false, 2000, Duration.ofMillis(200), Tables.PRESENCE));
    System.out.printf(Locale.ROOT, "%,d triggers per run, parallelism %d, %d rounds; \"vs before\" against the row above of the"
        + " same tables%n%n", triggers, parallelism, rounds);
    System.out.println("| round | sinks | triggers/s | JVM CPU µs/trigger | PostgreSQL CPU µs/trigger | vs before |");
    System.out.println("|---:|---|---:|---:|---:|---:|");
    for (int round = 1; round <= rounds; round++) {
      double before = 0;
      for (Variant v : variants) {
        truncate(url, user, password);
        long jvmCpu = Measure.processCpuNanos();
        long pgCpu = postgresCpuTicks(postmaster);
        long start = System.nanoTime();
        run(v, url, user, password, triggers, parallelism);
        double seconds = (System.nanoTime() - start) / 1e9;
        Thread.sleep(500); // the backends exit after the job's connections close; their time then counts
        double jvmMicros = (Measure.processCpuNanos() - jvmCpu) / 1e3 / triggers;
        double pgMicros = (postgresCpuTicks(postmaster) - pgCpu) * 1e6 / 100 / triggers;
        double rate = triggers / seconds;
        if (v.baseline()) {
          before = rate;
        }
        System.out.printf(Locale.ROOT, "| %d | %s | %,.0f | %.1f | %.1f | %.2fx |%n", round, v.name(), rate, jvmMicros, pgMicros, rate / before);
      }
    }
  }

  private static void run(Variant v, String url, String user, String password, long triggers, int parallelism) throws Exception {
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
    env.setParallelism(parallelism);
    long half = triggers / 2;
    DataStream<GeofenceTrigger> stream = env.fromSequence(0, triggers - 1)
        .map(n -> {
          long pair = n % half;
          TriggerKind kind = n < half ? TriggerKind.ENTER : TriggerKind.EXIT;
          return new GeofenceTrigger("object-" + (pair % OBJECTS), "f-" + Math.floorMod(pair * 2654435761L, FENCES), kind, TriggerCause.LOCATION,
              1_700_000_000_000L + pair * 1000 + (kind == TriggerKind.EXIT ? 500 : 0), 1.5, 2.5, 1, null, System.currentTimeMillis());
        })
        .returns(TypeInformation.of(GeofenceTrigger.class));
    JdbcExecutionOptions batches = JdbcOutputs.batches(v.batchSize(), v.interval());
    JdbcConnectionOptions connection = new JdbcConnectionOptions.JdbcConnectionOptionsBuilder()
        .withUrl(v.baseline() ? url : JdbcOutputs.withBatchedInserts(url))
        .withDriverName("org.postgresql.Driver").withUsername(user).withPassword(password).build();
    if (v.tables() != Tables.PRESENCE) {
      stream.sinkTo(JdbcOutputs.triggers(connection, batches)).name("geofence_triggers");
    }
    if (v.tables() == Tables.TRIGGERS) {
      env.execute("sinks: " + v.name());
      return;
    }
    Sink<GeofenceTrigger> presence = v.baseline()
        ? JdbcSink.<GeofenceTrigger>builder().withExecutionOptions(batches)
            .withQueryStatement(BASELINE_PRESENCE, (s, t) -> {
              s.setString(1, t.kind.name());
              s.setString(2, t.objectId);
              s.setString(3, t.fenceId);
              s.setString(4, t.objectId);
              s.setString(5, t.fenceId);
              s.setTimestamp(6, new Timestamp(t.eventTime));
              s.setLong(7, t.fenceSeq);
              s.setString(8, t.tenant);
              s.setString(9, t.kind.name());
            })
            .buildAtLeastOnce(connection)
        : JdbcOutputs.presence(connection, batches);
    stream.sinkTo(presence).name("geofence_presence");
    env.execute("sinks: " + v.name());
  }

  private static void truncate(String url, String user, String password) throws Exception {
    try (Connection c = DriverManager.getConnection(url, user, password); Statement s = c.createStatement()) {
      s.execute("TRUNCATE geofence_triggers, geofence_presence");
      s.execute("CHECKPOINT");
    }
  }

  /** CPU ticks (1/100 s) of the postmaster and of every backend it has reaped. */
  private static long postgresCpuTicks(long pid) throws Exception {
    String stat = Files.readString(Path.of("/proc/" + pid + "/stat"));
    String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
    // Fields 14 to 17 of proc(5): utime, stime, cutime, cstime (f[0] is field 3).
    long ticks = 0;
    for (int i = 11; i <= 14; i++) {
      ticks += Long.parseLong(f[i]);
    }
    return ticks;
  }
}

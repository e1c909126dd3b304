package dev.geofence.job.cli;

import dev.geofence.connectors.source.Migrations;
import dev.geofence.job.GeneratedFences;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.IOException;
import java.io.PrintStream;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Timestamp;
import java.time.Duration;
import java.time.LocalTime;
import java.time.ZoneId;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Stream;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.locationtech.jts.geom.Polygon;
import org.locationtech.jts.io.WKBWriter;

/**
 * {@code demo}: everything on this machine with one command. Starts an embedded PostgreSQL with
 * logical replication, applies the migrations, loads generated fences, runs the job on an embedded
 * MiniCluster with generated moving objects, edits fences while it runs, and prints progress and a
 * live tail of triggers. The tables stay queryable while it runs; it says how to connect.
 *
 * <p>Its directory is kept: stopping (Ctrl-C, a SIGTERM or the end of {@code --duration}) stops the
 * job with a savepoint, and the next demo in the same directory reuses the database (fences,
 * edits, outputs, the replication slot) and restores from that savepoint, so a second run shows a
 * warm start: gap check, catch-up and a second hydration episode.
 */
final class Demo {

  static final Set<String> OPTIONS = Set.of("fences", "objects", "port", "rest-port", "dir", "parallelism", "duration");

  static final String HELP = String.join("\n",
      "Usage: java -jar geofence-job.jar demo [options]",
      "",
      "Runs the whole thing on this machine: an embedded PostgreSQL (logical replication), generated",
      "fences, the job with moving objects, fence edits while it runs, and a live tail of triggers.",
      "Stopping it (Ctrl-C) takes a savepoint; the next demo in the same directory restores from it.",
      "",
      "  --fences N        fences to generate on the first run (default 2000)",
      "  --objects N       moving objects, one location each per second (default 200)",
      "  --port P          PostgreSQL port on 127.0.0.1 (default 54329)",
      "  --rest-port P     Flink REST port on 127.0.0.1 (default 8081)",
      "  --dir PATH        where PostgreSQL, the checkpoints and savepoints live (default ./geofence-demo)",
      "  --parallelism N   job parallelism (default 2)",
      "  --duration D      stop after D, e.g. 2m (default: run until Ctrl-C)");

  private static final String SLOT = "geofence";

  private Demo() {}

  static void run(Options options, PrintStream out) throws Exception {
    int fenceCount = options.getInt("fences", 2000);
    int objects = options.getInt("objects", 200);
    int port = options.getInt("port", 54329);
    int restPort = options.getInt("rest-port", 8081);
    int parallelism = options.getInt("parallelism", 2);
    Duration duration = options.getDuration("duration", Duration.ZERO);
    Path dir = Path.of(options.get("dir", "geofence-demo")).toAbsolutePath();
    if (fenceCount < 1 || objects < 1) {
      throw new IllegalArgumentException("the demo needs at least one fence and one object");
    }

    Path data = dir.resolve("postgres");
    boolean again = Files.exists(data.resolve("PG_VERSION"));
    out.printf("[demo] %s PostgreSQL (wal_level=logical) on 127.0.0.1:%d, data in %s%n", again ? "restarting" : "starting", port, data);
    Files.createDirectories(dir);
    EmbeddedPostgres postgres = EmbeddedPostgres.builder()
        .setPort(port)
        .setDataDirectory(data)
        .setCleanDataDirectory(false)
        // Stopped by the demo itself, after the job's savepoint: the job still reads from it then.
        .setRegisterShutdownHook(false)
        .setServerConfig("wal_level", "logical")
        .setServerConfig("max_replication_slots", "10")
        .setServerConfig("max_wal_senders", "10")
        .start();
    // From here on, a Ctrl-C or SIGTERM stops the job (once it runs) and then PostgreSQL.
    Path savepoints = dir.resolve("savepoints");
    AtomicReference<JobClient> job = new AtomicReference<>();
    AtomicBoolean stopping = new AtomicBoolean();
    Thread stop = new Thread(() -> {
      stopping.set(true);
      stop(job.get(), savepoints, postgres, out);
    });
    Runtime.getRuntime().addShutdownHook(stop);
    String url = "jdbc:postgresql://localhost:" + port + "/postgres";
    Connection db = postgres.getPostgresDatabase().getConnection();
    Files.writeString(dir.resolve("README.txt"), "PostgreSQL of the geofence demo: psql -h localhost -p " + port + " -U postgres\n");
    Migrations.applySource(db, Migrations.GeometryColumn.WKB);
    SplittableRandom random = new SplittableRandom(System.nanoTime());
    long present = queryLong(db, "SELECT count(*) FROM fences");
    if (present == 0) {
      loadFences(db, fenceCount, random, out);
    } else {
      out.printf("[demo] %d fences from the last run are in PostgreSQL%n", present);
    }

    Path savepoint = newestSavepoint(savepoints);
    if (savepoint == null && dropSlot(db)) {
      // Without a savepoint the job snapshots the table afresh; the last run's slot would only
      // replay what that snapshot reads anyway.
      out.println("[demo] the last run left no savepoint: starting afresh from the table");
    }
    Configuration config = new Configuration();
    config.set(RestOptions.PORT, restPort);
    List<String> runArgs = new ArrayList<>(List.of(
        "--source-url", url, "--source-user", "postgres", "--job-name", JOB_NAME, "--slot", SLOT, "--locations", "generator:" + objects,
        "--parallelism", Integer.toString(parallelism), "--checkpoint-interval", "5s",
        "--checkpoint-dir", dir.resolve("checkpoints").toUri().toString(), "--savepoint-dir", savepoints.toUri().toString(),
        "--heartbeat-interval", "500ms"));
    if (savepoint != null) {
      runArgs.addAll(List.of("--from-savepoint", savepoint.toString()));
      out.printf("[demo] restoring the job from %s%n", savepoint);
    }
    out.printf("[demo] starting the job: parallelism %d, %d moving objects, Flink REST on http://localhost:%d%n", parallelism, objects, restPort);
    job.set(GeofenceCommand.prepare(runArgs.toArray(String[]::new), "", config).executeAsync());
    out.printf("[demo] the tables are queryable while the demo runs:%n"
        + "         psql -h localhost -p %d -U postgres -c 'SELECT kind, count(*) FROM geofence_triggers GROUP BY kind'%n"
        + "         (tables: fences, fence_stats, geofence_triggers, geofence_presence, geofence_dead_letters, hydration_history)%n", port);

    long start = System.currentTimeMillis();
    Timestamp seen = new Timestamp(start);
    long nextEdit = start + 5000;
    boolean ready = false;
    String restUrl = "http://localhost:" + restPort;
    try {
      while (!stopping.get() && (duration.isZero() || System.currentTimeMillis() - start < duration.toMillis())) {
        Thread.sleep(1000);
        if (!ready) {
          ReadinessProbe.Answer answer = ReadinessProbe.ask(restUrl, job.get().getJobID().toString(), Duration.ofSeconds(2));
          ready = answer.ready();
          out.println("[demo] index " + answer.line() + (ready ? "; evaluating locations" : ""));
        }
        seen = tail(db, seen, out);
        if (System.currentTimeMillis() >= nextEdit) {
          edit(db, random, out);
          nextEdit = System.currentTimeMillis() + 5000;
        }
      }
    } catch (SQLException e) {
      if (!stopping.get()) {
        throw e;
      }
    }
    try {
      Runtime.getRuntime().removeShutdownHook(stop);
    } catch (IllegalStateException shuttingDown) {
      return; // Ctrl-C or a SIGTERM: the shutdown hook stops the job and then PostgreSQL
    }
    stop(job.get(), savepoints, postgres, out);
  }

  /** The job's name in Flink and in {@code hydration_history}. */
  static final String JOB_NAME = "geofence-demo";

  /** Stops the job, if it was started, with a savepoint for the next run (or cancels it), then PostgreSQL. */
  private static void stop(JobClient job, Path savepoints, EmbeddedPostgres postgres, PrintStream out) {
    if (job != null) {
      stopJob(job, savepoints, out);
    }
    try {
      postgres.close();
      out.println("[demo] PostgreSQL stopped");
    } catch (Exception e) {
      out.printf("[demo] PostgreSQL did not stop cleanly (%s)%n", rootCause(e));
    }
  }

  private static void stopJob(JobClient job, Path savepoints, PrintStream out) {
    out.println("[demo] stopping the job with a savepoint");
    try {
      String path = job.stopWithSavepoint(false, savepoints.toUri().toString(), SavepointFormatType.CANONICAL)
          .get(60, TimeUnit.SECONDS);
      out.printf("[demo] savepoint %s; a demo started in this directory again restores from it%n", path);
      removeOlderSavepoints(savepoints, Path.of(URI.create(path)));
    } catch (Exception e) {
      out.printf("[demo] no savepoint (%s); the next demo here starts afresh%n", rootCause(e));
      try {
        job.cancel().get(30, TimeUnit.SECONDS);
      } catch (Exception gone) {
        // the job has ended already
      }
    }
  }

  /** The newest complete savepoint under {@code savepoints}, or null. */
  static Path newestSavepoint(Path savepoints) throws IOException {
    if (!Files.isDirectory(savepoints)) {
      return null;
    }
    try (Stream<Path> all = Files.list(savepoints)) {
      return all.filter(p -> Files.isRegularFile(p.resolve("_metadata")))
          .max(Comparator.comparing(Demo::modified))
          .orElse(null);
    }
  }

  private static void removeOlderSavepoints(Path savepoints, Path keep) throws IOException {
    try (Stream<Path> all = Files.list(savepoints)) {
      for (Path old : all.filter(p -> !p.equals(keep)).toList()) {
        try (Stream<Path> files = Files.walk(old)) {
          for (Path file : files.sorted(Comparator.reverseOrder()).toList()) {
            Files.delete(file);
          }
        }
      }
    }
  }

  private static FileTime modified(Path path) {
    try {
      return Files.getLastModifiedTime(path.resolve("_metadata"));
    } catch (IOException e) {
      return FileTime.fromMillis(0);
    }
  }

  /** Drops the demo's replication slot if a previous run left it; true if it did. */
  private static boolean dropSlot(Connection db) throws Exception {
    try (PreparedStatement drop = db.prepareStatement(
        "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = ?")) {
      drop.setString(1, SLOT);
      try (ResultSet r = drop.executeQuery()) {
        return r.next();
      }
    }
  }

  private static String rootCause(Throwable e) {
    Throwable t = e;
    while (t.getCause() != null) {
      t = t.getCause();
    }
    return t.getMessage() == null ? t.getClass().getSimpleName() : t.getMessage();
  }

  private static void loadFences(Connection db, int count, SplittableRandom random, PrintStream out) throws Exception {
    db.setAutoCommit(false);
    try (PreparedStatement insert = db.prepareStatement("INSERT INTO fences (id, geom, tenant) VALUES (?, ?, NULL)")) {
      for (int i = 0; i < count; i++) {
        insert.setString(1, "fence-" + i);
        insert.setBytes(2, star(random));
        insert.addBatch();
        if ((i + 1) % 500 == 0 || i == count - 1) {
          insert.executeBatch();
          out.printf("[demo] loading fences into PostgreSQL: %d%%%n", 100L * (i + 1) / count);
        }
      }
    }
    db.commit();
    db.setAutoCommit(true);
  }

  /** A star-shaped fence somewhere in the box the generator's objects roam (0..10, 0..10). */
  private static byte[] star(SplittableRandom random) {
    Polygon star = GeneratedFences.star(random, random.nextDouble(10), random.nextDouble(10), 0.05 + random.nextDouble(0.3), 12 + random.nextInt(60));
    return new WKBWriter().write(star);
  }

  private static void edit(Connection db, SplittableRandom random, PrintStream out) throws Exception {
    String id = "fence-" + random.nextInt(queryInt(db, "SELECT count(*) FROM fences") + 50);
    try (PreparedStatement upsert = db.prepareStatement(
        "INSERT INTO fences (id, geom) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET geom = excluded.geom RETURNING seq")) {
      if (random.nextInt(3) == 0) {
        try (PreparedStatement delete = db.prepareStatement("DELETE FROM fences WHERE id = ?")) {
          delete.setString(1, id);
          out.printf("[demo] edit: %s %s%n", delete.executeUpdate() == 1 ? "deleted" : "nothing to delete at", id);
        }
        return;
      }
      upsert.setString(1, id);
      upsert.setBytes(2, star(random));
      try (ResultSet r = upsert.executeQuery()) {
        r.next();
        out.printf("[demo] edit: %s %s (seq %d)%n", r.getLong(1) == 1 ? "created" : "reshaped and moved", id, r.getLong(1));
      }
    }
  }

  private static Timestamp tail(Connection db, Timestamp since, PrintStream out) throws Exception {
    Timestamp last = since;
    int shown = 0;
    int more = 0;
    try (PreparedStatement s = db.prepareStatement(
        "SELECT emitted_at, kind, object_id, fence_id, event_time, lon, lat FROM geofence_triggers WHERE emitted_at > ? ORDER BY emitted_at")) {
      s.setTimestamp(1, since);
      try (ResultSet r = s.executeQuery()) {
        while (r.next()) {
          last = r.getTimestamp(1);
          if (shown < 5) {
            LocalTime at = r.getTimestamp(5).toInstant().atZone(ZoneId.systemDefault()).toLocalTime();
            out.printf("  %-5s %-11s %-12s at %s%s%n", r.getString(2), r.getString(3), r.getString(4), at,
                r.getObject(6) == null ? " (fence deleted)" : String.format(" (%.4f, %.4f)", r.getDouble(6), r.getDouble(7)));
            shown++;
          } else {
            more++;
          }
        }
      }
    }
    if (more > 0) {
      out.printf("  ... and %d more triggers%n", more);
    }
    return last;
  }

  private static long queryLong(Connection db, String sql) throws Exception {
    try (Statement s = db.createStatement(); ResultSet r = s.executeQuery(sql)) {
      r.next();
      return r.getLong(1);
    }
  }

  private static int queryInt(Connection db, String sql) throws Exception {
    return (int) queryLong(db, sql);
  }
}

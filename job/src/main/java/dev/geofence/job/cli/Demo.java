package dev.geofence.job.cli;

import static org.apache.flink.configuration.ConfigOptions.key;

import dev.geofence.connectors.config.CommandLine;
import dev.geofence.connectors.config.Flag;
import dev.geofence.connectors.config.GeofenceOptions;
import dev.geofence.connectors.location.MovingObjects;
import dev.geofence.connectors.model.Location;
import dev.geofence.connectors.source.Migrations;
import dev.geofence.connectors.source.ReplicationSlots;
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
import java.sql.Types;
import java.time.Duration;
import java.time.LocalTime;
import java.time.ZoneId;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Stream;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.locationtech.jts.geom.Polygon;
import org.locationtech.jts.io.WKBWriter;

/**
 * {@code demo}: everything on this machine with one command. Starts an embedded PostgreSQL with
 * logical replication, applies the migrations, loads generated fences, runs the job on an embedded
 * MiniCluster with generated moving objects, edits fences while it runs, and prints progress and a
 * live tail of triggers. The tables stay queryable while it runs; it says how to connect. DWELL
 * and silence are on ({@link #DWELL_DELAY}, {@link #PRESENCE_TIMEOUT}), and the first run puts a
 * depot fence, with a dwell delay of its own ({@link #DEPOT_DWELL_DELAY}), where each of a few
 * parking objects parks and a yard where each of a few silent ones is last seen ({@link
 * MovingObjects#parks}, {@link MovingObjects#fallsSilent}).
 *
 * <p>Its directory is kept: stopping (Ctrl-C, a SIGTERM or the end of {@code --duration}) stops the
 * job with a savepoint, and the next demo in the same directory reuses the database (fences,
 * edits, outputs, the replication slot) and restores from that savepoint, so a second run shows a
 * warm start: gap check, catch-up and a second hydration episode.
 */
final class Demo {

  static final ConfigOption<Integer> FENCES = key("geofence.demo.fences").intType().defaultValue(2000)
      .withDescription("Fences to generate on the first run.");
  static final ConfigOption<Integer> OBJECTS = key("geofence.demo.objects").intType().defaultValue(200)
      .withDescription("Moving objects, one location each per second.");
  static final ConfigOption<Integer> POSTGRES_PORT = key("geofence.demo.postgres-port").intType().defaultValue(54329)
      .withDescription("PostgreSQL port on 127.0.0.1.");
  static final ConfigOption<String> DIR = key("geofence.demo.dir").stringType().defaultValue("geofence-demo")
      .withDescription("Where PostgreSQL, the checkpoints and savepoints live.");
  static final ConfigOption<Integer> PARALLELISM = key(GeofenceOptions.PARALLELISM.key()).intType().defaultValue(2)
      .withDescription("Job parallelism.");
  static final ConfigOption<Duration> DURATION = key("geofence.demo.duration").durationType().noDefaultValue()
      .withDescription("Stop after this long, e.g. 2 min.");

  /** The demo's loitering delay and presence timeout, and a lateness short enough for the clock to decide within a minute. */
  static final Duration DWELL_DELAY = Duration.ofSeconds(10);
  /** A depot's own dwell delay, in the fences table: a fence's own holds over the job's. */
  static final Duration DEPOT_DWELL_DELAY = Duration.ofSeconds(5);
  static final Duration PRESENCE_TIMEOUT = Duration.ofSeconds(15);
  static final Duration ALLOWED_LATENESS = Duration.ofSeconds(5);
  /** Parking and silent objects given a fence where they pause, each. */
  private static final int PAUSING_WITH_FENCES = 3;

  static final CommandLine OPTIONS = new CommandLine(List.of(
      Flag.number("fences", "N", FENCES),
      Flag.number("objects", "N", OBJECTS),
      Flag.number("port", "P", POSTGRES_PORT),
      Flag.number("rest-port", "P", GeofenceOptions.REST_PORT),
      Flag.text("dir", "PATH", DIR),
      Flag.number("parallelism", "N", PARALLELISM),
      Flag.duration("duration", DURATION).defaultingTo("run until Ctrl-C")));

  static final String HELP = String.join("\n",
      "Usage: java -jar geofence-job.jar demo [options]",
      "",
      "Runs the whole thing on this machine: an embedded PostgreSQL (logical replication), generated",
      "fences, the job with moving objects, fence edits while it runs, and a live tail of triggers.",
      "Stopping it (Ctrl-C) takes a savepoint; the next demo in the same directory restores from it.",
      "",
      OPTIONS.help());

  private static final String SLOT = "geofence";

  private Demo() {}

  static void run(Configuration options, PrintStream out) throws Exception {
    int fenceCount = OPTIONS.get(options, FENCES);
    int objects = OPTIONS.get(options, OBJECTS);
    int port = OPTIONS.get(options, POSTGRES_PORT);
    int restPort = OPTIONS.get(options, GeofenceOptions.REST_PORT);
    int parallelism = OPTIONS.get(options, PARALLELISM);
    Duration duration = OPTIONS.get(options, DURATION);
    duration = duration == null ? Duration.ZERO : duration;
    Path dir = Path.of(OPTIONS.get(options, DIR)).toAbsolutePath();
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
    Path savepoints = savepoints(dir);
    AtomicReference<JobClient> job = new AtomicReference<>();
    AtomicBoolean stopping = new AtomicBoolean();
    Path savepoint = newestSavepoint(savepoints);
    Thread stop = new Thread(() -> {
      stopping.set(true);
      stop(job.get(), dir, postgres, out);
    });
    Runtime.getRuntime().addShutdownHook(stop);
    String url = "jdbc:postgresql://localhost:" + port + "/postgres";
    Connection db = postgres.getPostgresDatabase().getConnection();
    Files.writeString(dir.resolve("README.txt"), "PostgreSQL of the geofence demo: psql -h localhost -p " + port + " -U postgres\n");
    Migrations.applySource(db, Migrations.GeometryColumn.WKB);
    SplittableRandom random = new SplittableRandom(System.nanoTime());
    long present = queryLong(db, "SELECT count(*) FROM fences");
    if (present == 0) {
      loadFences(db, fenceCount, objects, random, out);
    } else {
      out.printf("[demo] %d fences from the last run are in PostgreSQL%n", present);
    }

    if (savepoint == null && ReplicationSlots.dropIfUnused(db, SLOT)) {
      // Without a savepoint the job snapshots the table afresh; the last run's slot would only
      // replay what that snapshot reads anyway.
      out.println("[demo] the last run left no savepoint: starting afresh from the table");
    }
    Configuration run = new Configuration();
    run.set(GeofenceOptions.SOURCE_URL, url);
    run.set(GeofenceOptions.SOURCE_USER, "postgres");
    run.set(GeofenceOptions.JOB_NAME, JOB_NAME);
    run.set(GeofenceOptions.SLOT, SLOT);
    run.set(GeofenceOptions.LOCATIONS, "generator:" + objects);
    run.set(GeofenceOptions.PARALLELISM, parallelism);
    run.set(GeofenceOptions.CHECKPOINT_INTERVAL, Duration.ofSeconds(5));
    run.set(GeofenceOptions.CHECKPOINT_DIR, dir.resolve("checkpoints").toUri().toString());
    run.set(GeofenceOptions.SAVEPOINT_DIR, savepoints.toUri().toString());
    run.set(GeofenceOptions.HEARTBEAT_INTERVAL, Duration.ofMillis(500));
    run.set(GeofenceOptions.REST_PORT, restPort);
    run.set(GeofenceOptions.DWELL_DELAY, DWELL_DELAY);
    run.set(GeofenceOptions.PRESENCE_TIMEOUT, PRESENCE_TIMEOUT);
    run.set(GeofenceOptions.ALLOWED_LATENESS, ALLOWED_LATENESS);
    if (savepoint != null) {
      run.set(GeofenceOptions.FROM_SAVEPOINT, savepoint.toString());
      out.printf("[demo] restoring the job from %s%n", savepoint);
      // The run command puts the generator's position in the savepoint at the wall clock.
      out.println("[demo] the moving objects go on where the savepoint left them, their timeline moved on by the time the job was stopped");
    }
    out.printf("[demo] starting the job: parallelism %d, %d moving objects, Flink REST on http://localhost:%d%n", parallelism, objects, restPort);
    out.printf("[demo] an object inside a fence for %d s DWELLs (%d s in a depot: its own delay, in fences.dwell_delay); one"
        + " silent for %d s EXITs its fences (objects 3, 13, 23, ... park for %d s a minute, objects 7, 17, 27, ... fall silent as"
        + " long)%n", DWELL_DELAY.toSeconds(), DEPOT_DWELL_DELAY.toSeconds(), PRESENCE_TIMEOUT.toSeconds(),
        MovingObjects.RESUME - MovingObjects.PAUSE);
    job.set(GeofenceCommand.prepare(run, "").executeAsync());
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
        // Edits once the index is ready, so that they show a ready index taking them (and the
        // ready line counts the fences loaded): a slow start made the first edit land in the
        // warm-up, and the ready line count one fence less.
        if (ready && System.currentTimeMillis() >= nextEdit) {
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
    stop(job.get(), dir, postgres, out);
  }

  /** The job's name in Flink and in {@code hydration_history}. */
  static final String JOB_NAME = "geofence-demo";

  /** Stops the job, if it was started, with a savepoint for the next run (or cancels it), then PostgreSQL. */
  private static void stop(JobClient job, Path dir, EmbeddedPostgres postgres, PrintStream out) {
    if (job != null) {
      stopJob(job, dir, out);
    }
    try {
      postgres.close();
      out.println("[demo] PostgreSQL stopped");
    } catch (Exception e) {
      out.printf("[demo] PostgreSQL did not stop cleanly (%s)%n", rootCause(e));
    }
  }

  private static void stopJob(JobClient job, Path dir, PrintStream out) {
    out.println("[demo] stopping the job with a savepoint");
    Path savepoints = savepoints(dir);
    try {
      String path = job.stopWithSavepoint(false, savepoints.toUri().toString(), SavepointFormatType.CANONICAL)
          .get(60, TimeUnit.SECONDS);
      Path savepoint = Path.of(URI.create(path));
      out.printf("[demo] savepoint %s; a demo started in this directory again restores from it%n", path);
      removeOlderSavepoints(savepoints, savepoint);
    } catch (Exception e) {
      out.printf("[demo] no savepoint (%s); the next demo here starts afresh%n", rootCause(e));
      try {
        job.cancel().get(30, TimeUnit.SECONDS);
      } catch (Exception gone) {
        // the job has ended already
      }
    }
  }

  /** Where the demo in {@code dir} keeps its savepoints. */
  private static Path savepoints(Path dir) {
    return dir.resolve("savepoints");
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

  private static String rootCause(Throwable e) {
    Throwable t = e;
    while (t.getCause() != null) {
      t = t.getCause();
    }
    return t.getMessage() == null ? t.getClass().getSimpleName() : t.getMessage();
  }

  /**
   * The first run's fences: a depot where each of the first parking objects parks and a yard where
   * each of the first silent ones is last seen in the generator's first minute, then stars
   * anywhere, {@code count} in all.
   */
  private static void loadFences(Connection db, int count, int objects, SplittableRandom random, PrintStream out) throws Exception {
    MovingObjects generator = GeofenceCommand.generator(Integer.toString(objects), 0, -1).objects();
    List<String> ids = new ArrayList<>();
    List<byte[]> shapes = new ArrayList<>();
    List<Long> delays = new ArrayList<>();
    int depots = 0;
    int yards = 0;
    for (int o = 0; o < objects && ids.size() < count; o++) {
      boolean depot = MovingObjects.parks(o) && depots++ < PAUSING_WITH_FENCES;
      if (depot || MovingObjects.fallsSilent(o) && yards++ < PAUSING_WITH_FENCES) {
        Location at = generator.pausedAt(o, 0);
        ids.add((depot ? "depot-" : "yard-") + o);
        shapes.add(new WKBWriter().write(GeneratedFences.star(random, at.lon, at.lat, 0.2, 12)));
        delays.add(depot ? DEPOT_DWELL_DELAY.toMillis() : null);
      }
    }
    for (int i = ids.size(); i < count; i++) {
      ids.add("fence-" + i);
      shapes.add(star(random));
      delays.add(null);
    }
    db.setAutoCommit(false);
    try (PreparedStatement insert = db.prepareStatement(
        "INSERT INTO fences (id, geom, tenant, dwell_delay) VALUES (?, ?, NULL, ? * interval '1 millisecond')")) {
      for (int i = 0; i < count; i++) {
        insert.setString(1, ids.get(i));
        insert.setBytes(2, shapes.get(i));
        insert.setObject(3, delays.get(i), Types.BIGINT);
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

  /**
   * Prints the triggers emitted since {@code since}: up to five a second of each cause (a location,
   * a fence's delete, a DWELL, a silence), so that the rarer ones neither drown among those
   * locations decide nor crowd each other out (the silent objects fall silent together, as the
   * parking ones DWELL together).
   */
  private static Timestamp tail(Connection db, Timestamp since, PrintStream out) throws Exception {
    Timestamp last = since;
    Map<String, Integer> shown = new HashMap<>();
    int more = 0;
    // A DWELL's delay is the fence's own where it has one: read from the fences table as a user would.
    try (PreparedStatement s = db.prepareStatement("SELECT emitted_at, kind, object_id, fence_id, event_time, lon, lat, cause,"
        + " (SELECT extract(epoch FROM f.dwell_delay)::bigint FROM fences f WHERE f.id = t.fence_id)"
        + " FROM geofence_triggers t WHERE emitted_at > ? ORDER BY emitted_at")) {
      s.setTimestamp(1, since);
      try (ResultSet r = s.executeQuery()) {
        while (r.next()) {
          last = r.getTimestamp(1);
          String cause = r.getString(8);
          boolean byLocation = r.getObject(6) != null;
          if (shown.merge(byLocation ? "location" : cause, 1, Integer::sum) <= 5) {
            LocalTime at = r.getTimestamp(5).toInstant().atZone(ZoneId.systemDefault()).toLocalTime();
            out.printf("  %-5s %-11s %-12s at %s%s%n", r.getString(2), r.getString(3), r.getString(4), at, byLocation
                ? String.format(" (%.4f, %.4f)%s", r.getDouble(6), r.getDouble(7), "fence-reshaped".equals(cause) ? " (fence reshaped)" : "")
                : " (" + switch (cause) {
                  case "loitering" -> "inside for " + (r.getObject(9) != null ? r.getLong(9) : DWELL_DELAY.toSeconds()) + " s";
                  case "silence" -> "silent for " + PRESENCE_TIMEOUT.toSeconds() + " s";
                  default -> "fence deleted";
                } + ")");
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

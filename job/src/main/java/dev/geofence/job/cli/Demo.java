package dev.geofence.job.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.geofence.connectors.source.Migrations;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.PrintStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.sql.Timestamp;
import java.time.Duration;
import java.time.LocalTime;
import java.time.ZoneId;
import java.util.Set;
import java.util.SplittableRandom;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.MetricOptions;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.core.execution.JobClient;
import dev.geofence.job.GeneratedFences;
import org.locationtech.jts.geom.Polygon;
import org.locationtech.jts.io.WKBWriter;

/**
 * {@code demo}: everything on this machine with one command. Starts an embedded PostgreSQL with
 * logical replication, applies the migrations, loads generated fences, runs the job on an embedded
 * MiniCluster with generated moving objects, edits fences while it runs, and prints progress and a
 * live tail of triggers. The tables stay queryable while it runs; it says how to connect.
 */
final class Demo {

  static final Set<String> OPTIONS = Set.of("fences", "objects", "port", "rest-port", "dir", "parallelism", "duration");

  static final String HELP = String.join("\n",
      "Usage: java -jar geofence-job.jar demo [options]",
      "",
      "Runs the whole thing on this machine: an embedded PostgreSQL (logical replication), generated",
      "fences, the job with moving objects, fence edits while it runs, and a live tail of triggers.",
      "",
      "  --fences N        fences to generate (default 2000)",
      "  --objects N       moving objects, one location each per second (default 200)",
      "  --port P          PostgreSQL port (default 54329)",
      "  --rest-port P     Flink REST port (default 8081)",
      "  --dir PATH        where PostgreSQL and the checkpoints live (default ./geofence-demo)",
      "  --parallelism N   job parallelism (default 2)",
      "  --duration D      stop after D, e.g. 2m (default: run until Ctrl-C)");

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

    out.printf("[demo] starting PostgreSQL (wal_level=logical) on port %d, data in %s%n", port, dir.resolve("postgres"));
    Files.createDirectories(dir);
    EmbeddedPostgres postgres = EmbeddedPostgres.builder()
        .setPort(port)
        .setDataDirectory(dir.resolve("postgres"))
        .setCleanDataDirectory(true)
        .setServerConfig("wal_level", "logical")
        .setServerConfig("max_replication_slots", "10")
        .setServerConfig("max_wal_senders", "10")
        .start();
    String url = "jdbc:postgresql://localhost:" + port + "/postgres";
    Connection db = postgres.getPostgresDatabase().getConnection();
    Files.writeString(dir.resolve("README.txt"), "PostgreSQL of the geofence demo: psql -h localhost -p " + port + " -U postgres\n");
    Migrations.applySource(db, Migrations.GeometryColumn.WKB);
    SplittableRandom random = new SplittableRandom(42);
    loadFences(db, fenceCount, random, out);

    Configuration config = new Configuration();
    config.set(RestOptions.PORT, restPort);
    // The progress line reads a metric through the REST API; fetch metrics every second.
    config.set(MetricOptions.METRIC_FETCHER_UPDATE_INTERVAL, Duration.ofSeconds(1));
    String[] runArgs = {
      "--source-url", url, "--source-user", "postgres", "--locations", "generator:" + objects,
      "--parallelism", Integer.toString(parallelism), "--checkpoint-interval", "5s",
      "--checkpoint-dir", dir.resolve("checkpoints").toUri().toString(), "--heartbeat-interval", "500ms"};
    out.printf("[demo] starting the job: parallelism %d, %d moving objects, Flink REST on http://localhost:%d%n", parallelism, objects, restPort);
    JobClient job = GeofenceCommand.prepare(runArgs, "", config).executeAsync("geofence-demo");
    Thread stop = new Thread(() -> stop(job, postgres, out));
    Runtime.getRuntime().addShutdownHook(stop);
    out.printf("[demo] the tables are queryable while the demo runs:%n"
        + "         psql -h localhost -p %d -U postgres -c 'SELECT kind, count(*) FROM geofence_triggers GROUP BY kind'%n"
        + "         (tables: fences, fence_stats, geofence_triggers, geofence_presence, geofence_dead_letters)%n", port);

    long start = System.currentTimeMillis();
    Timestamp seen = new Timestamp(0);
    long nextEdit = start + 5000;
    boolean complete = false;
    HttpClient http = HttpClient.newHttpClient();
    while (duration.isZero() || System.currentTimeMillis() - start < duration.toMillis()) {
      Thread.sleep(1000);
      if (!complete) {
        long loaded = fencesLoaded(http, restPort, job.getJobID().toString());
        long expected = queryLong(db, "SELECT fence_count FROM fence_stats");
        complete = loaded >= expected;
        out.printf("[demo] phase: %s, fences loaded %d%% (%d of %d)%n",
            complete ? "index complete, evaluating locations" : "loading the index", expected == 0 ? 100 : 100 * loaded / expected, loaded, expected);
      }
      seen = tail(db, seen, out);
      if (System.currentTimeMillis() >= nextEdit) {
        edit(db, random, out);
        nextEdit = System.currentTimeMillis() + 5000;
      }
    }
    Runtime.getRuntime().removeShutdownHook(stop);
    stop(job, postgres, out);
  }

  private static void stop(JobClient job, EmbeddedPostgres postgres, PrintStream out) {
    out.println("[demo] stopping");
    try {
      job.cancel().get();
    } catch (Exception e) {
      // the job may be gone already
    }
    try {
      postgres.close();
    } catch (Exception e) {
      // nothing more to do on the way out
    }
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

  /** Sum over subtasks of the fence index operator's {@code fences_loaded} gauge, from Flink's REST API. */
  private static long fencesLoaded(HttpClient http, int restPort, String jobId) {
    try {
      ObjectMapper json = new ObjectMapper();
      String base = "http://localhost:" + restPort + "/jobs/" + jobId;
      JsonNode vertices = json.readTree(get(http, base)).get("vertices");
      for (JsonNode vertex : vertices) {
        if (!vertex.get("name").asText().contains("Fence index")) {
          continue;
        }
        String metrics = base + "/vertices/" + vertex.get("id").asText() + "/subtasks/metrics";
        for (JsonNode metric : json.readTree(get(http, metrics))) {
          String id = metric.get("id").asText();
          if (id.endsWith(".fences_loaded")) {
            JsonNode values = json.readTree(get(http, metrics + "?get=" + id + "&agg=sum"));
            return values.size() == 0 ? 0 : values.get(0).get("sum").asLong();
          }
        }
      }
    } catch (Exception e) {
      // the job is still starting; report nothing loaded yet
    }
    return 0;
  }

  private static String get(HttpClient http, String url) throws Exception {
    return http.send(HttpRequest.newBuilder(URI.create(url)).build(), HttpResponse.BodyHandlers.ofString()).body();
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

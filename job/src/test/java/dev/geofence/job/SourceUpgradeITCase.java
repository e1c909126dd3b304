package dev.geofence.job;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.connectors.model.Location;
import dev.geofence.connectors.source.Migrations;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.flink.core.execution.JobClient;
import org.junit.jupiter.api.Test;

/**
 * The source migration upgraded in place under a running job: a database with the first version
 * of {@code fence-versioning.sql} (one {@code fence_stats} row updated by every edit), the job
 * running and ready on it, an application writing fences in transactions of one to three
 * statements, and the current migration applied over it meanwhile. The job must stay ready
 * throughout (no gap, no rebuild, no restart), every edit before, during and after the upgrade
 * must be fingerprinted, and the index must pass the three-way check with the triggers equal to
 * the oracle's.
 */
class SourceUpgradeITCase extends EndToEndFixture {

  /** The migration as shipped before issue 13 (the connectors' test resource). */
  private static final String FIRST_VERSION = "sql/source/fence-versioning-v1.sql";

  @Test
  void upgradingTheMigrationUnderWritesKeepsTheRunningJobReady() throws Exception {
    String url = databaseWithTheFirstVersion("geofence_upgrade");
    try (Connection db = DriverManager.getConnection(url, "postgres", "");
        Connection writer = DriverManager.getConnection(url, "postgres", "")) {
      SplittableRandom random = new SplittableRandom(29);
      placeFences(db, random, 0, 40);
      Path inbox = Files.createDirectories(temp.resolve("inbox"));
      Map<String, Set<String>> inside = new HashMap<>();
      JobClient job = start(url, "slot_upgrade", inbox, 2, "hashmap");
      try {
        String first = awaitStreaming(db, "slot_upgrade", inbox);
        List<Location> moved = moveObjects(db, inbox, random, 1, inside);
        awaitTriggers(db, expected.size());
        awaitClockPast(db, moved);

        // The application edits while the migration is applied; the oracle is updated by the
        // writer alone until it is joined.
        AtomicBoolean stop = new AtomicBoolean();
        AtomicInteger transactions = new AtomicInteger();
        CompletableFuture<Void> edits = CompletableFuture.runAsync(() -> write(writer, new SplittableRandom(31), inside, stop, transactions));
        awaitTransactions(transactions, 40, edits);
        Migrations.applySource(db, Migrations.GeometryColumn.WKB);
        int atUpgrade = transactions.get();
        awaitTransactions(transactions, atUpgrade + 40, edits);
        stop.set(true);
        edits.get(60, TimeUnit.SECONDS);
        assertThat(queryLong(db, "SELECT count(*) FROM pg_views WHERE viewname = 'fence_stats'")).as("upgraded").isEqualTo(1);

        String second = awaitStreaming(db, "slot_upgrade", inbox);
        moveObjects(db, inbox, random, 2, inside);
        threeWayCheck(db, inbox, "upgraded", WarmStartITCase.POINTS);
        assertTriggersAsUninterrupted(db);
        inside.put(first, Set.of("sentinel"));
        inside.put(second, Set.of("sentinel"));
        assertThat(presence(db)).isEqualTo(flatten(inside));
        assertThat(queryLong(db, "SELECT count(*) FROM fence_bucket_stats s FULL JOIN (SELECT fence_bucket(id) AS bucket,"
            + " count(*) AS n, bit_xor(fence_hash(id, seq)) AS x FROM fences GROUP BY 1) f ON f.bucket = s.bucket"
            + " WHERE coalesce(s.fence_count, 0) <> coalesce(f.n, 0) OR coalesce(s.checksum, 0) <> coalesce(f.x, 0)"))
            .as("buckets whose fingerprint differs from the table").isZero();
        assertThat(metricSum(job, "index_ready")).as("subtasks ready").isEqualTo(2);
        assertThat(metricSum(job, "buckets_unmatched")).isZero();
        assertThat(metricSum(job, "seq_gaps")).isZero();
        assertThat(metricSum(job, "gap_detected")).isZero();
      } finally {
        job.cancel().get();
      }
      // One warm-up per subtask, at the start: no rebuild, no gap, no restart of the job.
      List<Episode> episodes = episodes(db);
      assertThat(episodes).hasSize(2).allSatisfy(e -> {
        assertThat(e.startMode).isEqualTo("fresh");
        assertThat(e.attempt).isZero();
        assertThat(e.gapCheck).isNotEqualTo("gap");
        assertHydrated(e);
      });
    }
  }

  /**
   * Transactions of one to three edits (reshapes, deletes, re-creations of fence-0 to fence-59)
   * until told to stop, counted as they commit.
   */
  private void write(Connection db, SplittableRandom random, Map<String, Set<String>> inside, AtomicBoolean stop,
      AtomicInteger transactions) {
    try {
      db.setAutoCommit(false);
      while (!stop.get()) {
        int statements = 1 + random.nextInt(3);
        for (int i = 0; i < statements; i++) {
          int fence = random.nextInt(60);
          if (random.nextInt(4) == 0 && fences.get("fence-" + fence) != null) {
            deleteFences(db, fence, fence + 1, inside);
          } else {
            placeFences(db, random, fence, fence + 1);
          }
        }
        db.commit();
        transactions.incrementAndGet();
        Thread.sleep(5);
      }
    } catch (Exception e) {
      throw new AssertionError("the application's edits failed", e);
    }
  }

  private static void awaitTransactions(AtomicInteger transactions, int count, CompletableFuture<Void> edits) throws Exception {
    long deadline = System.currentTimeMillis() + 60_000;
    while (transactions.get() < count) {
      assertThat(edits).as("the writer is still writing").isNotDone();
      assertThat(System.currentTimeMillis()).as("the writer never committed %d transactions", count).isLessThan(deadline);
      Thread.sleep(20);
    }
  }

  /** A fresh database with the fences table, the first version of its versioning, and the outputs. */
  private static String databaseWithTheFirstVersion(String name) throws Exception {
    try (Connection admin = DriverManager.getConnection(embeddedServerUrl(), "postgres", ""); Statement s = admin.createStatement()) {
      s.execute("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
      s.execute("CREATE DATABASE " + name);
    }
    String url = embeddedServerUrl().substring(0, embeddedServerUrl().lastIndexOf('/') + 1) + name;
    try (Connection db = DriverManager.getConnection(url, "postgres", ""); Statement s = db.createStatement()) {
      s.execute(resource("sql/source/fences-wkb.sql"));
      s.execute(resource(FIRST_VERSION));
      Migrations.applyOutputs(db);
    }
    return url;
  }

  private static String resource(String name) throws Exception {
    try (InputStream in = SourceUpgradeITCase.class.getClassLoader().getResourceAsStream(name)) {
      assertThat(in).as(name).isNotNull();
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
  }
}

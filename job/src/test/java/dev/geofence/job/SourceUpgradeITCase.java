package dev.geofence.job;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.connectors.source.Migrations;
import dev.geofence.job.testing.EndToEndFixture;
import dev.geofence.job.testing.Waiting;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
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
 * statements, and the second version (statement triggers) then the current migration applied over
 * it meanwhile. The job must stay ready
 * throughout (no gap, no rebuild, no restart), every edit before, during and after the upgrade
 * must be fingerprinted, and the index must pass the three-way check with the triggers equal to
 * the oracle's.
 */
class SourceUpgradeITCase extends EndToEndFixture {

  /** The migration as shipped before issue 13 (the connectors' test resource). */
  private static final String FIRST_VERSION = "sql/source/fence-versioning-v1.sql";
  /** The migration as shipped after issue 13, with statement triggers (the connectors' test resource). */
  private static final String SECOND_VERSION = "sql/source/fence-versioning-v2.sql";

  @Test
  void upgradingTheMigrationUnderWritesKeepsTheRunningJobReady() throws Exception {
    database(embeddedServerUrl(), "", "geofence_upgrade", 29, db -> {
      try (Statement s = db.createStatement()) {
        s.execute(resource("sql/source/fences-wkb.sql"));
        s.execute("ALTER TABLE fences REPLICA IDENTITY FULL"); // as releases before 2026-12 created it
        s.execute(resource(FIRST_VERSION));
      }
    });
    placeFences(0, 40);
    JobClient job = start(2, "hashmap");
    moveObjects();
    assertTriggersAsOracle();

    // The application edits through the fixture's connection, and so keeps the oracle, while the
    // migration is applied on a connection of its own; the oracle is the writer's until it is joined.
    AtomicBoolean stop = new AtomicBoolean();
    AtomicInteger transactions = new AtomicInteger();
    CompletableFuture<Void> edits = CompletableFuture.runAsync(() -> write(new SplittableRandom(31), stop, transactions));
    try (Connection migration = DriverManager.getConnection(url, "postgres", "")) {
      awaitTransactions(transactions, 40, edits);
      migration.setAutoCommit(false); // as psql --single-transaction, which the second version requires
      try (Statement s = migration.createStatement()) {
        s.execute(resource(SECOND_VERSION));
      }
      migration.commit();
      migration.setAutoCommit(true);
      awaitTransactions(transactions, transactions.get() + 40, edits);
      Migrations.applySource(migration, Migrations.GeometryColumn.WKB);
    }
    int atUpgrade = transactions.get();
    awaitTransactions(transactions, atUpgrade + 40, edits);
    stop.set(true);
    edits.get(60, TimeUnit.SECONDS);
    assertThat(queryLong("SELECT count(*) FROM pg_views WHERE viewname = 'fence_stats'")).as("upgraded").isEqualTo(1);
    // Deletes before the upgrade carried their old row (FULL), after it only their key: the job
    // reads their versions from the tombstones either way.
    assertThat(queryLong("SELECT count(*) FROM pg_class WHERE oid = 'fences'::regclass AND relreplident = 'd'"))
        .as("replica identity: the primary key").isEqualTo(1);

    moveObjects();
    threeWayCheck("upgraded", WarmStartITCase.POINTS);
    assertTriggersAsOracle();
    assertPresenceAsOracle();
    assertThat(queryLong("SELECT count(*) FROM fence_bucket_stats s FULL JOIN (SELECT fence_bucket(id) AS bucket,"
        + " count(*) AS n, bit_xor(fence_hash(id, seq)) AS x FROM fences GROUP BY 1) f ON f.bucket = s.bucket"
        + " WHERE coalesce(s.fence_count, 0) <> coalesce(f.n, 0) OR coalesce(s.checksum, 0) <> coalesce(f.x, 0)"))
        .as("buckets whose fingerprint differs from the table").isZero();
    assertThat(metricSum(job, "index_ready")).as("subtasks ready").isEqualTo(2);
    assertThat(metricSum(job, "buckets_unmatched")).isZero();
    assertThat(metricSum(job, "seq_gaps")).isZero();
    assertThat(metricSum(job, "gap_detected")).isZero();
    // One warm-up per subtask, at the start: no rebuild, no gap, no restart of the job.
    assertThat(episodes(job)).hasSize(2).allSatisfy(e -> {
      assertThat(e.startMode()).isEqualTo("fresh");
      assertThat(e.attempt()).isZero();
      assertThat(e.gapCheck()).isNotEqualTo("gap");
      assertHydrated(e);
    });
  }

  /**
   * Transactions of one to three edits (reshapes, deletes, re-creations of fence-0 to fence-59)
   * until told to stop, counted as they commit.
   */
  private void write(SplittableRandom choice, AtomicBoolean stop, AtomicInteger transactions) {
    try {
      db.setAutoCommit(false);
      while (!stop.get()) {
        int statements = 1 + choice.nextInt(3);
        for (int i = 0; i < statements; i++) {
          int fence = choice.nextInt(60);
          if (choice.nextInt(4) == 0 && fences.get("fence-" + fence) != null) {
            deleteFences(fence, fence + 1);
          } else {
            placeFences(fence, fence + 1);
          }
        }
        db.commit();
        transactions.incrementAndGet();
      }
      db.setAutoCommit(true);
    } catch (Exception e) {
      throw new AssertionError("the application's edits failed", e);
    }
  }

  private static void awaitTransactions(AtomicInteger transactions, int count, CompletableFuture<Void> edits) throws Exception {
    Waiting.until("the writer to commit " + count + " transactions", PATIENCE, () -> {
      assertThat(edits).as("the writer is still writing").isNotDone();
      return transactions.get() >= count;
    });
  }

  private static String resource(String name) throws Exception {
    try (InputStream in = SourceUpgradeITCase.class.getClassLoader().getResourceAsStream(name)) {
      assertThat(in).as(name).isNotNull();
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
  }
}

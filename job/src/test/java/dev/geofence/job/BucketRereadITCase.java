package dev.geofence.job;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.job.index.FenceIndexMetrics;
import dev.geofence.job.testing.EndToEndFixture;
import dev.geofence.job.testing.Waiting;
import dev.geofence.state.checksum.FenceBuckets;
import java.sql.Statement;
import java.util.List;
import org.apache.flink.core.execution.JobClient;
import org.junit.jupiter.api.Test;

/**
 * Truth checked all the time, healed locally (issue 16): an edit the change stream never carries
 * (fence-3 reshaped while the fences table is out of the publication; its bucket's fingerprint,
 * still published, says so) leaves one bucket mismatched under a running job. A heartbeat later
 * that bucket alone is read again from the source, an episode row says why, a counter counts it,
 * and the triggers after it are the oracle's, which knows the new shape.
 */
class BucketRereadITCase extends EndToEndFixture {

  @Test
  void aBucketTheStreamMissedAnEditOfIsReadAgainAloneAndTheTriggersStayExact() throws Exception {
    database("bucket_reread", 9);
    placeFences(0, 20);
    JobClient job = start(2, "hashmap");
    moveObjects();
    assertTriggersAsOracle();

    try (Statement s = db.createStatement()) {
      s.execute("ALTER PUBLICATION geofence_publication DROP TABLE fences");
    }
    placeFences(3, 4);
    try (Statement s = db.createStatement()) {
      s.execute("ALTER PUBLICATION geofence_publication ADD TABLE fences");
    }
    Waiting.until("the mismatched bucket to be read again", PATIENCE,
        () -> fetchMetricSum(job, FenceIndexMetrics.BUCKETS_REREAD) >= 1);
    moveObjects();
    assertTriggersAsOracle();
    assertPresenceAsOracle();
    assertThat(metricSum(job, FenceIndexMetrics.BUCKETS_REREAD)).as("that bucket alone, once").isEqualTo(1);

    int bucket = FenceBuckets.of("fence-3");
    List<Episode> rereads = episodes(job).stream().filter(e -> e.startMode().equals("rebuild")).toList();
    assertThat(rereads).as("the re-read's episode").singleElement().satisfies(e -> {
      assertThat(e.gapCheck()).isEqualTo("gap");
      assertThat(e.gapReason()).startsWith("bucket " + bucket + " still mismatched ").endsWith(" read again from the source");
      assertThat(e.subtask()).isEqualTo(subtaskOf("fence-3"));
      assertThat(e.hydratedAt()).as("ready again").isPositive();
    });
  }

  /**
   * Readiness always arrives (issue 32): the same missed edit made while the job is down leaves
   * the restored job's bucket mismatched before it was ever ready. That bucket is read again during
   * the warm-up, whose episode says so, and the job becomes ready; before, it held its locations
   * for good.
   */
  @Test
  void aBucketTheStreamMissedAnEditOfWhileTheJobWasDownIsReadAgainBeforeTheFirstReady() throws Exception {
    database("bucket_reread_down", 10);
    placeFences(0, 20);
    StoppedRun first = runAndStopWithSavepoint(2, "rocksdb");
    try (Statement s = db.createStatement()) {
      s.execute("ALTER PUBLICATION geofence_publication DROP TABLE fences");
    }
    placeFences(3, 4);
    try (Statement s = db.createStatement()) {
      s.execute("ALTER PUBLICATION geofence_publication ADD TABLE fences");
    }
    JobClient job = start(3, "rocksdb", first.savepoint());
    moveObjects();
    assertTriggersAsOracle();
    assertPresenceAsOracle();

    int bucket = FenceBuckets.of("fence-3");
    List<Episode> warmUps = assertWarmUps(job, 3, "savepoint");
    assertThat(warmUps).filteredOn(e -> e.subtask() == subtaskOf("fence-3")).singleElement().satisfies(e -> {
      assertThat(e.bucketsReread()).isEqualTo(1);
      assertThat(e.rereadReason()).startsWith("bucket " + bucket + " still mismatched ").endsWith(" read again from the source");
    });
    assertThat(warmUps).filteredOn(e -> e.subtask() != subtaskOf("fence-3")).allSatisfy(e -> assertThat(e.bucketsReread()).isZero());
    assertThat(episodes(job)).as("no episode of its own: it was the warm-up's").noneMatch(e -> e.startMode().equals("rebuild"));
    threeWayCheck("healed", 20_000);
  }
}

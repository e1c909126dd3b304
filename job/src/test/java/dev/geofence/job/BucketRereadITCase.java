package dev.geofence.job;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.job.operator.FenceIndexMetrics;
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
}

package dev.geofence.job;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.geofence.connectors.model.Location;
import dev.geofence.job.index.FenceIndexMetrics;
import dev.geofence.job.testing.EndToEndFixture;
import dev.geofence.job.testing.Waiting;
import java.net.http.HttpClient;
import dev.geofence.state.checksum.FenceBuckets;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.core.execution.JobClient;
import org.junit.jupiter.api.Test;

/**
 * The hold of locations is bounded by backpressure (docs/design.md#holding-locations): while the
 * index cannot be ready (a bucket's fingerprint at the source is made not to match), far more
 * locations are written than a subtask may hold; the location source pauses, checkpoints go on
 * completing meanwhile (aligned, as the job takes them), and once the index is ready every location
 * is evaluated: the triggers are the oracle's, none lost.
 */
class BoundedHoldITCase extends EndToEndFixture {

  private static final int MAX_HELD = 500;
  private static final int WRITTEN = 60_000;

  @Test
  void aFullHoldPausesTheLocationSourceWithoutLosingALocationOrACheckpoint() throws Exception {
    database("bounded_hold", 4);
    placeFences(0, 10);
    maxHeldLocations = MAX_HELD;
    JobClient job = start(1, "hashmap");
    // A bucket's fingerprint at the source that its fences do not match: the index is not ready.
    int bucket = FenceBuckets.of("fence-0");
    String flip = "UPDATE fence_bucket_stats SET checksum = checksum # 1, version = version + 1 WHERE bucket = " + bucket;
    try (Statement s = db.createStatement()) {
      s.execute(flip);
    }
    Waiting.until("the index to see the mismatch", PATIENCE, () -> fetchMetricSum(job, FenceIndexMetrics.INDEX_READY) == 0);
    // Files are read in no set order: each has objects of its own, so that no object's locations
    // arrive out of their order.
    long t = nextLocationTime();
    for (int file = 0; file < 30; file++) {
      List<Location> locations = new ArrayList<>();
      for (int i = 0; i < WRITTEN / 30; i++) {
        locations.add(new Location("object-" + file + "-" + (i % 200), t + file * 20 + i / 200, random.nextDouble(-0.5, 10.5),
            random.nextDouble(-0.5, 10.5), null));
      }
      write(locations);
    }
    Waiting.until("the hold to fill", PATIENCE, () -> fetchMetricSum(job, FenceIndexMetrics.PENDING_LOCATIONS) >= MAX_HELD);
    long completed = completedCheckpoints(job);
    Waiting.until("two more checkpoints to complete while the source is paused", PATIENCE,
        () -> completedCheckpoints(job) >= completed + 2);
    long held = metricSum(job, FenceIndexMetrics.PENDING_LOCATIONS);
    org.slf4j.LoggerFactory.getLogger(BoundedHoldITCase.class).info("{} of {} locations held (at most {}) after {} more checkpoints",
        held, WRITTEN, MAX_HELD, completedCheckpoints(job) - completed);
    assertThat(held).as("held, of %d written: the bound and what the network buffers carried", WRITTEN)
        .isBetween((long) MAX_HELD, WRITTEN / 2L);
    assertThat(metricSum(job, FenceIndexMetrics.INDEX_READY)).isZero();
    // The fingerprint put right: ready, and every location evaluated. Files still unread when the
    // source paused may come after the fixture's sentinel: wait for all of the oracle's triggers.
    try (Statement s = db.createStatement()) {
      s.execute(flip);
    }
    long objects = expected.stream().filter(e -> e.startsWith("object-")).count();
    Waiting.until("the triggers of all " + WRITTEN + " locations", PATIENCE,
        () -> queryLong("SELECT count(*) FROM geofence_triggers WHERE object_id LIKE 'object-%'") >= objects);
    assertTriggersAsOracle();
  }

  private static long completedCheckpoints(JobClient job) throws Exception {
    Configuration client = FLINK.getClientConfiguration();
    String checkpoints = "http://" + client.get(RestOptions.ADDRESS) + ":" + client.get(RestOptions.PORT) + "/jobs/" + job.getJobID()
        + "/checkpoints";
    return new ObjectMapper().readTree(get(HttpClient.newHttpClient(), checkpoints)).path("counts").path("completed").asLong();
  }
}

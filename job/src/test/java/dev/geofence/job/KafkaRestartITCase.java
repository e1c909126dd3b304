package dev.geofence.job;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.geofence.connectors.kafka.KafkaBroker;
import dev.geofence.connectors.sink.KafkaOutputs;
import dev.geofence.job.testing.EndToEndFixture;
import dev.geofence.job.testing.Waiting;
import java.time.Duration;
import java.util.Map;
import java.util.Set;
import org.apache.flink.core.execution.JobClient;
import org.junit.jupiter.api.Test;

/**
 * The Kafka broker restarts under the running job (issue 17): the job reads its locations from a
 * topic of it and writes its triggers to another, exactly once, while objects move and fences
 * change. The broker is stopped with SIGTERM and started again on the same log directory and
 * port. The first checkpoint after the stop is held, not failed: the triggers topic's writer
 * opens the next checkpoint's transaction, which waits for the broker (up to the producer's
 * {@code max.block.ms}, a minute), and the fence index it is chained to waits with it. Once the
 * broker is back, the checkpoint completes, the locations sent meanwhile are read, and nothing is
 * lost or doubled: triggers and presence are the oracle's, the topic read {@code read_committed}
 * holds each trigger of the table once, and the job never failed over.
 */
class KafkaRestartITCase extends EndToEndFixture {

  private static final ObjectMapper JSON = new ObjectMapper();
  /** Long enough that the job's Kafka clients fail and retry, and a checkpoint waits through it. */
  private static final Duration OUTAGE = Duration.ofSeconds(12);

  @Test
  void aBrokerRestartLosesAndDoublesNothing() throws Exception {
    try (KafkaBroker kafka = KafkaBroker.startProcess(temp.resolve("kafka"))) {
      kafka.createTopic("locations", 1);
      kafka.createTopic("triggers", 2);
      database("geofence_kafka_restart", 37);
      locationsTopic = new LocationsTopic(kafka.bootstrapServers(), "locations");
      triggersTopic = KafkaOutputs.triggers(kafka.bootstrapServers(), "triggers", "geofence-it", KafkaOutputs.DEFAULT_TRANSACTION_TIMEOUT);
      placeFences(0, 30);
      JobClient job = start(2, "rocksdb");
      moveObjects();
      assertTriggersAsOracle();

      kafka.stop();
      long stoppedAt = System.currentTimeMillis();
      // Written while the broker is down: the edits reach the job through the database, the
      // locations wait in the test's producer.
      awaitClockPastLocations();
      placeFences(0, 10);
      deleteFences(10, 13);
      moveObjects();
      // Statistics a few seconds old at most: from this long after the stop, an open checkpoint is one the outage holds.
      long held = Waiting.until("a checkpoint to wait for the stopped broker", PATIENCE,
          () -> System.currentTimeMillis() - stoppedAt > 5_000 ? openCheckpoint(job) : -1L, id -> id >= 0);
      Thread.sleep(Math.max(0, stoppedAt + OUTAGE.toMillis() - System.currentTimeMillis()));
      long restartedAt = System.currentTimeMillis();
      kafka.startAgain();
      JsonNode waited = Waiting.until("checkpoint " + held + " to complete once the broker is back", PATIENCE,
          () -> checkpoint(job, held), c -> !c.path("status").asText().equals("IN_PROGRESS"));
      assertThat(waited.path("status").asText()).as("checkpoint %d, held by the outage: %s", held, waited).isEqualTo("COMPLETED");
      assertThat(waited.path("latest_ack_timestamp").asLong()).as("checkpoint %d completed after the broker came back", held)
          .isGreaterThan(restartedAt);

      moveObjects();
      awaitClockPastLocations();
      placeFences(20, 25);
      moveObjects();
      assertTriggersAsOracle();
      assertPresenceAsOracle();
      assertThat(queryLong("SELECT count(*) FROM geofence_triggers")).as("every trigger once: rows, not distinct ids")
          .isEqualTo(queryLong("SELECT count(DISTINCT (object_id, fence_id, kind, event_time)) FROM geofence_triggers"));
      Set<String> table = triggerIds();
      Map<String, Integer> committed = Waiting.until("a checkpoint after the last trigger to commit them all to the topic", PATIENCE,
          () -> triggerIdsIn(kafka.values("triggers", true)), ids -> ids.keySet().equals(table));
      assertThat(committed).as("each trigger once in the topic").allSatisfy((id, n) -> assertThat(n).as(id).isEqualTo(1));
      threeWayCheck("kafka-restart", 20_000);
      assertThat(assertWarmUps(job, 2, "fresh")).as("the job waited for the broker and never failed over")
          .allSatisfy(e -> assertThat(e.attempt()).isZero());
      cancelJobs();
    }
  }

  /** The checkpoint in progress now, or -1. */
  private static long openCheckpoint(JobClient job) throws Exception {
    for (JsonNode c : checkpoints(job).path("history")) {
      if (c.path("status").asText().equals("IN_PROGRESS")) {
        return c.path("id").asLong();
      }
    }
    return -1;
  }

  private static JsonNode checkpoint(JobClient job, long id) throws Exception {
    for (JsonNode c : checkpoints(job).path("history")) {
      if (c.path("id").asLong() == id) {
        return c;
      }
    }
    return JSON.missingNode();
  }
}

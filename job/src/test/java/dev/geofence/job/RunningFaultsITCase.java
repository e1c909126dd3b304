package dev.geofence.job;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import org.apache.flink.core.execution.JobClient;
import org.junit.jupiter.api.Test;

/**
 * Faults while the job runs its ordinary work (objects moving, fences edited), against real parts:
 * each case ends as the warm-start cases do, with triggers and presence equal to the oracle's and
 * the three-way index check, and the job running and ready.
 */
class RunningFaultsITCase extends EndToEndFixture {

  /**
   * The checkpoint directory is replaced by a file for a while (permissions would not stop root):
   * checkpoints fail and are counted, the job never fails over and keeps evaluating, and
   * checkpoints complete again once the directory is back.
   */
  @Test
  void anUnwritableCheckpointDirectoryFailsCheckpointsButNotTheJob() throws Exception {
    database("geofence_checkpoint_outage", 23);
    placeFences(0, 30);
    JobClient job = start(2, "rocksdb");
    moveObjects();
    Waiting.until("a checkpoint of the running job", PATIENCE, () -> checkpointCounts(job).path("completed").asLong(), n -> n >= 1);

    Path checkpoints = temp.resolve("checkpoints");
    Path away = temp.resolve("checkpoints-away");
    Files.move(checkpoints, away);
    Files.createFile(checkpoints);
    long completedBefore = checkpointCounts(job).path("completed").asLong();
    long failedBefore = checkpointCounts(job).path("failed").asLong();
    Waiting.until("checkpoints to fail while the directory is gone", PATIENCE,
        () -> checkpointCounts(job).path("failed").asLong() - failedBefore, n -> n >= 3);
    placeFences(0, 10);
    moveObjects();
    assertTriggersAsOracle();

    Files.delete(checkpoints);
    Files.move(away, checkpoints);
    Waiting.until("checkpoints to complete again", PATIENCE,
        () -> checkpointCounts(job).path("completed").asLong() - completedBefore, n -> n >= 2);
    moveObjects();
    assertTriggersAsOracle();
    assertPresenceAsOracle();
    threeWayCheck("checkpoint-outage", 20_000);
    assertThat(episodes(job)).as("one warm-up per subtask: the job never failed over").hasSize(2)
        .allSatisfy(e -> assertThat(e.attempt()).isZero());
  }
}

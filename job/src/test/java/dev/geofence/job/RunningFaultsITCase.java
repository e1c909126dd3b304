package dev.geofence.job;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.stream.Stream;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.test.junit5.InjectMiniCluster;
import org.junit.jupiter.api.Test;

/**
 * Faults while the job runs its ordinary work (objects moving, fences edited), against real parts:
 * each case ends as the warm-start cases do, with triggers and presence equal to the oracle's and
 * the three-way index check, and the job running and ready.
 */
class RunningFaultsITCase extends EndToEndFixture {

  /**
   * The TaskManager is killed while a checkpoint is in flight, and again while the job recovers
   * from that: it recovers from the last completed checkpoint, with exact outputs.
   */
  @Test
  void aTaskManagerKilledDuringACheckpointTwiceInARowRecoversExactly(@InjectMiniCluster MiniCluster cluster) throws Exception {
    database("geofence_killed_checkpoint", 31);
    placeFences(0, 30);
    JobClient job = start(2, "rocksdb");
    moveObjects();
    for (int kill = 0; kill < 2; kill++) {
      awaitClockPastLocations();
      placeFences(0, 5 + kill);
      moveObjects();
      // The coordinator makes a checkpoint's directory when it triggers it and writes its
      // _metadata last: a directory without one is a checkpoint in flight.
      Path jobCheckpoints = temp.resolve("checkpoints").resolve(job.getJobID().toString());
      Waiting.untilMoment("a checkpoint in flight", PATIENCE, () -> inFlight(jobCheckpoints));
      cluster.terminateTaskManager(0).get();
      cluster.startTaskManager();
    }
    moveObjects();
    assertTriggersAsOracle();
    assertPresenceAsOracle();
    assertThat(queryLong("SELECT count(*) FROM geofence_triggers")).as("every trigger once: rows, not distinct ids")
        .isEqualTo(queryLong("SELECT count(DISTINCT (object_id, fence_id, kind, event_time)) FROM geofence_triggers"));
    threeWayCheck("killed-checkpoint", 20_000);
    assertThat(assertWarmUps(job, 2, "fresh")).allSatisfy(e -> assertThat(e.attempt()).isPositive());
  }

  private static boolean inFlight(Path jobCheckpoints) throws IOException {
    try (Stream<Path> dirs = Files.list(jobCheckpoints)) {
      return dirs.anyMatch(d -> d.getFileName().toString().startsWith("chk-") && !Files.exists(d.resolve("_metadata")));
    } catch (NoSuchFileException e) {
      return false; // a checkpoint that failed or was subsumed meanwhile
    }
  }

  /**
   * The output database is cut off (a TCP proxy between the job and its sinks, the source's own
   * connection untouched) while objects move and fences change: the sinks retry, the job fails
   * over and restarts from its checkpoint until the database is back, and then every trigger is
   * written once, presence is exact, and nothing was lost.
   */
  @Test
  void theOutputDatabaseDownForAWhileLosesAndDoublesNothing() throws Exception {
    database("geofence_sink_outage", 29);
    try (TcpProxy proxy = new TcpProxy("localhost", postgres.getPort())) {
      sinkUrl = "jdbc:postgresql://127.0.0.1:" + proxy.port() + "/geofence_sink_outage";
      placeFences(0, 30);
      JobClient job = start(2, "rocksdb");
      moveObjects();
      assertTriggersAsOracle();

      proxy.down();
      awaitClockPastLocations();
      placeFences(0, 10);
      deleteFences(10, 13);
      moveObjects();
      Waiting.until("the job to fail over on the unreachable output database", PATIENCE,
          () -> WarmStartITCase.failuresMentioning(job, "Connection") >= 1);
      proxy.up();
      moveObjects();
      assertTriggersAsOracle();
      assertPresenceAsOracle();
      assertThat(queryLong("SELECT count(*) FROM geofence_triggers")).as("every trigger once: rows, not distinct ids")
          .isEqualTo(queryLong("SELECT count(DISTINCT (object_id, fence_id, kind, event_time)) FROM geofence_triggers"));
      threeWayCheck("sink-outage", 20_000);
      assertWarmUps(job, 2, "fresh");
    }
  }

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
    awaitClockPastLocations();
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

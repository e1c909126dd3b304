package dev.geofence.job;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.geofence.connectors.source.ReplicationSlots;
import dev.geofence.connectors.source.SlotProbe;
import dev.geofence.job.testing.EndToEndFixture;
import dev.geofence.job.testing.Waiting;
import java.sql.Connection;
import java.sql.DriverManager;
import java.util.List;
import org.apache.flink.api.common.JobStatus;
import org.apache.flink.core.execution.JobClient;
import org.junit.jupiter.api.Test;

/**
 * The first half of a blue/green deploy: a second instance of the job starts from a savepoint the
 * running one took without stopping, on a slot of its own copied from the running one's just
 * before that savepoint, while the first goes on. Its gap check holds (the copy is behind the
 * savepoint), it catches up on the edits made between the copy and the savepoint and after it,
 * and it ends as the oracle; the first instance's slot is dropped once it is gone, and a slot still
 * read is not.
 */
class SecondInstanceITCase extends EndToEndFixture {

  private static final int POINTS = 2_000;

  @Test
  void aSecondInstanceOnACopiedSlotRestoresWhileTheFirstRunsAndTakesOver() throws Exception {
    database("second_instance", 41);
    placeFences(0, 30);
    // The cluster has four slots: both instances at once take them all.
    JobClient blue = start(1, "rocksdb");
    moveObjects();
    assertTriggersAsOracle();

    String blueSlot = slot;
    String greenSlot = slot + "_green";
    try (Connection admin = DriverManager.getConnection(url, "postgres", "")) {
      ReplicationSlots.copy(admin, blueSlot, greenSlot);
    }
    // Edits between the copy and the savepoint: the savepoint has them, the copy streams them
    // again (duplicates by seq); edits after it reach both instances.
    placeFences(0, 4);
    String savepoint = blue.triggerSavepoint(temp.resolve("savepoints").toUri().toString()).get();
    placeFences(4, 8);
    deleteFences(8, 11);

    slot = greenSlot;
    JobClient green = start(3, "rocksdb", savepoint);
    List<Episode> warmUps = Waiting.until("the second instance to be ready", PATIENCE, () -> episodes(green),
        rows -> rows.size() == 3 && rows.stream().allMatch(e -> e.hydratedAt() != 0));
    assertThat(warmUps).allSatisfy(e -> {
      assertThat(e.startMode()).isEqualTo("savepoint");
      assertThat(e.gapCheck()).as("the copied slot is behind the savepoint: %s", e).isEqualTo("covered");
      assertThat(e.gapReason()).as("covered by the slot itself, not by the bucket versions: %s", e).isNull();
      assertThat(e.bucketsReread()).as("nothing lost: %s", e).isZero();
    });
    assertThat(warmUps.stream().mapToLong(Episode::editsReplayed).sum()).as("edits caught up on").isPositive();
    assertThat(blue.getJobStatus().get()).as("the first instance runs on").isEqualTo(JobStatus.RUNNING);
    try (Connection admin = DriverManager.getConnection(url, "postgres", "")) {
      assertThat(SlotProbe.read(admin, blueSlot).exists()).isTrue();
      assertThatThrownBy(() -> ReplicationSlots.dropIfUnused(admin, blueSlot))
          .as("the first instance still reads its slot").isInstanceOf(IllegalStateException.class);
    }

    // The first instance gone, its slot goes, and the second is the job.
    blue.cancel().get();
    Waiting.until("the first instance to stop", PATIENCE, () -> blue.getJobStatus().get().isGloballyTerminalState());
    try (Connection admin = DriverManager.getConnection(url, "postgres", "")) {
      Waiting.until("the first instance to let go of its slot", PATIENCE, () -> {
        try {
          return ReplicationSlots.dropIfUnused(admin, blueSlot);
        } catch (IllegalStateException stillRead) {
          return false;
        }
      });
      assertThat(SlotProbe.read(admin, blueSlot).exists()).isFalse();
    }
    placeFences(11, 15);
    moveObjects();
    threeWayCheck("second-instance", POINTS);
    assertTriggersAsOracle();
    assertPresenceAsOracle();
  }
}

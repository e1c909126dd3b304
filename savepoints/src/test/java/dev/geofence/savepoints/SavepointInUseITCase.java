package dev.geofence.savepoints;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.job.operator.SavepointFiles;
import dev.geofence.job.testing.EndToEndFixture;
import dev.geofence.job.testing.Waiting;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Locale;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.state.KeyedStateHandle;
import org.apache.flink.runtime.state.changelog.ChangelogStateBackendHandle;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * {@code in-use} against what a failover needs: a job restored from a savepoint under the changelog
 * (LEGACY claim mode) names the savepoint's files in its checkpoints, and the command says so.
 * A canonical savepoint is let go at the first materialization, and the job's newest checkpoint
 * then has every file it names without it; a native one stays in use through materializations
 * (RocksDB keeps the files it restored until it compacts them), until a job restored from a newer
 * savepoint replaces the one that needed it.
 */
class SavepointInUseITCase extends EndToEndFixture {

  @ParameterizedTest
  @EnumSource(value = SavepointFormatType.class, names = {"CANONICAL", "NATIVE"})
  void inUseSaysWhenTheSavepointMayBeDeleted(SavepointFormatType format) throws Exception {
    database("geofence_in_use_" + format.name().toLowerCase(Locale.ROOT), 43);
    placeFences(0, 30);
    String savepoint = stopWithSavepoint(start(2, "rocksdb"), format);
    String checkpoints = temp.resolve("checkpoints").toUri().toString();
    assertThat(inUse(savepoint, checkpoints, "0123456789abcdef0123456789abcdef"))
        .startsWith("1 savepoint " + savepoint + " may be in use: job 0123456789abcdef0123456789abcdef has no completed checkpoint");

    // No materialization within the test: the restored job's checkpoints name the savepoint's files.
    materializationInterval = Duration.ofHours(1);
    JobClient held = start(2, "rocksdb", savepoint);
    String heldId = held.getJobID().toString();
    Waiting.until("a checkpoint of the restored job", PATIENCE, () -> !SavepointFiles.checkpoints(checkpoints, heldId).isEmpty());
    assertThat(inUse(savepoint, checkpoints, heldId))
        .startsWith("1 savepoint " + savepoint + " is in use: job " + heldId + "'s checkpoint chk-")
        .containsPattern("names [1-9][0-9]* of its files");
    cancelJobs();
    awaitSlotReleased();

    // Materializations every 2 s, until the newest checkpoint holds every subtask's materialized state.
    materializationInterval = Duration.ofSeconds(2);
    JobClient second = start(2, "rocksdb", savepoint);
    String secondId = second.getJobID().toString();
    Waiting.until("a checkpoint of materialized state", PATIENCE, () -> SavepointFiles.latestCheckpoint(checkpoints, secondId),
        checkpoint -> checkpoint != null && materialized(checkpoint));
    if (format == SavepointFormatType.CANONICAL) {
      // The materialization wrote RocksDB's files anew: nothing names the canonical savepoint's file.
      String free = Waiting.until("in-use to let the savepoint go", PATIENCE, () -> inUse(savepoint, checkpoints, secondId),
          said -> said.startsWith("0 "));
      assertThat(free).startsWith("0 savepoint " + savepoint + " is not in use by job " + secondId).contains("it may be deleted");
      // And it may be: with the savepoint gone, every file the newest checkpoint names is there.
      String newest = SavepointFiles.latestCheckpoint(checkpoints, secondId);
      moveAside(savepoint);
      assertThat(SavepointFiles.files(SavepointFiles.check(newest))).as("the files " + newest + " names").isNotEmpty();
      return;
    }
    // A native savepoint's files are RocksDB's own, and a materialization uploads only the files
    // RocksDB has written since: those it has not compacted away stay the savepoint's.
    assertThat(inUse(savepoint, checkpoints, secondId)).startsWith("1 savepoint " + savepoint + " is in use: job " + secondId)
        .containsPattern("names [1-9][0-9]* of its files");
    // Replaced by a job restored from a newer savepoint (self-contained, as native ones are), the
    // job that needed it is gone, and so is the need.
    String newer = stopWithSavepoint(second, SavepointFormatType.NATIVE);
    JobClient third = start(2, "rocksdb", newer);
    String thirdId = third.getJobID().toString();
    Waiting.until("a checkpoint of the job restored from the newer savepoint", PATIENCE,
        () -> !SavepointFiles.checkpoints(checkpoints, thirdId).isEmpty());
    assertThat(inUse(savepoint, checkpoints, thirdId)).startsWith("0 savepoint " + savepoint + " is not in use by job " + thirdId);
    assertThat(inUse(newer, checkpoints, thirdId)).startsWith("1 savepoint " + newer + " is in use: job " + thirdId);
  }

  /** Whether every subtask's keyed state in {@code checkpoint} under the changelog has been materialized. */
  private static boolean materialized(String checkpoint) {
    boolean any = false;
    for (OperatorState operator : SavepointFiles.metadata(checkpoint).getOperatorStates()) {
      for (OperatorSubtaskState subtask : operator.getSubtaskStates().values()) {
        for (KeyedStateHandle keyed : subtask.getManagedKeyedState()) {
          if (keyed instanceof ChangelogStateBackendHandle changelog) {
            any = true;
            if (changelog.getMaterializationID() <= 0) {
              return false;
            }
          }
        }
      }
    }
    return any;
  }

  private static void moveAside(String savepoint) throws Exception {
    Path directory = Path.of(URI.create(savepoint));
    Files.move(directory, directory.resolveSibling(directory.getFileName() + "-aside"));
  }

  private static String inUse(String savepoint, String checkpoints, String jobId) {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    PrintStream out = new PrintStream(bytes, true, StandardCharsets.UTF_8);
    int status = SavepointCommand.run(new String[] {"in-use", savepoint, "--checkpoint-dir", checkpoints, "--job-id", jobId}, out, out);
    return status + " " + bytes.toString(StandardCharsets.UTF_8);
  }
}

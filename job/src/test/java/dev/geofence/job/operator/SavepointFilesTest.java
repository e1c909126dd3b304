package dev.geofence.job.operator;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.DataOutputStream;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.apache.flink.runtime.checkpoint.Checkpoints;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.runtime.jobgraph.OperatorID;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupRangeOffsets;
import org.apache.flink.runtime.state.KeyGroupsStateHandle;
import org.apache.flink.runtime.state.changelog.ChangelogStateBackendHandle.ChangelogStateBackendHandleImpl;
import org.apache.flink.runtime.state.filesystem.RelativeFileStateHandle;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A checkpoint taken under the changelog is checked through to its materialized part. Flink 1.20
 * carries a canonical savepoint's file there, by a path relative to the savepoint, until the first
 * materialization, and resolves it against the checkpoint's own directory when a new job restores
 * that checkpoint, where it is not: such a checkpoint is refused in one sentence naming the file,
 * where Flink would fail the restore at every attempt (as a killed job resumed by deploy did).
 */
class SavepointFilesTest {

  @TempDir Path temp;

  @Test
  void aChangelogCheckpointWhoseMaterializedFileIsNotWhereItPointsIsRefused() throws Exception {
    Path savepoint = Files.createDirectories(temp.resolve("savepoint-1"));
    Files.write(savepoint.resolve("keyed-state"), new byte[10]);
    Path checkpoint = Files.createDirectories(temp.resolve("job/chk-7"));
    writeMetadata(checkpoint, savepoint.resolve("keyed-state"));

    assertThatThrownBy(() -> SavepointFiles.check(checkpoint.toUri().toString()))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("cannot be read: its state file")
        .hasMessageContaining("chk-7/keyed-state is missing");

    // Where the checkpoint's metadata resolves it, the same file passes.
    Files.copy(savepoint.resolve("keyed-state"), checkpoint.resolve("keyed-state"));
    assertThat(SavepointFiles.check(checkpoint.toUri().toString()).getCheckpointId()).isEqualTo(7);
  }

  /** A checkpoint's metadata as the changelog backend leaves it: one keyed operator, its materialized state the savepoint's file. */
  private static void writeMetadata(Path checkpoint, Path savepointFile) throws Exception {
    RelativeFileStateHandle file = new RelativeFileStateHandle(
        new org.apache.flink.core.fs.Path(savepointFile.toUri()), savepointFile.getFileName().toString(), 10);
    KeyGroupsStateHandle materialized = new KeyGroupsStateHandle(new KeyGroupRangeOffsets(0, 127), file);
    ChangelogStateBackendHandleImpl changelog = new ChangelogStateBackendHandleImpl(
        List.of(materialized), List.of(), KeyGroupRange.of(0, 127), 7, 1, 10);
    OperatorState operator = new OperatorState(new OperatorID(), 1, 128);
    operator.putState(0, OperatorSubtaskState.builder().setManagedKeyedState(changelog).build());
    try (OutputStream out = Files.newOutputStream(checkpoint.resolve("_metadata"))) {
      Checkpoints.storeCheckpointMetadata(new CheckpointMetadata(7, List.of(operator), List.of()), new DataOutputStream(out));
    }
  }
}

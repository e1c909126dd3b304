package dev.geofence.savepoints;

import dev.geofence.job.operator.SavepointFiles;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.apache.flink.core.fs.FileStatus;
import org.apache.flink.core.fs.FileSystem;
import org.apache.flink.core.fs.Path;
import org.apache.flink.runtime.state.CompletedCheckpointStorageLocation;
import org.apache.flink.runtime.state.filesystem.AbstractFsCheckpointStorageAccess;
import org.apache.flink.runtime.state.filesystem.FileStateHandle;
import org.apache.flink.runtime.state.filesystem.RelativeFileStateHandle;

/**
 * Whether a job still needs the savepoint it was restored from. Under the changelog the job
 * restores in {@code LEGACY} claim mode, and its checkpoints name the savepoint's files, a
 * canonical one's until each subtask's first changelog materialization, a native one's until
 * RocksDB has compacted away the files it restored (docs/deployment.md#when-a-savepoint-may-be-deleted):
 * a failover restores from them. The savepoint may be deleted once the job has a completed
 * checkpoint and none of the checkpoints Flink retains for it names one of its files; before the
 * job's first checkpoint a failover restores from the savepoint itself.
 */
final class SavepointUse {

  /** A retained checkpoint of the job and how many of the savepoint's files it names. */
  record Checkpoint(String path, int savepointFiles) {}

  final String savepoint;
  final String jobId;
  final String checkpointDir;
  /** Newest first. */
  final List<Checkpoint> checkpoints;

  private SavepointUse(String savepoint, String jobId, String checkpointDir, List<Checkpoint> checkpoints) {
    this.savepoint = savepoint;
    this.jobId = jobId;
    this.checkpointDir = checkpointDir;
    this.checkpoints = checkpoints;
  }

  /**
   * Reads the savepoint's directory and the metadata of every retained checkpoint of job {@code
   * jobId} under {@code checkpointDir}.
   *
   * @throws IllegalArgumentException if the savepoint, the checkpoint directory or a checkpoint's
   *     metadata cannot be read
   */
  static SavepointUse find(String savepoint, String checkpointDir, String jobId) {
    SavepointFiles.metadata(savepoint);
    Path directory;
    Set<String> names = new HashSet<>();
    try {
      CompletedCheckpointStorageLocation location = AbstractFsCheckpointStorageAccess.resolveCheckpointPointer(savepoint);
      directory = new Path(location.getExternalPointer());
      for (FileStatus file : FileSystem.get(directory.toUri()).listStatus(directory)) {
        names.add(file.getPath().getName());
      }
    } catch (IOException e) {
      throw new IllegalArgumentException("savepoint " + savepoint + " cannot be listed (" + e.getMessage() + ")");
    }
    String prefix = directory.toUri().getPath() + "/";
    List<Checkpoint> checkpoints = new ArrayList<>();
    for (String checkpoint : SavepointFiles.checkpoints(checkpointDir, jobId)) {
      int named = 0;
      for (FileStateHandle file : SavepointFiles.files(SavepointFiles.metadata(checkpoint))) {
        // Flink 1.20 writes a restored savepoint's file into a checkpoint by its name alone, which
        // reads back as a path in the checkpoint's directory: the name tells it (they are random).
        boolean savepoints = file instanceof RelativeFileStateHandle relative
            ? names.contains(relative.getRelativePath())
            : file.getFilePath().toUri().getPath().startsWith(prefix);
        if (savepoints) {
          named++;
        }
      }
      checkpoints.add(new Checkpoint(checkpoint, named));
    }
    return new SavepointUse(savepoint, jobId, checkpointDir, checkpoints);
  }

  /** Whether deleting the savepoint could leave a failover of the job without files it restores. */
  boolean inUse() {
    return checkpoints.isEmpty() || checkpoints.stream().anyMatch(c -> c.savepointFiles() > 0);
  }

  /** One sentence for the command line, ending in a line break. */
  String report() {
    if (checkpoints.isEmpty()) {
      return String.format("savepoint %s may be in use: job %s has no completed checkpoint under %s, so a failover would"
          + " restore the savepoint itself; keep it%n", savepoint, jobId, checkpointDir);
    }
    List<String> naming = new ArrayList<>();
    for (Checkpoint c : checkpoints) {
      if (c.savepointFiles() > 0) {
        naming.add(new Path(c.path()).getName() + " names " + c.savepointFiles() + " of its files");
      }
    }
    if (!naming.isEmpty()) {
      return String.format("savepoint %s is in use: job %s's checkpoint %s; keep it until the job's checkpoints name none"
          + " (a canonical savepoint's files after the changelog's next materialization, a native one's once RocksDB has"
          + " compacted them away) or a job restored from a newer savepoint has replaced this one%n",
          savepoint, jobId, String.join(", ", naming));
    }
    List<String> names = new ArrayList<>();
    checkpoints.forEach(c -> names.add(new Path(c.path()).getName()));
    return String.format("savepoint %s is not in use by job %s: its checkpoints (%s) name none of its files; it may be"
        + " deleted%n", savepoint, jobId, String.join(", ", names));
  }
}

package dev.geofence.job.operator;

import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import org.apache.flink.api.common.ExecutionConfig;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.typeutils.base.array.BytePrimitiveArraySerializer;
import org.apache.flink.core.fs.CloseableRegistry;
import org.apache.flink.core.fs.FileStatus;
import org.apache.flink.core.fs.FileSystem;
import org.apache.flink.runtime.checkpoint.Checkpoints;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.runtime.jobgraph.OperatorID;
import org.apache.flink.runtime.state.CompletedCheckpointStorageLocation;
import org.apache.flink.runtime.state.DefaultOperatorStateBackend;
import org.apache.flink.runtime.state.DefaultOperatorStateBackendBuilder;
import org.apache.flink.runtime.state.IncrementalRemoteKeyedStateHandle;
import org.apache.flink.runtime.state.KeyGroupsSavepointStateHandle;
import org.apache.flink.runtime.state.KeyGroupsStateHandle;
import org.apache.flink.runtime.state.KeyedStateHandle;
import org.apache.flink.runtime.state.OperatorStateHandle;
import org.apache.flink.runtime.state.StreamStateHandle;
import org.apache.flink.runtime.state.changelog.ChangelogStateBackendHandle;
import org.apache.flink.runtime.state.filesystem.AbstractFsCheckpointStorageAccess;
import org.apache.flink.runtime.state.filesystem.FileStateHandle;
import org.apache.flink.shaded.guava31.com.google.common.hash.Hashing;

/**
 * Reads a savepoint's (or retained checkpoint's) metadata and checks that every state file it
 * names is there at the length it names, before a job is given it: a missing, truncated or foreign
 * savepoint is refused in one sentence naming the file, where Flink would start the job and fail
 * its restore again at every attempt. The state files' contents are Flink's to check on restore.
 */
public final class SavepointFiles {

  private SavepointFiles() {}

  /**
   * The savepoint's metadata, its files checked.
   *
   * @throws IllegalArgumentException if the metadata or a state file cannot be read, or a state
   *     file's length is not the one the metadata gives
   */
  public static CheckpointMetadata check(String savepoint) {
    CheckpointMetadata metadata = metadata(savepoint);
    for (FileStateHandle file : files(metadata)) {
      long length;
      try {
        FileStatus status = FileSystem.get(file.getFilePath().toUri()).getFileStatus(file.getFilePath());
        length = status.getLen();
      } catch (IOException e) {
        throw new IllegalArgumentException("savepoint " + savepoint + " cannot be read: its state file " + file.getFilePath()
            + " is missing (" + reason(e) + ")");
      }
      if (length != file.getStateSize()) {
        throw new IllegalArgumentException("savepoint " + savepoint + " cannot be read: its state file " + file.getFilePath()
            + " is " + length + " bytes where the savepoint wrote " + file.getStateSize());
      }
    }
    return metadata;
  }

  /**
   * The savepoint's metadata alone, its state files not looked at.
   *
   * @throws IllegalArgumentException if the metadata cannot be read
   */
  public static CheckpointMetadata metadata(String savepoint) {
    try {
      CompletedCheckpointStorageLocation location = AbstractFsCheckpointStorageAccess.resolveCheckpointPointer(savepoint);
      try (DataInputStream in = new DataInputStream(location.getMetadataHandle().openInputStream())) {
        return Checkpoints.loadCheckpointMetadata(in, SavepointFiles.class.getClassLoader(), location.getExternalPointer());
      }
    } catch (EOFException e) {
      throw new IllegalArgumentException("savepoint " + savepoint + " cannot be read (its metadata file ends early: cut short?)");
    } catch (IOException | RuntimeException e) {
      throw new IllegalArgumentException("savepoint " + savepoint + " cannot be read (" + reason(e) + ")");
    }
  }

  /**
   * The parallelism at which a canonical savepoint's keyed state was written (Flink's own format,
   * key groups in one stream per subtask), or 0 if it holds no such state (a native savepoint,
   * whose files are RocksDB's, or no keyed state at all).
   */
  public static int canonicalKeyedParallelism(CheckpointMetadata metadata) {
    int parallelism = 0;
    for (OperatorState operator : metadata.getOperatorStates()) {
      for (OperatorSubtaskState subtask : operator.getSubtaskStates().values()) {
        if (subtask.getManagedKeyedState().stream().anyMatch(KeyGroupsSavepointStateHandle.class::isInstance)) {
          parallelism = Math.max(parallelism, operator.getParallelism());
        }
      }
    }
    return parallelism;
  }

  /**
   * The splits the readers of the source with uid {@code sourceUid} held in the savepoint, each as
   * the source's split serializer wrote it (version first): where a restored run of that source
   * resumes. Empty if the savepoint holds no such source.
   *
   * @throws IllegalArgumentException if a state file cannot be read
   */
  public static List<byte[]> readerSplits(CheckpointMetadata metadata, String sourceUid) {
    return listState(metadata, sourceUid, new ListStateDescriptor<>(SOURCE_READER_STATE, BytePrimitiveArraySerializer.INSTANCE), false);
  }

  /**
   * The entries of every subtask's list state {@code descriptor} (union list state if {@code
   * union}) of the operator with uid {@code uid} in the savepoint; empty if it holds none.
   *
   * @throws IllegalArgumentException if a state file cannot be read
   */
  public static <T> List<T> listState(CheckpointMetadata metadata, String uid, ListStateDescriptor<T> descriptor, boolean union) {
    // The operator id Flink derives from a uid (StreamGraphHasherV2: murmur3_128 of its UTF-8 bytes).
    OperatorID id = new OperatorID(Hashing.murmur3_128(0).hashString(uid, StandardCharsets.UTF_8).asBytes());
    List<OperatorStateHandle> handles = new ArrayList<>();
    for (OperatorState operator : metadata.getOperatorStates()) {
      if (operator.getOperatorID().equals(id)) {
        operator.getSubtaskStates().values().forEach(subtask -> handles.addAll(subtask.getManagedOperatorState()));
      }
    }
    List<T> entries = new ArrayList<>();
    if (handles.isEmpty()) {
      return entries;
    }
    // Read as Flink's restore reads it, which knows how each file was written (compressed or not).
    try (CloseableRegistry registry = new CloseableRegistry()) {
      DefaultOperatorStateBackend backend = new DefaultOperatorStateBackendBuilder(
          SavepointFiles.class.getClassLoader(), new ExecutionConfig(), false, handles, registry).build();
      try {
        (union ? backend.getUnionListState(descriptor) : backend.getListState(descriptor)).get().forEach(entries::add);
      } finally {
        backend.dispose();
      }
    } catch (Exception e) {
      throw new IllegalArgumentException("the savepoint's state of " + uid + " cannot be read (" + reason(e) + ")");
    }
    return entries;
  }

  /**
   * The newest completed checkpoint of job {@code jobId} under {@code checkpointDir} (Flink's
   * layout: {@code DIR/JOB_ID/chk-N/_metadata}), or null if it has none: where a job whose cluster
   * is gone can be resumed from.
   *
   * @throws IllegalArgumentException if the directory cannot be listed
   */
  public static String latestCheckpoint(String checkpointDir, String jobId) {
    List<String> checkpoints = checkpoints(checkpointDir, jobId);
    return checkpoints.isEmpty() ? null : checkpoints.get(0);
  }

  /**
   * Every completed checkpoint of job {@code jobId} under {@code checkpointDir} that Flink has
   * retained (those with their metadata written), newest first; empty if it has none.
   *
   * @throws IllegalArgumentException if the directory cannot be listed
   */
  public static List<String> checkpoints(String checkpointDir, String jobId) {
    org.apache.flink.core.fs.Path job = new org.apache.flink.core.fs.Path(checkpointDir, jobId);
    try {
      FileSystem fs = job.getFileSystem();
      List<org.apache.flink.core.fs.Path> found = new ArrayList<>();
      if (fs.exists(job)) {
        for (FileStatus entry : fs.listStatus(job)) {
          String name = entry.getPath().getName();
          if (entry.isDir() && name.matches("chk-\\d+") && fs.exists(new org.apache.flink.core.fs.Path(entry.getPath(), "_metadata"))) {
            found.add(entry.getPath());
          }
        }
      }
      found.sort(Comparator.comparingLong((org.apache.flink.core.fs.Path p) -> Long.parseLong(p.getName().substring(4))).reversed());
      List<String> paths = new ArrayList<>();
      found.forEach(p -> paths.add(p.toString()));
      return paths;
    } catch (IOException e) {
      throw new IllegalArgumentException("the checkpoints of job " + jobId + " under " + checkpointDir + " cannot be listed ("
          + reason(e) + ")");
    }
  }

  /** The operator state in which a source operator keeps its readers' splits (Flink's SourceOperator). */
  private static final String SOURCE_READER_STATE = "SourceReaderState";

  private static String reason(Exception e) {
    return e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
  }

  /**
   * The files the state handles of a canonical or native savepoint, or of a checkpoint, refer to: a
   * checkpoint's own, and those of a savepoint it was restored from that it still names (a
   * {@link org.apache.flink.runtime.state.filesystem.RelativeFileStateHandle} by its name
   * resolved against the checkpoint's directory, as Flink 1.20 writes them).
   */
  public static List<FileStateHandle> files(CheckpointMetadata metadata) {
    List<FileStateHandle> files = new ArrayList<>();
    for (OperatorState operator : metadata.getOperatorStates()) {
      for (OperatorSubtaskState subtask : operator.getSubtaskStates().values()) {
        for (KeyedStateHandle keyed : subtask.getManagedKeyedState()) {
          keyed(keyed, files);
        }
        for (KeyedStateHandle keyed : subtask.getRawKeyedState()) {
          keyed(keyed, files);
        }
        for (OperatorStateHandle state : subtask.getManagedOperatorState()) {
          stream(state.getDelegateStateHandle(), files);
        }
        for (OperatorStateHandle state : subtask.getRawOperatorState()) {
          stream(state.getDelegateStateHandle(), files);
        }
      }
      if (operator.getCoordinatorState() != null) {
        stream(operator.getCoordinatorState(), files);
      }
    }
    return files;
  }

  private static void keyed(KeyedStateHandle handle, List<FileStateHandle> files) {
    if (handle instanceof ChangelogStateBackendHandle changelog) {
      // A checkpoint under the changelog: its materialized part is the nested backend's state (the
      // changelog's own files, written in pieces, are its storage's to check). Flink 1.20 carries a
      // canonical savepoint's files there by relative path until the first materialization, and
      // resolves them against the checkpoint's directory on restore, where they are not.
      changelog.getMaterializedStateHandles().forEach(h -> keyed(h, files));
    } else if (handle instanceof KeyGroupsStateHandle groups) {
      stream(groups.getDelegateStateHandle(), files);
    } else if (handle instanceof IncrementalRemoteKeyedStateHandle incremental) {
      stream(incremental.getMetaDataStateHandle(), files);
      incremental.getSharedState().forEach(h -> stream(h.getHandle(), files));
      incremental.getPrivateState().forEach(h -> stream(h.getHandle(), files));
    }
  }

  private static void stream(StreamStateHandle handle, List<FileStateHandle> files) {
    if (handle instanceof FileStateHandle file) {
      files.add(file);
    }
  }
}

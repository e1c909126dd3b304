package dev.geofence.job;

import dev.geofence.job.operator.SavepointFiles;
import dev.geofence.connectors.config.GeofenceOptions;
import java.time.Duration;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.ExecutionOptions;
import org.apache.flink.configuration.ExternalizedCheckpointRetention;
import org.apache.flink.configuration.MemorySize;
import org.apache.flink.configuration.ReadableConfig;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.configuration.DeploymentOptions;
import org.apache.flink.configuration.StateChangelogOptions;
import org.apache.flink.configuration.StateRecoveryOptions;
import org.apache.flink.core.execution.RestoreMode;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The state and checkpointing the job runs on where neither the command line nor the cluster's
 * configuration says: RocksDB with incremental checkpoints and 64 KB uncompressed blocks, under
 * Flink's changelog backend writing next to the checkpoints, and checkpoint failures tolerated for
 * about ten minutes. On RocksDB a restore reads each bucket's fences in one pass from local files,
 * and the changelog makes a checkpoint the few edits since the last one (megabytes at 1.2 M
 * fences, where plain RocksDB uploaded a gigabyte of compacted files). Whatever the user set is kept, but
 * for the one claim mode that cannot work.
 *
 * <p>The block size: a restore reads every fence of a bucket in one pass, a gigabyte per subtask
 * at 1.2 M fences, which at RocksDB's 4 KB (two or three fences a block) is a block read, a
 * lookup in the block cache and a decompression per two fences; 64 KB blocks read the same bytes
 * in a sixteenth of the reads, and the job reads single keys seldom
 * (docs/adr/0007-rocksdb-files-uncompressed-in-64-kb-blocks.md). RocksDB keeps each file's block
 * size, so state written with other blocks is read as it is and takes the new size as compactions
 * rewrite it.
 *
 * <p>No compression: a fence is mostly coordinates, doubles that Snappy (RocksDB's default) shrinks
 * by a fifth at most, and decompressing them was a third of a restore's reading (a profile of one
 * at 1.2 M fences), on top of compressing every file a cold start or a compaction writes. Without
 * it, savepoints and RocksDB's files are about a quarter larger
 * (docs/adr/0007-rocksdb-files-uncompressed-in-64-kb-blocks.md). Like the block size it is written
 * per file, so files written compressed are read as they are.
 *
 * <p>Snapshot compression ({@code execution.checkpointing.snapshot-compression}) on: Flink 1.20
 * reads operator state, and keyed state of full snapshots and canonical savepoints, through a
 * stream that reads one byte at a time from what it wraps, without compression the file itself:
 * a system call per byte. The objects' newest times, every one of which each subtask reads at a
 * restore, cost a subtask 6.5 s at 200,000 objects that way and 27 ms compressed (Snappy reads the
 * file in blocks; docs/adr/0010-snapshot-compression-on.md). RocksDB's own files (native
 * savepoints, incremental checkpoints) are not affected; state written uncompressed is read as
 * it is.
 *
 * <p>Flink's changelog backend cannot restore a savepoint in {@code NO_CLAIM} mode (Flink's
 * default): it must take a full snapshot at the first checkpoint and cannot. So a restore under
 * the changelog in NO_CLAIM mode, or in none, runs in {@code LEGACY} mode, which leaves the
 * savepoint to the user too (the job's checkpoints refer to a canonical savepoint's files until
 * the changelog's first materialization, to a native one's until RocksDB has compacted them away:
 * the savepoint tools' {@code in-use} says when they no longer do); {@code CLAIM} hands it over to
 * the job, which deletes it once no checkpoint needs it. A restore that would never stop needing
 * even a canonical savepoint (LEGACY with materializations off) is refused. A canonical savepoint
 * restored at another parallelism runs without the changelog ({@link #rescalesCanonical}).
 */
public final class StateSettings {

  private static final Logger LOG = LoggerFactory.getLogger(StateSettings.class);

  /** {@code FsStateChangelogOptions.BASE_PATH}, by key: its class is absent where the changelog is. */
  private static final ConfigOption<String> CHANGELOG_BASE_PATH =
      ConfigOptions.key("state.changelog.dstl.dfs.base-path").stringType().noDefaultValue();

  /** {@code RocksDBConfigurableOptions.BLOCK_SIZE}, by key: its class is RocksDB's backend's, absent from a heap-only class path. */
  static final ConfigOption<MemorySize> ROCKSDB_BLOCK_SIZE =
      ConfigOptions.key("state.backend.rocksdb.block.blocksize").memoryType().noDefaultValue();

  /** {@code RocksDBConfigurableOptions.COMPRESSION_PER_LEVEL}, by key, for the same reason: one value is every level's. */
  static final ConfigOption<String> ROCKSDB_COMPRESSION =
      ConfigOptions.key("state.backend.rocksdb.compression.per.level").stringType().noDefaultValue();

  /** The compression of the job's RocksDB files where the user sets none. */
  static final String DEFAULT_ROCKSDB_COMPRESSION = "NO_COMPRESSION";

  /** The block size of the job's RocksDB files where the user sets none. */
  static final MemorySize DEFAULT_ROCKSDB_BLOCK_SIZE = MemorySize.parse("64kb");

  /** How long checkpoints may keep failing before the job fails over. */
  static final Duration TOLERATED_OUTAGE = Duration.ofMinutes(10);

  private static final String CHANGELOG_BACKEND = "org.apache.flink.state.changelog.ChangelogStateBackend";
  private static final String CHANGELOG_STORAGE = "org.apache.flink.changelog.fs.FsStateChangelogStorageFactory";

  private StateSettings() {}

  /**
   * Sets in {@code config} (what goes to Flink) the state backend, incremental checkpoints, snapshot
   * compression, the tolerated checkpoint failures, the changelog and the restore's claim mode, from {@code options} (the cluster's configuration with
   * the command line over it).
   *
   */
  public static void apply(Configuration config, ReadableConfig options) {
    String backend = options.get(GeofenceOptions.STATE_BACKEND);
    config.set(StateBackendOptions.STATE_BACKEND, backend);
    setUnlessSet(config, options, CheckpointingOptions.INCREMENTAL_CHECKPOINTS, backend.equals("rocksdb"));
    if (backend.equals("rocksdb")) {
      setUnlessSet(config, options, ROCKSDB_BLOCK_SIZE, DEFAULT_ROCKSDB_BLOCK_SIZE);
      setUnlessSet(config, options, ROCKSDB_COMPRESSION, DEFAULT_ROCKSDB_COMPRESSION);
    }
    setUnlessSet(config, options, ExecutionOptions.SNAPSHOT_COMPRESSION, true);
    setUnlessSet(config, options, CheckpointingOptions.TOLERABLE_FAILURE_NUMBER,
        tolerableFailures(options.get(GeofenceOptions.CHECKPOINT_INTERVAL)));
    if (GeofenceOptions.handsOverOutputs(options)) {
      // A writer that fails for good during a handover is resumed from its last checkpoint
      // (docs/deployment.md#bluegreen-deploys): Flink keeps it when the job fails, not when it is cancelled.
      setUnlessSet(config, options, CheckpointingOptions.EXTERNALIZED_CHECKPOINT_RETENTION,
          ExternalizedCheckpointRetention.DELETE_ON_CANCELLATION);
    }
    String savepoint = options.get(StateRecoveryOptions.SAVEPOINT_PATH);
    boolean changelog;
    if (options.getOptional(StateChangelogOptions.ENABLE_STATE_CHANGE_LOG).isPresent()) {
      changelog = options.get(StateChangelogOptions.ENABLE_STATE_CHANGE_LOG);
    } else {
      changelog = defaultChangelog(config, options);
      if (changelog && rescalesCanonical(savepoint, options)) {
        config.set(StateChangelogOptions.ENABLE_STATE_CHANGE_LOG, false);
        changelog = false;
      }
    }
    if (!changelog || savepoint == null) {
      return;
    }
    RestoreMode mode = options.getOptional(StateRecoveryOptions.RESTORE_MODE).orElse(null);
    if (mode != RestoreMode.CLAIM && !options.get(StateChangelogOptions.PERIODIC_MATERIALIZATION_ENABLED)) {
      // Without materializations the job's checkpoints name the savepoint's files for as long as
      // it runs: deleting the savepoint, ever, would leave its failovers nothing to restore.
      throw new IllegalArgumentException("savepoint " + savepoint + " would stay in use for as long as the job runs: under the"
          + " changelog its checkpoints name the savepoint's files at least until the first materialization, and"
          + " state.changelog.periodic-materialize.enabled is false; turn materializations on, hand the savepoint to the"
          + " job (-claimMode CLAIM), or turn the changelog off (state.changelog.enabled: false)");
    }
    if (mode == null || mode == RestoreMode.NO_CLAIM) {
      // flink run -s always passes a claim mode, NO_CLAIM unless told otherwise: it cannot be told
      // from a choice, and it would fail the first checkpoint. LEGACY also leaves the savepoint be.
      config.set(StateRecoveryOptions.RESTORE_MODE, RestoreMode.LEGACY);
      LOG.info("restoring {} in LEGACY claim mode{}: the changelog state backend cannot restore in NO_CLAIM mode;"
          + " the job's checkpoints name the savepoint's files (a canonical one's until the first changelog materialization,"
          + " a native one's until RocksDB has compacted them away): delete it only once `geofence-savepoints.jar in-use`"
          + " says it is not in use, or pass CLAIM to hand it to the job",
          savepoint, mode == null ? "" : " instead of NO_CLAIM");
    }
  }

  /** Sets {@code option} in {@code config} to {@code value} where {@code options} leave it unset: the user's value is kept. */
  private static <T> void setUnlessSet(Configuration config, ReadableConfig options, ConfigOption<T> option, T value) {
    if (!options.getOptional(option).isPresent()) {
      config.set(option, value);
    }
  }

  /**
   * Whether the job would restore a canonical savepoint at a parallelism other than the one it was
   * taken at (or at one not configured, the cluster's). Under the changelog, Flink 1.20 registers
   * each subtask's share of a rescaled canonical savepoint as state of the job's own first
   * checkpoint, and deletes it, the savepoint's file with it, once that subtask materializes:
   * the user's savepoint is then gone, and so is what the other subtasks of that file still
   * restore from. Such a restore runs without the changelog (its checkpoints copy what changed in
   * RocksDB's files); the next restore at its own parallelism gets the changelog back.
   */
  private static boolean rescalesCanonical(String savepoint, ReadableConfig options) {
    if (savepoint == null) {
      return false;
    }
    int taken;
    try {
      // The metadata alone: GeofenceCommand has checked the files already.
      taken = SavepointFiles.canonicalKeyedParallelism(SavepointFiles.metadata(savepoint));
    } catch (IllegalArgumentException unreadable) {
      // Refused before the job is built (GeofenceCommand), or by Flink's restore: not for this to say.
      return false;
    }
    Integer parallelism = options.getOptional(GeofenceOptions.PARALLELISM).orElse(null);
    if (taken == 0 || (parallelism != null && parallelism == taken)) {
      return false;
    }
    LOG.warn("restoring the canonical savepoint {} (taken at parallelism {}) at parallelism {}: the changelog state"
        + " backend stays off for this run, since under it Flink deletes a rescaled canonical savepoint's files;"
        + " restore at parallelism {}, or from a native savepoint, to keep it", savepoint, taken,
        parallelism == null ? "the cluster's" : parallelism, taken);
    return true;
  }

  /**
   * The failed checkpoints in a row tolerated before the job fails over: about {@link
   * #TOLERATED_OUTAGE} of them. Flink's default, none, fails the job over at the first, which
   * cannot mend an unreachable checkpoint store and stops evaluating until it is back; a job that
   * goes on meanwhile only has more to replay should it fail.
   */
  static int tolerableFailures(Duration interval) {
    return (int) Math.max(3, TOLERATED_OUTAGE.toMillis() / Math.max(1, interval.toMillis()));
  }

  /** Turns the changelog on where it can work: a durable checkpoint directory and its classes. */
  private static boolean defaultChangelog(Configuration config, ReadableConfig options) {
    String checkpoints = options.get(CheckpointingOptions.CHECKPOINTS_DIRECTORY);
    if (checkpoints == null) {
      LOG.warn("no {}: the changelog state backend stays off, and checkpoints copy the whole state",
          CheckpointingOptions.CHECKPOINTS_DIRECTORY.key());
      return false;
    }
    if (!onClassPath(CHANGELOG_BACKEND) || !onClassPath(CHANGELOG_STORAGE)) {
      LOG.warn("the changelog state backend is not on the class path (flink-statebackend-changelog, flink-dstl-dfs):"
          + " it stays off, and checkpoints copy what changed in RocksDB's files");
      return false;
    }
    // The TaskManagers make the changelog's storage from their own configuration, not the job's,
    // and their default keeps the changes in memory: each checkpoint then carries every change
    // since the last materialization through the JobManager's RPC, and stops completing once that
    // passes its frame size (10 MB), minutes into a real load. A job can choose the storage only
    // for the cluster it starts itself (java -jar); elsewhere the cluster must have chosen it.
    boolean embedded = "local".equals(options.get(DeploymentOptions.TARGET));
    String storage = options.get(StateChangelogOptions.STATE_CHANGE_LOG_STORAGE);
    if (!embedded && !"filesystem".equalsIgnoreCase(storage)) {
      LOG.warn("the cluster's {} is '{}': the changelog state backend stays off, since the TaskManagers would keep its"
          + " changes in memory and checkpoints would stop completing once they pass the RPC frame size; set {}: filesystem"
          + " and {} in the cluster's configuration to have it", StateChangelogOptions.STATE_CHANGE_LOG_STORAGE.key(), storage,
          StateChangelogOptions.STATE_CHANGE_LOG_STORAGE.key(), CHANGELOG_BASE_PATH.key());
      return false;
    }
    config.set(StateChangelogOptions.ENABLE_STATE_CHANGE_LOG, true);
    if (!options.getOptional(StateChangelogOptions.MATERIALIZATION_MAX_FAILURES_ALLOWED).isPresent()) {
      // A materialization that cannot upload fails the task once this many have failed: no
      // sooner than the checkpoints' tolerance.
      config.set(StateChangelogOptions.MATERIALIZATION_MAX_FAILURES_ALLOWED,
          tolerableFailures(options.get(StateChangelogOptions.PERIODIC_MATERIALIZATION_INTERVAL)));
    }
    if (!options.getOptional(StateChangelogOptions.STATE_CHANGE_LOG_STORAGE).isPresent()) {
      config.set(StateChangelogOptions.STATE_CHANGE_LOG_STORAGE, "filesystem");
    }
    if (!options.getOptional(CHANGELOG_BASE_PATH).isPresent()) {
      config.set(CHANGELOG_BASE_PATH, checkpoints.replaceAll("/+$", "") + "/changelog");
    }
    return true;
  }

  private static boolean onClassPath(String name) {
    try {
      Class.forName(name, false, StateSettings.class.getClassLoader());
      return true;
    } catch (ClassNotFoundException e) {
      return false;
    }
  }
}

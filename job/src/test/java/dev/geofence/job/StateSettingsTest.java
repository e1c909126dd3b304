package dev.geofence.job;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.geofence.connectors.config.GeofenceOptions;
import java.time.Duration;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import java.util.List;
import org.apache.flink.configuration.ExternalizedCheckpointRetention;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.DeploymentOptions;
import org.apache.flink.configuration.ExecutionOptions;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.configuration.StateChangelogOptions;
import org.apache.flink.configuration.StateRecoveryOptions;
import org.apache.flink.core.execution.RestoreMode;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class StateSettingsTest {

  private static final String CHECKPOINTS = "file:///var/geofence/checkpoints/";

  @Test
  void byDefaultRocksDbIncrementalUnderTheChangelogNextToTheCheckpoints() {
    Configuration config = applied(options());
    assertThat(config.get(StateBackendOptions.STATE_BACKEND)).isEqualTo("rocksdb");
    assertThat(config.get(CheckpointingOptions.INCREMENTAL_CHECKPOINTS)).isTrue();
    assertThat(config.get(StateChangelogOptions.ENABLE_STATE_CHANGE_LOG)).isTrue();
    assertThat(config.get(StateChangelogOptions.STATE_CHANGE_LOG_STORAGE)).isEqualTo("filesystem");
    assertThat(config.toMap()).containsEntry("state.changelog.dstl.dfs.base-path", "file:///var/geofence/checkpoints/changelog");
    assertThat(config.getOptional(StateRecoveryOptions.RESTORE_MODE)).as("nothing restored").isEmpty();
    assertThat(config.get(CheckpointingOptions.TOLERABLE_FAILURE_NUMBER)).as("10 min at 10 s").isEqualTo(60);
    assertThat(config.get(StateChangelogOptions.MATERIALIZATION_MAX_FAILURES_ALLOWED)).as("10 min at 10 min").isEqualTo(3);
    assertThat(config.toMap()).containsEntry("state.backend.rocksdb.block.blocksize", "64 kb");
    assertThat(config.toMap()).containsEntry("state.backend.rocksdb.compression.per.level", "NO_COMPRESSION");
    assertThat(config.get(ExecutionOptions.SNAPSHOT_COMPRESSION)).as("operator state read in blocks, not a byte at a time").isTrue();
  }

  /**
   * On a cluster the TaskManagers make the changelog's storage from their own configuration: with
   * Flink's default, in memory, every checkpoint would carry all changes through the JobManager's
   * RPC (a session cluster's stopped completing within minutes), so the changelog stays off unless
   * the cluster's configuration puts it on files.
   */
  @Test
  void onAClusterTheChangelogIsOnOnlyWhereTheClusterKeepsItOnFiles() {
    Configuration options = options();
    options.set(DeploymentOptions.TARGET, "remote");
    options.set(StateRecoveryOptions.SAVEPOINT_PATH, "file:///sp");
    Configuration config = applied(options);
    assertThat(config.getOptional(StateChangelogOptions.ENABLE_STATE_CHANGE_LOG)).as("the cluster's storage is memory").isEmpty();
    assertThat(config.getOptional(StateRecoveryOptions.RESTORE_MODE)).isEmpty();

    options.set(StateChangelogOptions.STATE_CHANGE_LOG_STORAGE, "filesystem");
    config = applied(options);
    assertThat(config.get(StateChangelogOptions.ENABLE_STATE_CHANGE_LOG)).isTrue();
    assertThat(config.get(StateRecoveryOptions.RESTORE_MODE)).isEqualTo(RestoreMode.LEGACY);
  }

  @Test
  void checkpointFailuresAreToleratedForTenMinutesOrAsTheUserSays() {
    assertThat(StateSettings.tolerableFailures(Duration.ofSeconds(1))).isEqualTo(600);
    assertThat(StateSettings.tolerableFailures(Duration.ofMinutes(10))).isEqualTo(3);
    Configuration options = options();
    options.set(CheckpointingOptions.TOLERABLE_FAILURE_NUMBER, 0);
    assertThat(applied(options).getOptional(CheckpointingOptions.TOLERABLE_FAILURE_NUMBER)).isEmpty();
  }

  /** A job in a handover keeps its checkpoints when it fails for good, so that a deploy can resume it; as the user says otherwise. */
  @Test
  void aHandoverKeepsTheCheckpointsOfAFailedJob() {
    assertThat(applied(options()).getOptional(CheckpointingOptions.EXTERNALIZED_CHECKPOINT_RETENTION)).as("Flink's default").isEmpty();
    for (ConfigOption<?> role : List.of(GeofenceOptions.HANDOVER, GeofenceOptions.STANDBY, GeofenceOptions.RESUME_WRITER)) {
      Configuration options = options();
      options.setString(role.key(), role == GeofenceOptions.RESUME_WRITER ? "7e4cc054f46b8a64634119145b0b2efa" : "true");
      assertThat(applied(options).get(CheckpointingOptions.EXTERNALIZED_CHECKPOINT_RETENTION)).as(role.key())
          .isEqualTo(ExternalizedCheckpointRetention.DELETE_ON_CANCELLATION);
      options.set(CheckpointingOptions.EXTERNALIZED_CHECKPOINT_RETENTION, ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION);
      assertThat(applied(options).getOptional(CheckpointingOptions.EXTERNALIZED_CHECKPOINT_RETENTION)).as("the user's, left as it is")
          .isEmpty();
    }
  }

  @Test
  void withoutACheckpointDirectoryTheChangelogStaysOff() {
    Configuration options = options();
    options.removeConfig(CheckpointingOptions.CHECKPOINTS_DIRECTORY);
    options.set(StateRecoveryOptions.SAVEPOINT_PATH, "file:///sp");
    Configuration config = applied(options);
    assertThat(config.getOptional(StateChangelogOptions.ENABLE_STATE_CHANGE_LOG)).isEmpty();
    assertThat(config.getOptional(StateRecoveryOptions.RESTORE_MODE)).isEmpty();
  }

  @Test
  void whatTheUserSetIsKept() {
    Configuration options = options();
    options.set(GeofenceOptions.STATE_BACKEND, "hashmap");
    options.set(CheckpointingOptions.INCREMENTAL_CHECKPOINTS, true);
    options.set(ExecutionOptions.SNAPSHOT_COMPRESSION, false);
    options.set(StateChangelogOptions.STATE_CHANGE_LOG_STORAGE, "memory");
    options.setString("state.changelog.dstl.dfs.base-path", "s3://bucket/log");
    Configuration config = applied(options);
    assertThat(config.get(StateBackendOptions.STATE_BACKEND)).isEqualTo("hashmap");
    assertThat(config.getOptional(CheckpointingOptions.INCREMENTAL_CHECKPOINTS)).as("not overridden").isEmpty();
    assertThat(config.getOptional(ExecutionOptions.SNAPSHOT_COMPRESSION)).as("not overridden").isEmpty();
    assertThat(config.toMap()).as("no RocksDB to configure").doesNotContainKey("state.backend.rocksdb.block.blocksize")
        .doesNotContainKey("state.backend.rocksdb.compression.per.level");
    assertThat(config.getOptional(StateChangelogOptions.STATE_CHANGE_LOG_STORAGE)).isEmpty();
    assertThat(config.toMap()).doesNotContainKey("state.changelog.dstl.dfs.base-path");
  }

  @Test
  void aRocksDbBlockSizeOrCompressionTheUserSetIsKept() {
    Configuration options = options();
    options.setString("state.backend.rocksdb.block.blocksize", "4kb");
    options.setString("state.backend.rocksdb.compression.per.level", "LZ4_COMPRESSION");
    assertThat(applied(options).toMap()).doesNotContainKey("state.backend.rocksdb.block.blocksize")
        .doesNotContainKey("state.backend.rocksdb.compression.per.level");
  }

  @Test
  void aSavepointRestoredUnderTheChangelogDefaultsToLegacyClaimMode() {
    Configuration options = options();
    options.set(StateRecoveryOptions.SAVEPOINT_PATH, "file:///sp");
    assertThat(applied(options).get(StateRecoveryOptions.RESTORE_MODE)).isEqualTo(RestoreMode.LEGACY);
  }

  @ParameterizedTest
  @ValueSource(strings = {"CLAIM", "LEGACY"})
  void aClaimModeTheChangelogCanRestoreIsKept(String mode) {
    Configuration options = options();
    options.set(StateRecoveryOptions.SAVEPOINT_PATH, "file:///sp");
    options.set(StateRecoveryOptions.RESTORE_MODE, RestoreMode.valueOf(mode));
    assertThat(applied(options).getOptional(StateRecoveryOptions.RESTORE_MODE)).isEmpty();
  }

  @Test
  void noClaimUnderTheChangelogBecomesLegacy() {
    // What flink run -s passes when it is not told a claim mode.
    Configuration options = options();
    options.set(StateRecoveryOptions.SAVEPOINT_PATH, "file:///sp");
    options.set(StateRecoveryOptions.RESTORE_MODE, RestoreMode.NO_CLAIM);
    assertThat(applied(options).get(StateRecoveryOptions.RESTORE_MODE)).isEqualTo(RestoreMode.LEGACY);
  }

  @ParameterizedTest
  @ValueSource(strings = {"NO_CLAIM", "LEGACY", ""})
  void aRestoreThatWouldNeedTheSavepointForeverIsRefused(String mode) {
    Configuration options = options();
    options.set(StateRecoveryOptions.SAVEPOINT_PATH, "file:///sp");
    if (!mode.isEmpty()) {
      options.set(StateRecoveryOptions.RESTORE_MODE, RestoreMode.valueOf(mode));
    }
    options.set(StateChangelogOptions.PERIODIC_MATERIALIZATION_ENABLED, false);
    assertThatThrownBy(() -> applied(options)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageStartingWith("savepoint file:///sp would stay in use for as long as the job runs")
        .hasMessageContaining("state.changelog.periodic-materialize.enabled is false");
    // Handed to the job, or without the changelog, nothing refers to the savepoint for long.
    options.set(StateRecoveryOptions.RESTORE_MODE, RestoreMode.CLAIM);
    assertThat(applied(options).getOptional(StateRecoveryOptions.RESTORE_MODE)).isEmpty();
    options.set(StateRecoveryOptions.RESTORE_MODE, RestoreMode.NO_CLAIM);
    options.set(StateChangelogOptions.ENABLE_STATE_CHANGE_LOG, false);
    assertThat(applied(options).getOptional(StateRecoveryOptions.RESTORE_MODE)).isEmpty();
  }

  @Test
  void noClaimWithoutTheChangelogIsFlinksOwnDefault() {
    Configuration options = options();
    options.set(StateChangelogOptions.ENABLE_STATE_CHANGE_LOG, false);
    options.set(StateRecoveryOptions.SAVEPOINT_PATH, "file:///sp");
    options.set(StateRecoveryOptions.RESTORE_MODE, RestoreMode.NO_CLAIM);
    Configuration config = applied(options);
    assertThat(config.getOptional(StateChangelogOptions.ENABLE_STATE_CHANGE_LOG)).isEmpty();
    assertThat(config.getOptional(StateRecoveryOptions.RESTORE_MODE)).isEmpty();
  }

  /** Under java -jar: the job starts its cluster itself, from this configuration. */
  private static Configuration options() {
    Configuration options = new Configuration();
    options.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, CHECKPOINTS);
    options.set(DeploymentOptions.TARGET, "local");
    return options;
  }

  /** What the job adds to the configuration it hands Flink (the user's own keys go as they are). */
  private static Configuration applied(Configuration options) {
    Configuration config = new Configuration();
    StateSettings.apply(config, options);
    return config;
  }
}

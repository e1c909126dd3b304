package dev.geofence.savepoints;

import dev.geofence.connectors.cdc.FenceChange;
import dev.geofence.connectors.cdc.FenceTableColumns;
import dev.geofence.connectors.source.BucketRead;
import dev.geofence.connectors.source.ReplicationSlots;
import dev.geofence.job.operator.Uids;
import dev.geofence.job.operator.FenceKey;
import dev.geofence.state.geom.GeometryFormat;
import dev.geofence.state.geom.GeometryReadOptions;
import dev.geofence.state.snapshot.ArrowSnapshotFile;
import dev.geofence.state.snapshot.FenceSnapshot;
import dev.geofence.state.snapshot.SnapshotBucket;
import dev.geofence.state.snapshot.SnapshotFence;
import java.nio.file.Path;
import java.sql.Connection;
import java.util.ArrayList;
import java.util.List;
import org.apache.flink.api.common.RuntimeExecutionMode;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.runtime.state.hashmap.HashMapStateBackend;
import org.apache.flink.state.api.OperatorIdentifier;
import org.apache.flink.state.api.OperatorTransformation;
import org.apache.flink.state.api.SavepointWriter;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * Writes a savepoint the job restores from directly, from the source of truth instead of a first
 * read of the table by the job (issue 5, {@code bootstrap}): the job's replication slot is created
 * first (if it does not exist), then every fence, tombstone and bucket fingerprint is read in one
 * consistent read, and each key group's stream position is that read's LSN. The job restored from
 * it streams from the slot (its CDC source has no state, and always starts from the slot): what was
 * committed between the slot's creation and the read arrives again and is a duplicate, what came
 * after is caught up; the gap check applies as on any restore. The rows are held in memory while the savepoint is written.
 */
public final class SavepointBootstrap {

  /** What was written: the stream position every key group starts from, live fences and tombstones. */
  public record Result(long lsn, long fences, long tombstones) {}

  private SavepointBootstrap() {}

  public static Result write(Connection db, FenceTableColumns columns, String slot, String output, int maxParallelism,
      GeometryReadOptions geometryOptions, GeometryFormat geometryFormat, java.io.PrintStream progress)
      throws Exception {
    ReplicationSlots.createIfMissing(db, slot);
    List<BootstrapRow> rows = new ArrayList<>();
    Progress reading = new Progress(progress, "read the fence database, rows", -1);
    BucketRead.Result read = BucketRead.read(db, columns, 1, 0, 0, change -> {
      rows.add(new BootstrapRow(change));
      reading.tick();
    });
    reading.finish();
    writeRows(rows, read.lsn(), System.currentTimeMillis(), read.horizon(), output, maxParallelism, geometryOptions, geometryFormat);
    return new Result(read.lsn(), read.fences(), read.tombstones());
  }

  /**
   * Writes a savepoint from a snapshot file {@link SavepointExport} wrote: the same fences (with
   * their tenant, dwell delay and geometry as the job held them, and the objects inside them),
   * fingerprints and stream position, without reading the database. The job's slot must still hold
   * the position, as for the savepoint exported.
   */
  public static Result writeFromArrow(Path file, String output) throws Exception {
    FenceSnapshot snapshot = ArrowSnapshotFile.read(file);
    List<BootstrapRow> rows = new ArrayList<>();
    long tombstones = 0;
    for (SnapshotFence fence : snapshot.fences()) {
      rows.add(BootstrapRow.of(fence));
      BootstrapRow members = BootstrapRow.membersOf(fence);
      if (members != null) {
        rows.add(members);
      }
      tombstones += fence.deleted() ? 1 : 0;
    }
    for (SnapshotBucket bucket : snapshot.buckets()) {
      rows.add(BootstrapRow.of(bucket));
    }
    writeRows(rows, snapshot.lsn(), snapshot.commitTime(), snapshot.horizon(), output, snapshot.maxParallelism(),
        GeometryReadOptions.defaults(), GeometryFormat.WKB);
    return new Result(snapshot.lsn(), snapshot.fences().size() - tombstones, tombstones);
  }

  /**
   * Writes these rows as a savepoint of the fence index, with {@code lsn} and its transaction
   * {@code horizon} (0 for none) as every key group's stream position.
   */
  static void writeRows(List<BootstrapRow> rows, long lsn, long commitTime, long horizon, String output, int maxParallelism,
      GeometryReadOptions geometryOptions, GeometryFormat geometryFormat) throws Exception {
    FenceChange position = new FenceChange();
    position.lsn = lsn;
    position.commitTime = commitTime;
    // A position carries its horizon in seq, as a heartbeat of the stream does.
    position.seq = horizon;
    for (int keyGroup = 0; keyGroup < maxParallelism; keyGroup++) {
      rows.add(new BootstrapRow(position.copyForKeyGroup(keyGroup)));
    }
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
    env.setRuntimeMode(RuntimeExecutionMode.BATCH);
    SavepointWriter.newSavepoint(env, new HashMapStateBackend(), maxParallelism)
        .withOperator(OperatorIdentifier.forUid(Uids.FENCE_INDEX),
            OperatorTransformation.bootstrapWith(env.fromData(FenceStateBootstrapper.inSegments(rows, geometryOptions, geometryFormat)))
                .keyBy(BootstrapRow::key, TypeInformation.of(FenceKey.class))
                .transform(new FenceStateBootstrapper()))
        .write(output);
    env.execute("bootstrap " + output);
  }
}

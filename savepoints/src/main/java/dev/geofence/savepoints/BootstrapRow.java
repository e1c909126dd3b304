package dev.geofence.savepoints;

import dev.geofence.connectors.cdc.FenceChange;
import dev.geofence.state.geom.FenceGeometry;
import dev.geofence.state.snapshot.SnapshotBucket;
import dev.geofence.state.snapshot.SnapshotFence;

/**
 * One record a bootstrap writes into the fence index's state: a change as the operator would apply
 * it (a fence, a bucket fingerprint, a key group's stream position), and for a fence imported from
 * a snapshot file, its geometry as the job held it (flat arrays, as {@link FenceGeometry}'s) and the
 * objects inside it with since when. A Flink POJO.
 */
public class BootstrapRow {

  public FenceChange change;
  public double[] coordinates;
  public int[] ringStarts;
  public int[] polygonStarts;
  public String[] memberIds;
  public long[] memberSince;

  public BootstrapRow() {}

  BootstrapRow(FenceChange change) {
    this.change = change;
  }

  /** A fence of a snapshot file, as a snapshot read of it. */
  static BootstrapRow of(SnapshotFence fence) {
    FenceChange change = snapshotRead(FenceChange.Kind.FENCE);
    change.fenceId = fence.id();
    change.seq = fence.seq();
    change.delete = fence.deleted();
    change.tenant = fence.tenant();
    BootstrapRow row = new BootstrapRow(change);
    FenceGeometry geometry = fence.geometry();
    if (geometry != null) {
      row.coordinates = geometry.coordinates();
      row.ringStarts = geometry.ringStarts();
      row.polygonStarts = geometry.polygonStarts();
    }
    row.memberIds = fence.memberIds();
    row.memberSince = fence.memberSince();
    return row;
  }

  /** A bucket fingerprint of a snapshot file, as a snapshot read of it. */
  static BootstrapRow of(SnapshotBucket bucket) {
    FenceChange stats = snapshotRead(FenceChange.Kind.BUCKET_STATS);
    stats.bucket = bucket.bucket();
    stats.fenceCount = bucket.fenceCount();
    stats.checksum = bucket.checksum();
    stats.seq = bucket.version();
    return new BootstrapRow(stats);
  }

  private static FenceChange snapshotRead(FenceChange.Kind kind) {
    FenceChange change = new FenceChange();
    change.kind = kind;
    change.snapshot = true;
    return change;
  }
}

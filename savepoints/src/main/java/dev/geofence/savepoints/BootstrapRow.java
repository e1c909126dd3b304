package dev.geofence.savepoints;

import dev.geofence.connectors.cdc.FenceChange;
import dev.geofence.job.operator.FenceKey;
import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.geom.FenceGeometry;
import dev.geofence.state.snapshot.SnapshotBucket;
import dev.geofence.state.snapshot.SnapshotFence;
import dev.geofence.state.time.StayRules;

/**
 * One record a bootstrap writes into the fence index's state: a change as the operator would apply
 * it (a fence, a bucket fingerprint, a key group's stream position), for a fence imported from a
 * snapshot file its geometry as the job held it (flat arrays, as {@link FenceGeometry}'s), the
 * objects inside an imported fence with since when, or a bucket's fences as its segment (what
 * {@link FenceStateBootstrapper#inSegments} makes of the fence rows). A Flink POJO.
 */
public class BootstrapRow {

  public FenceChange change;
  /** For the objects inside a fence: the fence's id (and no change). */
  public String membersOf;
  public double[] coordinates;
  public int[] ringStarts;
  public int[] polygonStarts;
  public String[] memberIds;
  public long[] memberSince;
  /** For a bucket's fences: the bucket, and the fences as its segment's bytes (and no change). */
  public int bucket;
  public byte[] segment;

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
    change.dwellDelay = fence.dwellDelay() == StayRules.NO_FENCE_DELAY ? null : fence.dwellDelay();
    BootstrapRow row = new BootstrapRow(change);
    FenceGeometry geometry = fence.geometry();
    if (geometry != null) {
      row.coordinates = geometry.coordinates();
      row.ringStarts = geometry.ringStarts();
      row.polygonStarts = geometry.polygonStarts();
    }
    return row;
  }

  /** A bucket's fences as one segment. */
  static BootstrapRow segment(int bucket, byte[] segment) {
    BootstrapRow row = new BootstrapRow();
    row.bucket = bucket;
    row.segment = segment;
    return row;
  }

  /** The objects inside a fence of a snapshot file, or null if there are none. */
  static BootstrapRow membersOf(SnapshotFence fence) {
    if (fence.memberIds() == null || fence.memberIds().length == 0) {
      return null;
    }
    BootstrapRow row = new BootstrapRow();
    row.membersOf = fence.id();
    row.memberIds = fence.memberIds();
    row.memberSince = fence.memberSince();
    return row;
  }

  /**
   * The key the operator holds this row's state under: a bucket's segment, fingerprint and a key
   * group's position under the bucket's, the objects inside a fence under the fence's own key.
   */
  FenceKey key() {
    if (membersOf != null) {
      return new FenceKey(membersOf);
    }
    if (segment != null) {
      return FenceKey.ofBucket(bucket);
    }
    return change.kind == FenceChange.Kind.FENCE ? FenceKey.ofBucket(FenceBuckets.of(change.fenceId)) : FenceKey.of(change);
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

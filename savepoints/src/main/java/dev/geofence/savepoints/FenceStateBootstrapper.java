package dev.geofence.savepoints;

import dev.geofence.connectors.cdc.FenceChange;
import dev.geofence.job.operator.FenceIndexState;
import dev.geofence.job.operator.FenceKey;
import dev.geofence.state.ledger.StoredFence;
import dev.geofence.state.ledger.BucketFingerprint;
import dev.geofence.state.readiness.StreamPosition;
import dev.geofence.state.geom.BadGeometryException;
import dev.geofence.state.geom.FenceGeometry;
import dev.geofence.state.geom.FenceGeometryReader;
import dev.geofence.state.geom.GeometryFormat;
import dev.geofence.state.geom.GeometryReadOptions;
import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.time.StayRules;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.state.api.functions.KeyedStateBootstrapFunction;

/**
 * Writes the fence index's keyed state from the rows of a consistent read of the source, as the
 * operator itself would hold them after applying those rows as snapshot edits: each bucket's
 * fences as its segment ({@link #inSegments}: each fence with its tenant, dwell delay and decoded
 * geometry, neither geometry nor delay if it does not decode, as the job would have refused it;
 * each tombstone), each bucket's fingerprint with its version, each key group's stream position,
 * and (imported from a snapshot file) each fence's geometry as the job held it and the objects
 * inside it.
 */
final class FenceStateBootstrapper extends KeyedStateBootstrapFunction<FenceKey, BootstrapRow> {

  private static final long serialVersionUID = 1L;

  private transient ValueState<byte[]> segment;
  private transient MapState<String, Long> members;
  private transient ValueState<BucketFingerprint> fingerprint;
  private transient ValueState<StreamPosition> position;

  /**
   * The rows with their fences grouped into one segment row per bucket (the other rows as they
   * are): a segment is written whole, and a bootstrap function sees one row at a time. Of a fence
   * with a tombstone and a live row (re-created), the higher seq is the fence.
   */
  static List<BootstrapRow> inSegments(List<BootstrapRow> rows, GeometryReadOptions geometryOptions, GeometryFormat geometryFormat) {
    FenceGeometryReader reader = new FenceGeometryReader(geometryOptions);
    Map<Integer, Map<String, StoredFence>> buckets = new TreeMap<>();
    List<BootstrapRow> grouped = new ArrayList<>();
    for (BootstrapRow row : rows) {
      FenceChange change = row.change;
      if (row.segment != null || row.membersOf != null || change.kind != FenceChange.Kind.FENCE) {
        grouped.add(row);
        continue;
      }
      Map<String, StoredFence> bucket = buckets.computeIfAbsent(FenceBuckets.of(change.fenceId), b -> new HashMap<>());
      StoredFence stored = bucket.get(change.fenceId);
      if (stored == null || stored.seq() < change.seq) {
        bucket.put(change.fenceId, change.delete
            ? StoredFence.of(change.seq, true, null, null, StayRules.NO_FENCE_DELAY, change.commitTime)
            : live(row, reader, geometryFormat));
      }
    }
    buckets.forEach((bucket, fences) -> grouped.add(BootstrapRow.segment(bucket, StoredFence.segment(fences))));
    return grouped;
  }

  @Override
  public void open(OpenContext context) {
    segment = getRuntimeContext().getState(FenceIndexState.segmentStateDescriptor());
    members = getRuntimeContext().getMapState(FenceIndexState.membersStateDescriptor());
    fingerprint = getRuntimeContext().getState(FenceIndexState.fingerprintStateDescriptor());
    position = getRuntimeContext().getState(FenceIndexState.positionStateDescriptor());
  }

  @Override
  public void processElement(BootstrapRow row, Context context) throws Exception {
    if (row.membersOf != null) {
      for (int i = 0; i < row.memberIds.length; i++) {
        members.put(row.memberIds[i], row.memberSince[i]);
      }
      return;
    }
    if (row.segment != null) {
      segment.update(row.segment);
      return;
    }
    FenceChange change = row.change;
    switch (change.kind) {
      case BUCKET_STATS:
        fingerprint.update(FenceIndexState.fingerprintOf(change));
        return;
      case HEARTBEAT:
        position.update(FenceIndexState.positionOf(change));
        return;
      default:
        throw new IllegalArgumentException("a bootstrap writes segments, fingerprints and positions, not " + change.kind);
    }
  }

  /**
   * A live fence as the job holds it: with its tenant and own dwell delay, except that a fence
   * whose geometry does not decode has no delay either, as the job keeps none without a geometry.
   */
  private static StoredFence live(BootstrapRow row, FenceGeometryReader reader, GeometryFormat geometryFormat) {
    FenceChange change = row.change;
    FenceGeometry geometry = geometry(row, reader, geometryFormat);
    return StoredFence.of(change.seq, false, geometry, change.tenant, geometry == null ? StayRules.NO_FENCE_DELAY : change.ownDwellDelay(),
        change.commitTime);
  }

  /** An imported fence's geometry as the job held it, or a source row's geometry decoded as the job decodes it. */
  private static FenceGeometry geometry(BootstrapRow row, FenceGeometryReader reader, GeometryFormat geometryFormat) {
    if (row.coordinates != null) {
      return FenceGeometry.fromArrays(row.coordinates, row.ringStarts, row.polygonStarts);
    }
    FenceChange change = row.change;
    try {
      if (change.geometryBytes != null) {
        return reader.readWkb(change.geometryBytes).geometry();
      }
      return reader.readText(change.geometryText, geometryFormat).geometry();
    } catch (BadGeometryException e) {
      return null;
    }
  }
}

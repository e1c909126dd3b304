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
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.state.api.functions.KeyedStateBootstrapFunction;

/**
 * Writes the fence index's keyed state from the rows of a consistent read of the source, as the
 * operator itself would hold them after applying those rows as snapshot edits: each fence with its
 * decoded geometry (none if it does not decode: the job would have refused it), each tombstone,
 * each bucket's fingerprint with its version, each key group's stream position, and (imported from
 * a snapshot file) each fence's geometry as the job held it and the objects inside it.
 */
final class FenceStateBootstrapper extends KeyedStateBootstrapFunction<FenceKey, BootstrapRow> {

  private static final long serialVersionUID = 1L;

  private final GeometryReadOptions geometryOptions;
  private final GeometryFormat geometryFormat;
  private transient FenceGeometryReader reader;
  private transient MapState<String, StoredFence> fences;
  private transient MapState<String, Long> members;
  private transient ValueState<BucketFingerprint> fingerprint;
  private transient ValueState<StreamPosition> position;

  FenceStateBootstrapper(GeometryReadOptions geometryOptions, GeometryFormat geometryFormat) {
    this.geometryOptions = geometryOptions;
    this.geometryFormat = geometryFormat;
  }

  @Override
  public void open(OpenContext context) {
    reader = new FenceGeometryReader(geometryOptions);
    fences = getRuntimeContext().getMapState(FenceIndexState.fencesStateDescriptor());
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
    FenceChange change = row.change;
    switch (change.kind) {
      case FENCE: {
        StoredFence stored = fences.get(change.fenceId);
        // A re-created fence has a tombstone and a live row: the higher seq is the fence.
        if (stored != null && stored.seq() > change.seq) {
          return;
        }
        fences.put(change.fenceId, change.delete
            ? StoredFence.of(change.seq, true, null, null, change.commitTime)
            : StoredFence.of(change.seq, false, geometry(row), change.tenant, change.commitTime));
        return;
      }
      case BUCKET_STATS:
        fingerprint.update(FenceIndexState.fingerprintOf(change));
        return;
      case HEARTBEAT:
        position.update(FenceIndexState.positionOf(change));
        return;
      default:
        throw new IllegalArgumentException("a bootstrap writes fences, fingerprints and positions, not " + change.kind);
    }
  }

  /** An imported fence's geometry as the job held it, or a source row's geometry decoded as the job decodes it. */
  private FenceGeometry geometry(BootstrapRow row) {
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

package dev.geofence.savepoints;

import dev.geofence.connectors.cdc.FenceChange;
import dev.geofence.job.operator.FenceIndexState;
import dev.geofence.job.operator.FenceKey;
import dev.geofence.state.ledger.StoredFence;
import dev.geofence.state.ledger.BucketFingerprint;
import dev.geofence.state.readiness.StreamPosition;
import dev.geofence.state.segment.FenceSegment;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.state.api.functions.KeyedStateReaderFunction;
import org.apache.flink.util.Collector;

/**
 * Reads the fence index operator's keyed state with the job's own descriptors and serializers, one
 * {@link FenceStateEntry} per state a key holds: for a bucket, one per fence in force (its
 * segment's, unless its overlay holds a newer version).
 */
final class FenceStateReader extends KeyedStateReaderFunction<FenceKey, FenceStateEntry> {

  private static final long serialVersionUID = 1L;

  private final int maxParallelism;
  private final boolean withGeometry;
  private transient MapState<String, StoredFence> fences;
  private transient ValueState<byte[]> segment;
  /** Fences as releases before the per-bucket maps kept them, one per fence key. */
  private transient ValueState<StoredFence> fence;
  private transient MapState<String, Long> members;
  private transient ValueState<BucketFingerprint> fingerprint;
  private transient ValueState<StreamPosition> position;
  /** Fingerprints and positions as releases before their own state types kept them. */
  private transient ValueState<FenceChange> legacyBucketStats;
  private transient ValueState<FenceChange> legacyStreamPosition;

  /** @param withGeometry also emit each fence's geometry, tenant and dwell delay (for an export) */
  FenceStateReader(int maxParallelism, boolean withGeometry) {
    this.maxParallelism = maxParallelism;
    this.withGeometry = withGeometry;
  }

  // The 1.20.0 State Processor API has only this form of open.
  @SuppressWarnings("deprecation")
  @Override
  public void open(Configuration parameters) {
    fences = getRuntimeContext().getMapState(FenceIndexState.fencesStateDescriptor());
    segment = getRuntimeContext().getState(FenceIndexState.segmentStateDescriptor());
    fence = getRuntimeContext().getState(FenceIndexState.fenceStateDescriptor());
    members = getRuntimeContext().getMapState(FenceIndexState.membersStateDescriptor());
    fingerprint = getRuntimeContext().getState(FenceIndexState.fingerprintStateDescriptor());
    position = getRuntimeContext().getState(FenceIndexState.positionStateDescriptor());
    legacyBucketStats = getRuntimeContext().getState(FenceIndexState.legacyBucketStatsStateDescriptor());
    legacyStreamPosition = getRuntimeContext().getState(FenceIndexState.legacyStreamPositionStateDescriptor());
  }

  @Override
  public void readKey(FenceKey key, Context context, Collector<FenceStateEntry> out) throws Exception {
    int keyGroup = KeyGroupRangeAssignment.assignToKeyGroup(key, maxParallelism);
    Map<String, StoredFence> overlay = new LinkedHashMap<>();
    for (Map.Entry<String, StoredFence> stored : fences.entries()) {
      overlay.put(stored.getKey(), stored.getValue());
    }
    byte[] bytes = segment.value();
    if (bytes != null) {
      FenceStateEntry held = entry(FenceStateEntry.Kind.SEGMENT, Integer.toString(key.bucket()), keyGroup);
      FenceSegment read = null;
      try {
        read = FenceSegment.read(bytes);
        held.fenceCount = read.size();
      } catch (IllegalArgumentException unreadable) {
        held.unreadable = true;
      }
      out.collect(held);
      for (int i = 0; read != null && i < read.size(); i++) {
        if (!overlay.containsKey(read.id(i))) {
          FenceStateEntry entry = withGeometry ? fence(read.id(i), StoredFence.of(read, i), keyGroup) : counted(read, i, keyGroup);
          entry.inSegment = true;
          out.collect(entry);
        }
      }
    }
    overlay.forEach((id, stored) -> out.collect(fence(id, stored, keyGroup)));
    StoredFence legacy = fence.value();
    if (legacy != null) {
      out.collect(fence(key.id, legacy, keyGroup));
    }
    List<String> ids = new ArrayList<>();
    List<Long> since = new ArrayList<>();
    for (Map.Entry<String, Long> member : members.entries()) {
      ids.add(member.getKey());
      since.add(member.getValue());
    }
    if (!ids.isEmpty()) {
      FenceStateEntry entry = entry(FenceStateEntry.Kind.MEMBERS, key.id, keyGroup);
      entry.members = ids.size();
      if (withGeometry) {
        entry.memberIds = ids.toArray(new String[0]);
        entry.memberSince = since.stream().mapToLong(Long::longValue).toArray();
      }
      out.collect(entry);
    }
    FenceChange legacyStats = legacyBucketStats.value();
    BucketFingerprint stats = legacyStats != null ? FenceIndexState.fingerprintOf(legacyStats) : fingerprint.value();
    if (stats != null) {
      FenceStateEntry entry = entry(FenceStateEntry.Kind.BUCKET_STATS, Integer.toString(stats.bucket()), keyGroup);
      entry.seq = stats.version();
      entry.fenceCount = stats.fenceCount();
      entry.checksum = stats.checksum();
      entry.lsn = stats.lsn();
      entry.commitTime = stats.commitTime();
      out.collect(entry);
    }
    FenceChange legacyPosition = legacyStreamPosition.value();
    StreamPosition position = legacyPosition != null ? FenceIndexState.positionOf(legacyPosition) : this.position.value();
    if (position != null) {
      FenceStateEntry entry = entry(FenceStateEntry.Kind.STREAM_POSITION, Integer.toString(keyGroup), keyGroup);
      entry.lsn = position.lsn();
      entry.commitTime = position.commitTime();
      entry.horizon = position.horizon();
      out.collect(entry);
    }
  }

  private FenceStateEntry fence(String id, StoredFence stored, int keyGroup) {
    FenceStateEntry entry = entry(FenceStateEntry.Kind.FENCE, id, keyGroup);
    entry.unreadable = stored.unreadable();
    entry.seq = stored.seq();
    entry.live = !stored.unreadable() && !stored.deleted();
    entry.vertices = stored.geometry() == null ? 0 : stored.geometry().coordinates().length / 2;
    entry.lsn = stored.commitLsn();
    entry.commitTime = stored.commitTime();
    if (withGeometry) {
      entry.tenant = stored.tenant();
      entry.dwellDelay = stored.dwellDelay();
      if (stored.geometry() != null) {
        entry.coordinates = stored.geometry().coordinates();
        entry.ringStarts = stored.geometry().ringStarts();
        entry.polygonStarts = stored.geometry().polygonStarts();
      }
    }
    return entry;
  }

  /** Fence {@code i} of a segment without its geometry, its vertices counted in place: what a count needs. */
  private static FenceStateEntry counted(FenceSegment segment, int i, int keyGroup) {
    FenceStateEntry entry = entry(FenceStateEntry.Kind.FENCE, segment.id(i), keyGroup);
    entry.seq = segment.seq(i);
    entry.live = !segment.deleted(i);
    entry.vertices = segment.vertexCount(i);
    entry.lsn = segment.commitLsn(i);
    entry.commitTime = segment.commitTime(i);
    return entry;
  }

  private static FenceStateEntry entry(FenceStateEntry.Kind kind, String id, int keyGroup) {
    FenceStateEntry entry = new FenceStateEntry();
    entry.kind = kind;
    entry.id = id;
    entry.keyGroup = keyGroup;
    return entry;
  }
}

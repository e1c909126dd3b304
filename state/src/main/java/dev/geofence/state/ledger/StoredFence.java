package dev.geofence.state.ledger;

import dev.geofence.state.edit.EditKind;
import dev.geofence.state.edit.EditOrigin;
import dev.geofence.state.edit.FenceEdit;
import dev.geofence.state.geom.FenceGeometry;
import dev.geofence.state.segment.FenceSegment;
import dev.geofence.state.time.StayRules;
import java.util.Map;

/**
 * A fence's durable state, which the {@link LedgerStore} keeps: its stored version (live or
 * tombstone), the geometry in force (null for a tombstone, or for a fence whose only versions were
 * refused), its tenant and dwell delay, and where in the source's history it was last changed. The in-memory
 * ledger is rebuilt from these on every restore. Also a superseded version of the history.
 * Serialized by the job's state layout, which versions its format.
 *
 * @param seq the stored version: of the live fence, or of its delete
 * @param deleted a tombstone: the fence's last edit was a delete
 * @param geometry the geometry in force, or null (a tombstone, or only refused versions so far)
 * @param dwellDelay the fence's own dwell delay, milliseconds, or {@link StayRules#NO_FENCE_DELAY}
 * @param commitLsn the LSN of the edit stored; 0 for a read of the source
 * @param commitTime the commit time of the edit stored; 0 for a read of the source
 */
public record StoredFence(long seq, boolean deleted, FenceGeometry geometry, String tenant, long dwellDelay, long commitLsn,
    long commitTime) {

  /**
   * A value of a format this release cannot read (the layout reads no other): the restored
   * fences cannot be used, and the index is rebuilt from the source. Told apart by identity.
   */
  public static final StoredFence UNREADABLE = new StoredFence(0, true, null, null, StayRules.NO_FENCE_DELAY, 0, 0);

  /** A fence as a bootstrap writes it: live with its geometry (null if refused), or a tombstone. */
  public static StoredFence of(long seq, boolean deleted, FenceGeometry geometry, String tenant, long dwellDelay, long commitTime) {
    return new StoredFence(seq, deleted, geometry, tenant, dwellDelay, 0, commitTime);
  }

  /** Fence {@code i} of a segment, as an object graph of its own. */
  public static StoredFence of(FenceSegment segment, int i) {
    return new StoredFence(segment.seq(i), segment.deleted(i), segment.geometry(i), segment.tenant(i), segment.dwellDelay(i), segment.commitLsn(i),
        segment.commitTime(i));
  }

  /** These fences of one bucket (live, tombstones, refused) as one segment's bytes. */
  public static byte[] segment(Map<String, StoredFence> fences) {
    return segment(fences, new FenceSegment.Writer());
  }

  /** As {@link #segment(Map)}, the grids left for the reader to build. */
  public static byte[] segmentWithUnbuiltGrids(Map<String, StoredFence> fences) {
    return segment(fences, new FenceSegment.Writer().unbuiltGrids());
  }

  private static byte[] segment(Map<String, StoredFence> fences, FenceSegment.Writer writer) {
    fences.forEach((id, f) -> writer.add(id, f.seq(), f.deleted(), f.geometry(), f.tenant(), f.dwellDelay(), f.commitLsn(), f.commitTime()));
    return writer.write();
  }

  /** Of a format this release cannot read: a restore rebuilds the index without it. */
  public boolean unreadable() {
    return this == UNREADABLE;
  }

  /** The version an edit makes the fence's: a tombstone for a delete, no geometry for a refused upsert. */
  public static StoredFence of(FenceEdit edit) {
    return new StoredFence(edit.seq(), edit.kind() == EditKind.DELETE, edit.geometry(), edit.tenant(), edit.dwellDelay(), edit.commitLsn(),
        edit.commitTimeMillis());
  }

  /** The edit that, applied to an empty fence set, restores this version. */
  public FenceEdit asSnapshotEdit(String fenceId) {
    return asEdit(fenceId, EditOrigin.SNAPSHOT);
  }

  /** The edit that makes this version the fence's, from {@code origin}. */
  public FenceEdit asEdit(String fenceId, EditOrigin origin) {
    if (deleted) {
      return FenceEdit.delete(fenceId, seq, origin, commitLsn, commitTime);
    }
    if (geometry == null) {
      return FenceEdit.refusedUpsert(fenceId, seq, tenant, origin, commitLsn, commitTime);
    }
    return FenceEdit.upsert(fenceId, seq, geometry, tenant, dwellDelay, origin, commitLsn, commitTime);
  }

  @Override
  public String toString() {
    return "StoredFence{seq=" + seq + (deleted ? ", deleted" : "") + ", " + geometry + "}";
  }
}

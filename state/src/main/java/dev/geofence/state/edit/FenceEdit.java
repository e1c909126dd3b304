package dev.geofence.state.edit;

import dev.geofence.state.geom.FenceGeometry;
import dev.geofence.state.time.StayRules;
import java.util.Objects;

/**
 * One change to one fence, as the source of truth committed it: the fence's id and its new seq
 * (contiguous per fence, kept by the source's trigger), what was done, the geometry, tenant and
 * dwell delay for an upsert, and where in the source's history it was committed.
 *
 * <p>Immutable. {@code commitLsn} is 0 for snapshot reads, which carry no LSN of their own.
 */
public final class FenceEdit {

  private final String fenceId;
  private final long seq;
  private final EditKind kind;
  private final FenceGeometry geometry;
  private final String tenant;
  private final long dwellDelay;
  private final EditOrigin origin;
  private final long commitLsn;
  private final long commitTimeMillis;

  private FenceEdit(
      String fenceId,
      long seq,
      EditKind kind,
      FenceGeometry geometry,
      String tenant,
      long dwellDelay,
      EditOrigin origin,
      long commitLsn,
      long commitTimeMillis) {
    this.fenceId = Objects.requireNonNull(fenceId, "fence id");
    if (seq < 1) {
      throw new IllegalArgumentException("fence " + fenceId + ": seq must be >= 1, got " + seq);
    }
    if ((kind == EditKind.UPSERT) != (geometry != null)) {
      throw new IllegalArgumentException(
          "fence " + fenceId + ": an upsert, and only an upsert, carries a geometry");
    }
    this.seq = seq;
    this.kind = Objects.requireNonNull(kind, "kind");
    this.geometry = geometry;
    this.tenant = tenant;
    if (!StayRules.isFenceDelay(dwellDelay)) {
      throw new IllegalArgumentException("fence " + fenceId + ": dwell delay must be >= 0 or NO_FENCE_DELAY, got " + dwellDelay);
    }
    this.dwellDelay = dwellDelay;
    this.origin = Objects.requireNonNull(origin, "origin");
    this.commitLsn = commitLsn;
    this.commitTimeMillis = commitTimeMillis;
  }

  /** An upsert; {@code dwellDelay} in milliseconds, or {@link StayRules#NO_FENCE_DELAY}. */
  public static FenceEdit upsert(String fenceId, long seq, FenceGeometry geometry, String tenant, long dwellDelay, EditOrigin origin,
      long commitLsn, long commitTimeMillis) {
    return new FenceEdit(fenceId, seq, EditKind.UPSERT, Objects.requireNonNull(geometry, "geometry"), tenant, dwellDelay, origin,
        commitLsn, commitTimeMillis);
  }

  public static FenceEdit delete(String fenceId, long seq, EditOrigin origin, long commitLsn, long commitTimeMillis) {
    return new FenceEdit(fenceId, seq, EditKind.DELETE, null, null, StayRules.NO_FENCE_DELAY, origin, commitLsn, commitTimeMillis);
  }

  /** An upsert that leaves the geometry in force as it was; see {@link EditKind#UPSERT_KEEPING_GEOMETRY}. */
  public static FenceEdit upsertKeepingGeometry(String fenceId, long seq, String tenant, long dwellDelay, EditOrigin origin,
      long commitLsn, long commitTimeMillis) {
    return new FenceEdit(fenceId, seq, EditKind.UPSERT_KEEPING_GEOMETRY, null, tenant, dwellDelay, origin, commitLsn,
        commitTimeMillis);
  }

  /** An upsert whose geometry was refused; see {@link EditKind#REFUSED_UPSERT}. */
  public static FenceEdit refusedUpsert(
      String fenceId, long seq, String tenant, EditOrigin origin, long commitLsn, long commitTimeMillis) {
    return new FenceEdit(fenceId, seq, EditKind.REFUSED_UPSERT, null, tenant, StayRules.NO_FENCE_DELAY, origin, commitLsn,
        commitTimeMillis);
  }

  public String fenceId() {
    return fenceId;
  }

  public long seq() {
    return seq;
  }

  public EditKind kind() {
    return kind;
  }

  /** The new geometry of an upsert; null otherwise. */
  public FenceGeometry geometry() {
    return geometry;
  }

  /** The fence's tenant, or null when tenants are not used. */
  public String tenant() {
    return tenant;
  }

  /** Whether the edit sets the fence's tenant and dwell delay: an upsert, keeping its geometry or not. */
  public boolean isUpsert() {
    return kind == EditKind.UPSERT || kind == EditKind.UPSERT_KEEPING_GEOMETRY;
  }

  /** The fence's own dwell delay, milliseconds, or {@link StayRules#NO_FENCE_DELAY}; of an upsert. */
  public long dwellDelay() {
    return dwellDelay;
  }

  public EditOrigin origin() {
    return origin;
  }

  public long commitLsn() {
    return commitLsn;
  }

  public long commitTimeMillis() {
    return commitTimeMillis;
  }

  @Override
  public boolean equals(Object o) {
    if (this == o) {
      return true;
    }
    if (!(o instanceof FenceEdit)) {
      return false;
    }
    FenceEdit that = (FenceEdit) o;
    return seq == that.seq
        && commitLsn == that.commitLsn
        && commitTimeMillis == that.commitTimeMillis
        && fenceId.equals(that.fenceId)
        && kind == that.kind
        && Objects.equals(geometry, that.geometry)
        && Objects.equals(tenant, that.tenant)
        && dwellDelay == that.dwellDelay
        && origin == that.origin;
  }

  @Override
  public int hashCode() {
    return Objects.hash(fenceId, seq, kind, origin, commitLsn);
  }

  @Override
  public String toString() {
    return "FenceEdit{" + fenceId + "@" + seq + " " + kind + " " + origin + " lsn=" + commitLsn + "}";
  }
}

package dev.geofence.state.snapshot;

import dev.geofence.state.geom.FenceGeometry;
import java.util.Objects;

/**
 * One fence of a snapshot file, as the job holds it: live or a tombstone, its seq, tenant and
 * geometry (null for a tombstone, or for a fence whose every version was refused), and the objects
 * inside it with the time each entered, so that a job restored from the file goes on without new
 * ENTERs. The arrays are the caller's: not copied.
 */
public record SnapshotFence(
    String id, long seq, boolean deleted, String tenant, FenceGeometry geometry, String[] memberIds, long[] memberSince) {

  public SnapshotFence {
    Objects.requireNonNull(id, "fence id");
    if (memberIds.length != memberSince.length) {
      throw new IllegalArgumentException("fence " + id + ": " + memberIds.length + " members but " + memberSince.length + " entry times");
    }
  }
}

package dev.geofence.state.snapshot;

import dev.geofence.state.geom.FenceGeometry;
import dev.geofence.state.time.StayRules;
import java.util.Objects;

/**
 * One fence of a snapshot file, as the job holds it: live or a tombstone, its seq, tenant, dwell
 * delay and geometry (null for a tombstone, or for a fence whose every version was refused), and
 * the objects inside it with the time each entered, so that a job restored from the file goes on
 * without new ENTERs. The arrays are the caller's: not copied.
 *
 * @param dwellDelay the fence's own dwell delay, milliseconds (0: it never DWELLs), or {@link
 *     StayRules#NO_FENCE_DELAY}
 */
public record SnapshotFence(String id, long seq, boolean deleted, String tenant, long dwellDelay, FenceGeometry geometry,
    String[] memberIds, long[] memberSince) {

  public SnapshotFence {
    Objects.requireNonNull(id, "fence id");
    if (!StayRules.isFenceDelay(dwellDelay)) {
      throw new IllegalArgumentException("fence " + id + " has a dwell delay of " + dwellDelay + " ms");
    }
    if (memberIds.length != memberSince.length) {
      throw new IllegalArgumentException("fence " + id + ": " + memberIds.length + " members but " + memberSince.length + " entry times");
    }
  }
}

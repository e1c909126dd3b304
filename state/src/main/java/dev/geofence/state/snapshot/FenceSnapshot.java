package dev.geofence.state.snapshot;

import java.util.List;

/**
 * What a snapshot file holds: the fences, every bucket fingerprint, the stream position (LSN, its
 * commit time and its transaction horizon, 0 for none) they are as of, and the max parallelism the
 * state was keyed with. All a bootstrap needs to write a savepoint the job restores from, without
 * reading the database.
 */
public record FenceSnapshot(long lsn, long commitTime, long horizon, int maxParallelism, List<SnapshotBucket> buckets,
    List<SnapshotFence> fences) {

  public FenceSnapshot {
    buckets = List.copyOf(buckets);
    fences = List.copyOf(fences);
  }
}

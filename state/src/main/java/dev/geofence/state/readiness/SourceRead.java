package dev.geofence.state.readiness;

import dev.geofence.state.checksum.FenceBuckets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * One read of a subtask's buckets from the source of truth, under way: a fresh start's load or a
 * rebuild (all of them), or a re-read of some buckets. Its rows are merged by seq with whatever the
 * stream delivers meanwhile, so what the read did not find may still have come by the stream; what
 * came by neither, the source has no row of at all ({@link #gone}). Not thread-safe.
 */
public final class SourceRead {

  /** The buckets read, sorted, or null for all of the subtask's. */
  private final int[] buckets;
  private final Set<String> read = new HashSet<>();
  private final Set<String> streamed = new HashSet<>();

  private SourceRead(int[] buckets) {
    this.buckets = buckets;
  }

  /** A read of all of the subtask's buckets: a load or a rebuild. */
  public static SourceRead ofAllBuckets() {
    return new SourceRead(null);
  }

  /** A re-read of these buckets alone. */
  public static SourceRead ofBuckets(int... buckets) {
    if (buckets.length == 0) {
      throw new IllegalArgumentException("a re-read reads at least one bucket");
    }
    int[] sorted = buckets.clone();
    Arrays.sort(sorted);
    return new SourceRead(sorted);
  }

  /** Whether it reads all of the subtask's buckets (else some, {@link #buckets}). */
  public boolean ofAll() {
    return buckets == null;
  }

  /** The buckets a re-read reads, sorted; empty for a read of all. */
  public int[] buckets() {
    return buckets == null ? new int[0] : buckets.clone();
  }

  /** The read found this fence (a row or a tombstone). */
  public void read(String fenceId) {
    read.add(fenceId);
  }

  /** The stream delivered an edit of this fence while the read was under way. */
  public void streamed(String fenceId) {
    streamed.add(fenceId);
  }

  /**
   * Of the fences held live, those in the read's buckets that the read did not find and the stream
   * did not bring meanwhile, in {@code live}'s order: the source has no row of them at all.
   */
  public List<String> gone(Iterable<String> live) {
    List<String> gone = new ArrayList<>();
    for (String id : live) {
      if (covers(id) && !read.contains(id) && !streamed.contains(id)) {
        gone.add(id);
      }
    }
    return gone;
  }

  private boolean covers(String fenceId) {
    return buckets == null || Arrays.binarySearch(buckets, FenceBuckets.of(fenceId)) >= 0;
  }
}

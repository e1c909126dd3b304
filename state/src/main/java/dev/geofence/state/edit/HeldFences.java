package dev.geofence.state.edit;

import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.segment.FenceSegment;
import java.util.HashMap;
import java.util.Map;
import java.util.function.BiConsumer;
import java.util.function.IntFunction;

/**
 * The live fences a {@link FenceSet} held at one moment, with their seqs, for a catch-up's read of
 * what changed on a thread of its own while the set goes on applying what the read brings
 * (docs/design.md#catch-up). Taken without a copy per fence: the buckets' segments are immutable
 * and shared, and only the versions stored since they were loaded are copied. A copy per fence
 * decoded and boxed every id and seq of the subtask (600,000 at the benchmarks' size) on the task
 * thread before each read, to be looked up for a few thousand of them.
 *
 * <p>Immutable, so safe to read on the thread it is handed to.
 */
public final class HeldFences {

  /** Stored seqs edited since the segments were loaded, negated for a tombstone, as {@link FenceSet} keeps them. */
  private final Map<String, Long> versions;
  /** The segments by bucket; null where a bucket has none. */
  private final FenceSegment[] segments;
  /** A bucket's segment, or null if no bucket has one. */
  private final IntFunction<FenceSegment> segmentOf;

  private HeldFences(Map<String, Long> versions, FenceSegment[] segments) {
    this.versions = versions;
    this.segments = segments;
    this.segmentOf = segments.length == 0 ? null : bucket -> segments[bucket];
  }

  /** What {@code versions} and {@code segments} hold now (each copied: the caller goes on changing them). */
  static HeldFences of(Map<String, Long> versions, Map<Integer, FenceSegment> segments) {
    FenceSegment[] byBucket = new FenceSegment[segments.isEmpty() ? 0 : FenceBuckets.COUNT];
    segments.forEach((bucket, segment) -> byBucket[bucket] = segment);
    return new HeldFences(new HashMap<>(versions), byBucket);
  }

  /** These live fences and their seqs. */
  public static HeldFences ofLive(Map<String, Long> live) {
    return new HeldFences(new HashMap<>(live), new FenceSegment[0]);
  }

  /** The seq of the live fence held under {@code id}, or 0 if none is (never seen, or deleted). */
  public long seqOf(String id) {
    Long stored = stored(versions, segmentOf, id);
    return stored == null || stored < 0 ? 0 : stored;
  }

  /**
   * The stored seq of {@code id} in {@code versions}, else in the segment of its bucket ({@code
   * segmentOf}: null if no bucket has one), negated for a tombstone; null for a fence never seen.
   */
  static Long stored(Map<String, Long> versions, IntFunction<FenceSegment> segmentOf, String id) {
    Long stored = versions.get(id);
    if (stored != null || segmentOf == null) {
      return stored;
    }
    FenceSegment segment = segmentOf.apply(FenceBuckets.of(id));
    int i = segment == null ? -1 : segment.positionOf(id);
    return i < 0 ? null : segment.deleted(i) ? -segment.seq(i) : segment.seq(i);
  }

  /** Each live fence and its seq. */
  public void forEachLive(BiConsumer<String, Long> live) {
    forEachLive(versions, segments, live);
  }

  /** The live fences of {@code versions} over {@code segments} (null entries skipped), as {@link FenceSet} stores them. */
  static void forEachLive(Map<String, Long> versions, FenceSegment[] segments, BiConsumer<String, Long> live) {
    versions.forEach((id, stored) -> {
      if (stored > 0) {
        live.accept(id, stored);
      }
    });
    for (FenceSegment segment : segments) {
      if (segment == null) {
        continue;
      }
      for (int i = 0; i < segment.size(); i++) {
        if (!segment.deleted(i)) {
          String id = segment.id(i);
          if (!versions.containsKey(id)) {
            live.accept(id, segment.seq(i));
          }
        }
      }
    }
  }
}

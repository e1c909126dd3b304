package dev.geofence.savepoints;

import dev.geofence.state.time.StayRules;

/**
 * One entry of the fence index's keyed state, as a savepoint holds it: a fence (live, a tombstone,
 * or of a format this release cannot read; from its bucket's segment or its overlay), a bucket's
 * segment (how many fences it holds, or that it cannot be read), the objects inside a fence, a
 * bucket's fingerprint, or a key group's stream position. A Flink POJO.
 */
public class FenceStateEntry {

  /** What the key holds. */
  public enum Kind { FENCE, SEGMENT, MEMBERS, BUCKET_STATS, STREAM_POSITION }

  public Kind kind;
  /** The fence id; for bucket stats and stream positions, the bucket or key group. */
  public String id;
  public int keyGroup;
  public long seq;
  public boolean live;
  public boolean unreadable;
  /** For a fence: whether its version in force is its bucket's segment's (not the overlay's). */
  public boolean inSegment;
  public long vertices;
  public long lsn;
  public long commitTime;
  /** For a stream position: its transaction horizon (0: none). */
  public long horizon;
  /**
   * For a fence read with its geometry (export): its tenant, its own dwell delay ({@code
   * StayRules.NO_FENCE_DELAY}: none) and the flat arrays of {@code FenceGeometry}.
   */
  public String tenant;
  public long dwellDelay = StayRules.NO_FENCE_DELAY;
  public double[] coordinates;
  public int[] ringStarts;
  public int[] polygonStarts;
  /** For members: how many objects are inside the fence; read with geometry, which and since when. */
  public long members;
  public String[] memberIds;
  public long[] memberSince;
  /** For bucket stats: the source's count and checksum of the bucket; for a segment, the fences it holds. */
  public long fenceCount;
  public long checksum;

  public FenceStateEntry() {}
}

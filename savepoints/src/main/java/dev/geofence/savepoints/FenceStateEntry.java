package dev.geofence.savepoints;

/**
 * One entry of the fence index's keyed state, as a savepoint holds it: a fence (live, a tombstone,
 * or of a format this release cannot read), the objects inside a fence, a bucket's fingerprint, or
 * a key group's stream position. A Flink POJO.
 */
public class FenceStateEntry {

  /** What the key holds. */
  public enum Kind { FENCE, MEMBERS, BUCKET_STATS, STREAM_POSITION }

  public Kind kind;
  /** The fence id; for bucket stats and stream positions, the bucket or key group. */
  public String id;
  public int keyGroup;
  public long seq;
  public boolean live;
  public boolean unreadable;
  public long vertices;
  public long lsn;
  public long commitTime;
  /** For a fence read with its geometry (export): the flat arrays of {@code FenceGeometry}. */
  public String tenant;
  public double[] coordinates;
  public int[] ringStarts;
  public int[] polygonStarts;
  /** For members: how many objects are inside the fence; read with geometry, which and since when. */
  public long members;
  public String[] memberIds;
  public long[] memberSince;
  /** For bucket stats: the source's count and checksum of the bucket. */
  public long fenceCount;
  public long checksum;

  public FenceStateEntry() {}
}

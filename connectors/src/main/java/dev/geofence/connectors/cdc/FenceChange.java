package dev.geofence.connectors.cdc;

import dev.geofence.state.time.StayRules;

/**
 * One record of the fence change stream, as the CDC source's deserializer reads it: a fence edit
 * with its geometry still encoded (decoding is left to the keyed operator, which runs in parallel),
 * a bucket's new fingerprint, or a heartbeat that only advances the stream's time. A Flink POJO.
 */
public class FenceChange {

  /** What a change record carries. */
  public enum Kind {
    /** An insert, update or delete of a fence (or its snapshot read). */
    FENCE,
    /** One {@code fence_bucket_stats} row: the fingerprint of one bucket of fences. */
    BUCKET_STATS,
    /** Progress only: the stream has reached {@link #commitTime}. */
    HEARTBEAT
  }

  public Kind kind;
  public String fenceId;
  /**
   * The edit's seq; for a delete, the old row's seq + 1 (the migration's tombstone version); for a
   * heartbeat, its transaction horizon (0 if the heartbeat table has none).
   */
  public long seq;
  public boolean delete;
  /** EWKB/WKB bytes (PostGIS geometry or bytea column), or null when the column is text. */
  public byte[] geometryBytes;
  /** WKT/EWKT or GeoJSON text, or null when the column is binary. */
  public String geometryText;
  /**
   * An update that left the geometry as it was, which the stream does not carry when PostgreSQL
   * keeps it out of line: no geometry bytes or text, and the one in force stays.
   */
  public boolean geometryUnchanged;
  public String tenant;
  /**
   * The fence's own dwell delay in milliseconds (0: it never DWELLs), or null when it has none and
   * the job's holds: the column is null, or the table has none.
   */
  public Long dwellDelay;
  /** For {@link Kind#BUCKET_STATS}: the bucket; for a heartbeat's copy, the key group it is for. */
  public int bucket;
  /** For {@link Kind#BUCKET_STATS}: the bucket's live fence count and checksum. */
  public long fenceCount;
  public long checksum;
  /** The change's LSN; 0 for snapshot reads, which have none. */
  public long lsn;
  /** Commit time at the source, epoch millis; 0 for snapshot reads. */
  public long commitTime;
  /** Read by the initial snapshot rather than from the replication stream. */
  public boolean snapshot;

  public FenceChange() {}

  static FenceChange heartbeat(long commitTime, long lsn, long horizon) {
    FenceChange change = new FenceChange();
    change.kind = Kind.HEARTBEAT;
    change.commitTime = commitTime;
    change.lsn = lsn;
    change.seq = horizon;
    return change;
  }

  /**
   * The fence's own dwell delay as the fence state keeps it: milliseconds, {@link
   * StayRules#NO_FENCE_DELAY} for none, and 0 for a negative one (the fence never DWELLs).
   */
  public long ownDwellDelay() {
    return dwellDelay == null ? StayRules.NO_FENCE_DELAY : Math.max(0, dwellDelay);
  }

  /**
   * The dwell delay of an interval of {@code micros} microseconds, as Debezium delivers one ({@code
   * io.debezium.time.MicroDuration}), in whole milliseconds: the change stream and the reads of the
   * table convert it here, so that the two agree.
   */
  public static long dwellDelayOfMicros(long micros) {
    return micros / 1000;
  }

  /** A heartbeat's copy for key group {@code keyGroup}, carried in {@link #bucket}. */
  public FenceChange copyForKeyGroup(int keyGroup) {
    FenceChange copy = heartbeat(commitTime, lsn, seq);
    copy.bucket = keyGroup;
    return copy;
  }

  @Override
  public String toString() {
    switch (kind) {
      case BUCKET_STATS:
        return "BUCKET_STATS{bucket=" + bucket + ", count=" + fenceCount + ", checksum=" + checksum + ", lsn=" + lsn + "}";
      case HEARTBEAT:
        return "HEARTBEAT{t=" + commitTime + ", lsn=" + lsn + ", horizon=" + seq + "}";
      default:
        return (delete ? "DELETE " : "UPSERT ") + fenceId + "@" + seq + (snapshot ? " snapshot" : " lsn=" + lsn + " t=" + commitTime);
    }
  }
}

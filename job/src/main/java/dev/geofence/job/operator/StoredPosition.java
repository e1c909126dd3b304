package dev.geofence.job.operator;

import dev.geofence.connectors.cdc.FenceChange;

/**
 * How far a key group had read the change stream, in keyed state: its last heartbeat's LSN and
 * commit time. Serialized by {@link StoredStateSerializers}.
 */
public record StoredPosition(long lsn, long commitTime) {

  /** The position a heartbeat of the stream carries. */
  public static StoredPosition of(FenceChange heartbeat) {
    return new StoredPosition(heartbeat.lsn, heartbeat.commitTime);
  }
}

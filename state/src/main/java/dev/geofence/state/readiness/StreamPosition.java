package dev.geofence.state.readiness;

/**
 * How far the change stream had been read: the LSN and commit time of a heartbeat, which the fence
 * index keeps per key group so that a restore knows where its state stands in the source's history.
 */
public record StreamPosition(long lsn, long commitTime) {}

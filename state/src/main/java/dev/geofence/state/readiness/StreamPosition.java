package dev.geofence.state.readiness;

/**
 * How far the change stream had been read: the LSN and commit time of a heartbeat, which the fence
 * index keeps per key group so that a restore knows where its state stands in the source's history.
 *
 * @param horizon the heartbeat's transaction horizon: every transaction with an id below it (a
 *     64-bit {@code xid8}) had ended before the heartbeat was written, so the state holds its edits;
 *     0 when unknown (a heartbeat table without the column, a state written before it). A catch-up's
 *     key pass reads only the rows written at or after it (docs/design.md#catch-up).
 */
public record StreamPosition(long lsn, long commitTime, long horizon) {}

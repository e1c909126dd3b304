package dev.geofence.state.ledger;

/**
 * A bucket's fingerprint as the source keeps it ({@code fence_bucket_stats}): the count of its live
 * fences and the XOR of h(id, seq) over them, at the bucket's {@code version} (one more per
 * transaction that edits the bucket), and where in the source's history that version was
 * committed (LSN and commit time 0 for one a read of the table brought).
 */
public record BucketFingerprint(int bucket, long fenceCount, long checksum, long version, long lsn, long commitTime) {}

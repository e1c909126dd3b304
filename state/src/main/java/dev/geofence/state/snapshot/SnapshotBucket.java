package dev.geofence.state.snapshot;

/**
 * One bucket's fingerprint in a snapshot file: the live fence count and checksum the source had
 * for it, and the version of its {@code fence_bucket_stats} row they are from.
 */
public record SnapshotBucket(int bucket, long fenceCount, long checksum, long version) {}

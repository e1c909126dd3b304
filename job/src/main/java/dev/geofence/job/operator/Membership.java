package dev.geofence.job.operator;

/**
 * The durable record of who is inside a fence, which keyed state keeps per fence: written as
 * objects enter and leave it, read back on restore and when a delete EXITs the fence's members.
 * Implementations set the fence's key themselves.
 */
public interface Membership {
  /** The object entered the fence at {@code since}, decided against the fence's version {@code fenceSeq}. */
  void entered(String fenceId, String objectId, long since, long fenceSeq) throws Exception;

  void left(String fenceId, String objectId) throws Exception;
}

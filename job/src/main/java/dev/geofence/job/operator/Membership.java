package dev.geofence.job.operator;

/**
 * The durable record of who is inside a fence, which keyed state keeps per fence: written as
 * objects enter and leave it, read back on restore and when a delete EXITs the fence's members.
 * Implementations set the fence's key themselves.
 */
public interface Membership {
  void entered(String fenceId, String objectId, long since) throws Exception;

  void left(String fenceId, String objectId) throws Exception;
}

package dev.geofence.job.operator;

import dev.geofence.connectors.model.Location;

/**
 * A location a subtask has not evaluated yet, with the key groups it is still owed to. A restore
 * at another parallelism hands each entry to the subtasks whose key groups overlap, and each
 * evaluates it against only the fences of the overlap, so no fence sees a location twice or never.
 * A Flink POJO.
 */
public class PendingLocation {

  public Location location;
  public int keyGroupStart;
  public int keyGroupEnd;

  public PendingLocation() {}

  public PendingLocation(Location location, int keyGroupStart, int keyGroupEnd) {
    this.location = location;
    this.keyGroupStart = keyGroupStart;
    this.keyGroupEnd = keyGroupEnd;
  }
}

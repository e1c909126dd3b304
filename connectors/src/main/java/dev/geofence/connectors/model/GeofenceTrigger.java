package dev.geofence.connectors.model;

import java.nio.charset.StandardCharsets;
import java.util.Objects;
import java.util.UUID;

/**
 * An ENTER, EXIT or DWELL of an object and a fence: a row of {@code geofence_triggers}. Its id is
 * derived from (object, fence, kind, event time, fence seq) alone (an EXIT on delete: without the
 * time), so writing it twice, after a replay, is harmless; the cause is not part of it, since the
 * same decision always has the same cause. A Flink POJO: {@code cause} was added after the first
 * release, and a trigger restored from state written before it has none.
 */
public class GeofenceTrigger {

  public String triggerId;
  public String objectId;
  public String fenceId;
  public TriggerKind kind;
  /** What decided it; null only in a trigger restored from state written by a release without causes. */
  public TriggerCause cause;
  /**
   * The location's event time; for an EXIT caused by a delete, the delete's commit time; by
   * silence, the object's last location's time plus the presence timeout; for a DWELL, the ENTER's
   * time plus the loitering delay.
   */
  public long eventTime;
  /** Where the object was; NaN for a DWELL and for an EXIT caused by a delete or by silence. */
  public double lon;
  public double lat;
  /** The fence version that decided the trigger. */
  public long fenceSeq;
  public String tenant;
  /** Wall-clock time the operator emitted it. */
  public long emittedAt;

  public GeofenceTrigger() {}

  public GeofenceTrigger(
      String objectId, String fenceId, TriggerKind kind, TriggerCause cause, long eventTime, double lon, double lat,
      long fenceSeq, String tenant, long emittedAt) {
    this.triggerId = id(objectId, fenceId, kind, eventTime, fenceSeq);
    this.objectId = objectId;
    this.fenceId = fenceId;
    this.kind = kind;
    this.cause = cause;
    this.eventTime = eventTime;
    this.lon = lon;
    this.lat = lat;
    this.fenceSeq = fenceSeq;
    this.tenant = tenant;
    this.emittedAt = emittedAt;
  }

  /**
   * The EXIT of an object from a fence deleted at {@code deletedAt}. Its id leaves the time out:
   * the fence's delete seq names the delete alone, and a rebuild that learns of it from the
   * tombstone (timed by its {@code deleted_at}) must rewrite the trigger the stream's delete
   * (timed by its commit) wrote, not add a second one.
   */
  public static GeofenceTrigger exitOnDelete(String objectId, String fenceId, long deletedAt, long deleteSeq, long emittedAt) {
    GeofenceTrigger exit = new GeofenceTrigger(objectId, fenceId, TriggerKind.EXIT, TriggerCause.FENCE_DELETED, deletedAt, Double.NaN, Double.NaN, deleteSeq, null, emittedAt);
    exit.triggerId = id(objectId, fenceId, TriggerKind.EXIT, 0, deleteSeq);
    return exit;
  }

  /** A name-based UUID over the trigger's identity, each part length-prefixed so none can blur. */
  public static String id(String objectId, String fenceId, TriggerKind kind, long eventTime, long fenceSeq) {
    String identity =
        objectId.length() + ":" + objectId + "|" + fenceId.length() + ":" + fenceId + "|" + kind + "|" + eventTime + "|" + fenceSeq;
    return UUID.nameUUIDFromBytes(identity.getBytes(StandardCharsets.UTF_8)).toString();
  }

  @Override
  public boolean equals(Object o) {
    if (this == o) {
      return true;
    }
    if (!(o instanceof GeofenceTrigger)) {
      return false;
    }
    GeofenceTrigger that = (GeofenceTrigger) o;
    return eventTime == that.eventTime
        && Double.compare(lon, that.lon) == 0
        && Double.compare(lat, that.lat) == 0
        && fenceSeq == that.fenceSeq
        && Objects.equals(triggerId, that.triggerId)
        && Objects.equals(objectId, that.objectId)
        && Objects.equals(fenceId, that.fenceId)
        && kind == that.kind
        && cause == that.cause
        && Objects.equals(tenant, that.tenant);
  }

  @Override
  public int hashCode() {
    return Objects.hash(triggerId);
  }

  @Override
  public String toString() {
    return kind + " " + objectId + " " + fenceId + "@" + fenceSeq + " t=" + eventTime;
  }
}

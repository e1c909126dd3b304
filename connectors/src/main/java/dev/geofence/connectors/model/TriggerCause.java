package dev.geofence.connectors.model;

import java.util.Locale;

/** What decided a trigger: the {@code cause} column of {@code geofence_triggers} (docs/semantics.md). */
public enum TriggerCause {
  /** A location of the object: inside a fence it was not in, or outside one it was in. */
  LOCATION,
  /** The fence was deleted while the object was inside (an EXIT). */
  FENCE_DELETED,
  /**
   * A location outside the fence's version in force at its time that the version in force at the
   * object's previous location covers: the fence moved away from under the object (an EXIT).
   */
  FENCE_RESHAPED,
  /** No location of the object for the presence timeout while it was inside (an EXIT). */
  SILENCE,
  /** The object stayed inside for the fence's loitering delay (a DWELL). */
  LOITERING;

  /** The word the tables, the Kafka topic and the docs use: lower case, words joined by '-'. */
  public String label() {
    return name().toLowerCase(Locale.ROOT).replace('_', '-');
  }
}

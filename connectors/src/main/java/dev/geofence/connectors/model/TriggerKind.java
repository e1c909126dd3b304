package dev.geofence.connectors.model;

/** What a trigger reports about an object and a fence. */
public enum TriggerKind {
  /** Inside now, and not inside at the object's previous evaluation for this fence. */
  ENTER,
  /** Inside before, not now; or the fence was deleted while the object was inside. */
  EXIT
}

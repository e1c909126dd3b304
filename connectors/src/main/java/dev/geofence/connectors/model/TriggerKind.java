package dev.geofence.connectors.model;

/** What a trigger reports about an object and a fence (docs/semantics.md). */
public enum TriggerKind {
  /** Inside now, and not inside at the object's previous evaluation for this fence. */
  ENTER,
  /** Inside before, not now; or the fence was deleted while the object was inside; or the object fell silent in it. */
  EXIT,
  /** Inside continuously for the loitering delay since its ENTER: once per stay, at ENTER + delay in event time. */
  DWELL
}

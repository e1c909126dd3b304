package dev.geofence.job.hold;

import org.apache.flink.runtime.operators.coordination.OperatorEvent;

/** A fence index subtask's hold of locations became full, or has room again. */
public record HeldLocationsEvent(boolean full) implements OperatorEvent {
  private static final long serialVersionUID = 1L;
}

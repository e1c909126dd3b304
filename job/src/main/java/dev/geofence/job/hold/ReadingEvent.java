package dev.geofence.job.hold;

import org.apache.flink.runtime.operators.coordination.OperatorEvent;

/**
 * A fence index subtask has chosen to catch up by reading what changed or by loading, and waits to
 * be told that the job's slot is ready for its read ({@link SlotReadyEvent}, {@link StreamStart}).
 */
public record ReadingEvent() implements OperatorEvent {
  private static final long serialVersionUID = 1L;
}

package dev.geofence.job.hold;

import org.apache.flink.runtime.operators.coordination.OperatorEvent;

/**
 * A fence index subtask is ready for the change stream to start ({@link StreamStart}): from the
 * position {@code streamFrom} its catch-up's read of what changed was paired with, or, 0, from
 * wherever the CDC source resumes (a replay, a fresh start, a rebuild).
 */
public record StreamStartEvent(long streamFrom) implements OperatorEvent {
  private static final long serialVersionUID = 1L;
}

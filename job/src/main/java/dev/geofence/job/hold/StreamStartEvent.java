package dev.geofence.job.hold;

import org.apache.flink.runtime.operators.coordination.OperatorEvent;

/**
 * A fence index subtask tells where it needs the change stream from ({@link StreamStart}), once it
 * is ready for the stream to start: from the position {@code streamFrom} its catch-up's read was
 * paired with, or, 0, from wherever the CDC source resumes (a replay, a fresh start, a rebuild).
 */
public record StreamStartEvent(long streamFrom) implements OperatorEvent {
  private static final long serialVersionUID = 1L;
}

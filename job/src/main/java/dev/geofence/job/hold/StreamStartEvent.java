package dev.geofence.job.hold;

import org.apache.flink.runtime.operators.coordination.OperatorEvent;

/**
 * A fence index subtask tells where it needs the change stream from ({@link StreamStart}). Once it
 * is ready for the stream to start ({@code reading} false): from the position {@code streamFrom}
 * its catch-up's read was paired with, or, 0, from wherever the CDC source resumes (a replay, a
 * fresh start, a rebuild). Before that, as soon as it chooses to read or load ({@code reading}
 * true): that its read will be paired with a position no earlier than {@code streamFrom}, its
 * gap check's target.
 */
public record StreamStartEvent(long streamFrom, boolean reading) implements OperatorEvent {
  private static final long serialVersionUID = 1L;
}

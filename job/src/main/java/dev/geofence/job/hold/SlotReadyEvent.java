package dev.geofence.job.hold;

import org.apache.flink.runtime.operators.coordination.OperatorEvent;

/**
 * From the fence index's coordinator to a subtask that said it reads or loads ({@link
 * StreamStartEvent} with {@code reading}): the job's slot is ready, created anew or left as it is,
 * and the read may begin ({@link StreamStart}).
 */
public record SlotReadyEvent() implements OperatorEvent {
  private static final long serialVersionUID = 1L;
}

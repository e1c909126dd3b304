package dev.geofence.job.hold;

import dev.geofence.connectors.cdc.FenceSourceOptions;
import java.util.BitSet;
import java.util.concurrent.CompletableFuture;
import org.apache.flink.runtime.jobgraph.OperatorID;
import org.apache.flink.runtime.operators.coordination.OperatorCoordinator;
import org.apache.flink.runtime.operators.coordination.OperatorEvent;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The fence index operator's coordinator: pauses the job's location sources while any subtask's
 * hold of locations is full, and resumes them once every subtask has room again ({@link
 * HeldLocationsEvent}). Every location reaches every subtask, so one full subtask is reason
 * enough. It keeps nothing in checkpoints: a restored subtask says again how full it is, and a
 * failed one is taken to have room (its successor says otherwise if it has not). It also holds the
 * change stream until every subtask is ready for it, and tells a subtask that reads when the slot is
 * ready for it ({@link StreamStart}, its own part).
 */
public final class HoldCoordinator implements OperatorCoordinator {

  private static final Logger LOG = LoggerFactory.getLogger(HoldCoordinator.class);

  private final String token;
  private final BitSet full = new BitSet();
  private final StreamStart streamStart;
  private final int parallelism;
  /**
   * Per subtask, the gateway to its current attempt once it runs, and whether it is owed a {@link
   * SlotReadyEvent} it had no gateway for; under a lock of their own, which the slot's thread takes
   * while the coordinator's may hold this one's.
   */
  private final SubtaskGateway[] gateways;
  private final BitSet owed = new BitSet();

  HoldCoordinator(String token, FenceSourceOptions source, int parallelism) {
    this.token = token;
    this.parallelism = parallelism;
    this.gateways = new SubtaskGateway[parallelism];
    this.streamStart = new StreamStart(token, source, this::slotReady);
  }

  /** Tells a subtask that the slot is ready for its read (from the coordinator's or the slot's thread). */
  private void slotReady(int subtask) {
    synchronized (gateways) {
      if (gateways[subtask] == null) {
        owed.set(subtask);
      } else {
        gateways[subtask].sendEvent(new SlotReadyEvent());
      }
    }
  }

  @Override
  public void start() {
    HoldGate.of(token);
  }

  @Override
  public void close() {
    HoldGate.release(token);
    streamStart.close();
  }

  @Override
  public synchronized void handleEventFromOperator(int subtask, int attemptNumber, OperatorEvent event) {
    if (event instanceof HeldLocationsEvent held) {
      full.set(subtask, held.full());
      update();
    } else if (event instanceof ReadingEvent) {
      streamStart.reading(subtask, parallelism);
    } else if (event instanceof StreamStartEvent start) {
      streamStart.reported(subtask, parallelism, start.streamFrom());
    }
  }

  private void update() {
    boolean pause = !full.isEmpty();
    if (pause != HoldGate.of(token).paused()) {
      LOG.info(pause ? "Subtasks {} of the fence index hold as many locations as they may: the location sources pause"
          : "Every subtask of the fence index has room for locations again{}: the location sources resume", pause ? full : "");
    }
    HoldGate.of(token).set(pause);
  }

  @Override
  public void checkpointCoordinator(long checkpointId, CompletableFuture<byte[]> result) {
    result.complete(new byte[0]);
  }

  @Override
  public void notifyCheckpointComplete(long checkpointId) {}

  @Override
  public synchronized void resetToCheckpoint(long checkpointId, byte[] checkpointData) {
    full.clear();
    update();
    // Every subtask starts again and says anew what it does (its gateway comes with its attempt).
    for (int subtask = 0; subtask < parallelism; subtask++) {
      streamStart.reset(subtask);
    }
  }

  @Override
  public synchronized void subtaskReset(int subtask, long checkpointId) {
    full.clear(subtask);
    update();
    forget(subtask);
  }

  @Override
  public synchronized void executionAttemptFailed(int subtask, int attemptNumber, Throwable reason) {
    full.clear(subtask);
    update();
    forget(subtask);
  }

  /** A subtask's attempt is gone: its successor says again what it needs, and is told anew. */
  private void forget(int subtask) {
    synchronized (gateways) {
      gateways[subtask] = null;
      owed.clear(subtask);
    }
    streamStart.reset(subtask);
  }

  @Override
  public void executionAttemptReady(int subtask, int attemptNumber, SubtaskGateway gateway) {
    synchronized (gateways) {
      gateways[subtask] = gateway;
      if (owed.get(subtask)) {
        owed.clear(subtask);
        gateway.sendEvent(new SlotReadyEvent());
      }
    }
  }

  /**
   * Makes the coordinator of one built job.
   *
   * @param source the source of truth whose slot a catch-up by read moves, or null (tests)
   */
  public record Provider(OperatorID getOperatorId, String token, FenceSourceOptions source) implements OperatorCoordinator.Provider {
    private static final long serialVersionUID = 1L;

    @Override
    public OperatorCoordinator create(Context context) {
      return new HoldCoordinator(token, source, context.currentParallelism());
    }
  }
}

package dev.geofence.job.hold;

import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArraySet;
import java.util.function.Consumer;

/**
 * Whether a job's location sources must pause, as the fence index's coordinator says; the
 * location source's enumerator listens. Both are coordinators of the same job, so both live in the
 * JobManager's process: this registry, keyed by a token the job's wiring gives both (one per built
 * job, the same across its restarts), is how they meet. Flink's own coordinator store is not
 * reachable from a source's enumerator. Thread-safe.
 */
final class HoldGate {

  private static final Map<String, HoldGate> GATES = new ConcurrentHashMap<>();

  private final Set<Consumer<Boolean>> listeners = new CopyOnWriteArraySet<>();
  private volatile boolean paused;

  private HoldGate() {}

  /** The gate of {@code token}, made on first use by either side. */
  static HoldGate of(String token) {
    return GATES.computeIfAbsent(token, t -> new HoldGate());
  }

  /** The coordinator is gone (the job ended): the gate goes too. */
  static void release(String token) {
    HoldGate gate = GATES.remove(token);
    if (gate != null) {
      gate.set(false);
    }
  }

  boolean paused() {
    return paused;
  }

  /** Pauses or resumes the location sources; listeners hear of changes only. */
  synchronized void set(boolean pause) {
    if (pause != paused) {
      paused = pause;
      listeners.forEach(l -> l.accept(pause));
    }
  }

  /** {@code listener} hears the state now and every change after. */
  synchronized void listen(Consumer<Boolean> listener) {
    listeners.add(listener);
    listener.accept(paused);
  }

  void unlisten(Consumer<Boolean> listener) {
    listeners.remove(listener);
  }
}

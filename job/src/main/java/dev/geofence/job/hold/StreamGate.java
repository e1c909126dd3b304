package dev.geofence.job.hold;

import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArraySet;

/**
 * Whether a job's change stream may start, as the fence index's coordinator decides ({@link
 * StreamStart}); the fence source's enumerator listens ({@link GatedFenceSource}). It opens once
 * and stays open for the job's life. Met by token, as {@link HoldGate} is. Thread-safe.
 */
final class StreamGate {

  private static final Map<String, StreamGate> GATES = new ConcurrentHashMap<>();

  private final Set<Runnable> listeners = new CopyOnWriteArraySet<>();
  private volatile boolean open;

  private StreamGate() {}

  /** The gate of {@code token}, made on first use by either side. */
  static StreamGate of(String token) {
    return GATES.computeIfAbsent(token, t -> new StreamGate());
  }

  /** The coordinator is gone (the job ended): the gate goes too. */
  static void release(String token) {
    GATES.remove(token);
  }

  boolean isOpen() {
    return open;
  }

  /** Lets the stream start; listeners hear of it once. */
  synchronized void open() {
    if (!open) {
      open = true;
      listeners.forEach(Runnable::run);
      listeners.clear();
    }
  }

  /** {@code listener} runs when the gate opens, at once if it is open. */
  synchronized void whenOpen(Runnable listener) {
    if (open) {
      listener.run();
    } else {
      listeners.add(listener);
    }
  }

  void forget(Runnable listener) {
    listeners.remove(listener);
  }
}

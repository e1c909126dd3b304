package dev.geofence.job.hold;

import org.apache.flink.runtime.operators.coordination.OperatorEventGateway;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What a fence index subtask tells its {@link HoldCoordinator} of its hold of locations: that it
 * is full, at the bound, and that it has room again, at half of it, so that the location sources
 * do not flap. What is already on its way still arrives and is held, so the hold may pass the
 * bound by what the network buffers carry. Not thread-safe: the task thread's own.
 */
public final class HoldReport {

  private static final Logger LOG = LoggerFactory.getLogger(HoldReport.class);

  private final OperatorEventGateway gateway;
  private final int max;
  private boolean full;

  /**
   * @param gateway where the subtask says it, or null when it runs without a coordinator (tests)
   * @param max how many locations the subtask holds before it asks for the sources to pause
   */
  public HoldReport(OperatorEventGateway gateway, int max) {
    this.gateway = gateway;
    this.max = max;
  }

  /**
   * Says whether the hold of {@code held} locations is full or has room again, if that changed.
   *
   * @param ready whether the index is ready, so that what is held waits only for the fence clock
   * @param lag how far the clock trails the newest location held ({@link Long#MAX_VALUE}: not started)
   */
  public void held(int held, boolean ready, long lag) {
    if (gateway == null) {
      return;
    }
    boolean nowFull = full ? held > max / 2 : held >= max;
    if (nowFull == full) {
      return;
    }
    full = nowFull;
    gateway.sendEventToCoordinator(new HeldLocationsEvent(full));
    if (full && ready) {
      // Ready, so these wait only for the fence clock: the bound is below what the rate needs.
      LOG.warn("{} locations held by a ready index, the most this subtask may hold: it asks for the location sources"
          + " to pause. They wait for the fence clock, which {}; at this rate the bound throttles the job: raise"
          + " --max-held-locations (geofence.locations.max-held) above the locations of a few such lags, or shorten"
          + " --heartbeat-interval", held, lag == Long.MAX_VALUE ? "has not started" : "trails them by " + lag + " ms");
    } else {
      LOG.info(full ? "{} locations held, the most this subtask may hold: it asks for the location sources to pause"
          : "{} locations held: room again, the location sources may resume", held);
    }
  }
}

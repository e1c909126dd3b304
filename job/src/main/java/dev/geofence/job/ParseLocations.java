package dev.geofence.job;

import dev.geofence.connectors.location.LocationJson;
import dev.geofence.connectors.location.LocationJson.BadLocationException;
import dev.geofence.connectors.model.DeadLetter;
import dev.geofence.connectors.model.Location;
import dev.geofence.state.time.LocationTimePolicy;
import java.time.Instant;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.metrics.Counter;
import org.apache.flink.streaming.api.functions.ProcessFunction;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;

/**
 * Parses location JSON lines; a line that does not parse goes to dead letters with its reason, and
 * so does a location stamped beyond the maximum clock skew ahead ({@link
 * LocationTimePolicy#FUTURE_TIMESTAMP}).
 *
 * <p>The future is judged here, before event time is assigned, because only here can a location
 * be refused without moving the location watermark: one stamped in 2036 would otherwise make every
 * location after it late. The fence index's clock (the database's commit times) is not known this
 * far upstream, so this subtask's own clock stands in for it: in a running job the fence clock
 * trails it by about a heartbeat interval, with the hosts' clocks kept in step (NTP), and a replay
 * of old input is never refused as future, since the clock has only moved on.
 */
final class ParseLocations extends ProcessFunction<String, Location> {

  private static final long serialVersionUID = 1L;

  /** The counter of locations refused as stamped in the future. */
  static final String FUTURE_LOCATIONS = "future_locations";

  static final OutputTag<DeadLetter> DEAD_LETTERS =
      new OutputTag<>("location-dead-letters", TypeInformation.of(DeadLetter.class));

  private final LocationTimePolicy policy;
  private transient Counter future;

  ParseLocations(LocationTimePolicy policy) {
    this.policy = policy;
  }

  @Override
  public void open(OpenContext openContext) {
    future = getRuntimeContext().getMetricGroup().counter(FUTURE_LOCATIONS);
  }

  @Override
  public void processElement(String line, Context context, Collector<Location> out) {
    if (line.isBlank()) {
      return; // blank lines separate nothing and mean nothing
    }
    long now = context.timerService().currentProcessingTime();
    Location location;
    try {
      location = LocationJson.parse(line);
    } catch (BadLocationException e) {
      context.output(DEAD_LETTERS, new DeadLetter(
          "location", e.objectId(), 0, "ERROR", e.reason().name(), e.getMessage(), line, 0, now));
      return;
    }
    if (policy.isFuture(location.timestamp, now)) {
      future.inc();
      context.output(DEAD_LETTERS, new DeadLetter("location", location.objectId, 0, "ERROR", LocationTimePolicy.FUTURE_TIMESTAMP,
          "stamped " + Instant.ofEpochMilli(location.timestamp) + ", more than the maximum clock skew of "
              + policy.maxClockSkew().toMillis() + " ms ahead of " + Instant.ofEpochMilli(now),
          line, location.timestamp, now));
      return;
    }
    out.collect(location);
  }
}

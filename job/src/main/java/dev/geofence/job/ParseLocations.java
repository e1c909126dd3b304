package dev.geofence.job;

import dev.geofence.connectors.location.LocationJson;
import dev.geofence.connectors.location.LocationJson.BadLocationException;
import dev.geofence.connectors.model.DeadLetter;
import dev.geofence.connectors.model.Location;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.streaming.api.functions.ProcessFunction;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;

/** Parses location JSON lines; a line that does not parse goes to dead letters with its reason. */
final class ParseLocations extends ProcessFunction<String, Location> {

  private static final long serialVersionUID = 1L;

  static final OutputTag<DeadLetter> DEAD_LETTERS =
      new OutputTag<>("location-dead-letters", TypeInformation.of(DeadLetter.class));

  @Override
  public void processElement(String line, Context context, Collector<Location> out) {
    if (line.isBlank()) {
      return; // blank lines separate nothing and mean nothing
    }
    try {
      out.collect(LocationJson.parse(line));
    } catch (BadLocationException e) {
      context.output(DEAD_LETTERS, new DeadLetter(
          "location", e.objectId(), 0, "ERROR", e.reason().name(), e.getMessage(), line, 0, System.currentTimeMillis()));
    }
  }
}

package dev.geofence.connectors.location;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.geofence.connectors.model.Location;
import java.time.DateTimeException;
import java.time.OffsetDateTime;
import java.time.format.DateTimeFormatter;

/**
 * Parses the location JSON form every location source shares:
 *
 * <pre>{"object_id": "...", "ts": epoch millis or ISO-8601, "lon": number, "lat": number, "tenant": "..."}</pre>
 *
 * ({@code tenant} optional). A line that does not fit is refused with a {@link BadLocationException}
 * naming the reason, for a dead-letter row. Not thread-safe only in the sense that it is cheap to
 * create one per parallel instance; the ObjectMapper it holds is thread-safe.
 */
public final class LocationJson {

  private static final ObjectMapper MAPPER = new ObjectMapper();

  private LocationJson() {}

  /** Why a location line was refused; stable names, written to dead-letter rows. */
  public enum Reason {
    MALFORMED_JSON,
    MISSING_FIELD,
    BAD_TIMESTAMP,
    BAD_COORDINATE
  }

  /** A refused location line. */
  public static final class BadLocationException extends Exception {
    private static final long serialVersionUID = 1L;
    private final Reason reason;
    private final String objectId;

    BadLocationException(Reason reason, String objectId, String detail) {
      super(reason + ": " + detail);
      this.reason = reason;
      this.objectId = objectId;
    }

    public Reason reason() {
      return reason;
    }

    /** The object id if the line had one, else null. */
    public String objectId() {
      return objectId;
    }
  }

  public static Location parse(String line) throws BadLocationException {
    JsonNode node;
    try {
      node = MAPPER.readTree(line);
    } catch (JsonProcessingException e) {
      throw new BadLocationException(Reason.MALFORMED_JSON, null, "not JSON: " + e.getOriginalMessage());
    }
    if (node == null || !node.isObject()) {
      throw new BadLocationException(Reason.MALFORMED_JSON, null, "not a JSON object");
    }
    JsonNode id = node.get("object_id");
    if (id == null || !id.isTextual() || id.asText().isEmpty()) {
      throw new BadLocationException(Reason.MISSING_FIELD, null, "object_id must be a non-empty string");
    }
    String objectId = id.asText();
    long ts = timestamp(objectId, node.get("ts"));
    double lon = coordinate(objectId, node, "lon", 180);
    double lat = coordinate(objectId, node, "lat", 90);
    JsonNode tenant = node.get("tenant");
    if (tenant != null && !tenant.isNull() && !tenant.isTextual()) {
      throw new BadLocationException(Reason.MISSING_FIELD, objectId, "tenant must be a string when present");
    }
    return new Location(objectId, ts, lon, lat, tenant == null || tenant.isNull() ? null : tenant.asText());
  }

  private static long timestamp(String objectId, JsonNode ts) throws BadLocationException {
    if (ts == null || ts.isNull()) {
      throw new BadLocationException(Reason.MISSING_FIELD, objectId, "ts is missing");
    }
    if (ts.isIntegralNumber()) {
      return ts.asLong();
    }
    if (ts.isTextual()) {
      try {
        return OffsetDateTime.parse(ts.asText(), DateTimeFormatter.ISO_DATE_TIME).toInstant().toEpochMilli();
      } catch (DateTimeException e) {
        throw new BadLocationException(
            Reason.BAD_TIMESTAMP, objectId, "ts '" + ts.asText() + "' is not ISO-8601 with an offset");
      }
    }
    throw new BadLocationException(Reason.BAD_TIMESTAMP, objectId, "ts must be epoch millis or an ISO-8601 string");
  }

  private static double coordinate(String objectId, JsonNode node, String field, double limit)
      throws BadLocationException {
    JsonNode value = node.get(field);
    if (value == null || value.isNull()) {
      throw new BadLocationException(Reason.MISSING_FIELD, objectId, field + " is missing");
    }
    if (!value.isNumber()) {
      throw new BadLocationException(Reason.BAD_COORDINATE, objectId, field + " must be a number");
    }
    double v = value.asDouble();
    if (!Double.isFinite(v) || Math.abs(v) > limit) {
      throw new BadLocationException(Reason.BAD_COORDINATE, objectId, field + " " + v + " is outside [-" + limit + ", " + limit + "]");
    }
    return v;
  }

  /** The JSON line for a location, as the sources read it (used by the generator and tests). */
  public static String format(Location location) {
    var node = MAPPER.createObjectNode();
    node.put("object_id", location.objectId);
    node.put("ts", location.timestamp);
    node.put("lon", location.lon);
    node.put("lat", location.lat);
    if (location.tenant != null) {
      node.put("tenant", location.tenant);
    }
    return node.toString();
  }
}

package dev.geofence.connectors.location;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.geofence.connectors.model.Location;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.DateTimeException;
import java.time.OffsetDateTime;
import java.time.format.DateTimeFormatter;

/**
 * Parses the location JSON form every location source shares:
 *
 * <pre>{"object_id": "...", "ts": epoch millis or ISO-8601, "lon": number, "lat": number, "tenant": "..."}</pre>
 *
 * ({@code tenant} optional). A line that does not fit is refused with a {@link BadLocationException}
 * naming the reason, for a dead-letter row. Thread-safe.
 */
public final class LocationJson {

  private static final ObjectMapper MAPPER = new ObjectMapper();
  /**
   * Reads numbers with the FastDoubleParser Jackson carries, which rounds exactly as {@link
   * Double#parseDouble} does in half the time: the two coordinates were half of reading a line.
   */
  private static final JsonFactory FACTORY = JsonFactory.builder().enable(StreamReadFeature.USE_FAST_DOUBLE_PARSER).build();

  /**
   * The longest object id taken, in characters: the output tables index it (triggers, presence,
   * dead letters), and PostgreSQL refuses an index entry over about 2.7 KB, which failed every
   * write of the batch holding it, on every replay.
   */
  public static final int MAX_OBJECT_ID_LENGTH = 256;

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

  /**
   * Parses one line. Read as a stream of tokens, not as a tree: every location passes here once,
   * and a tree of nodes per line was a seventh of the whole job's CPU per location at 200,000 a
   * second (docs/performance/journal.md, "2026-12-03: the location path"). The checks and their
   * order are as they were on the tree: the object read whole first (malformed JSON anywhere in it
   * refuses the line), a repeated field's last value counts, other fields are skipped whatever they
   * hold, and what follows the object is not read.
   */
  public static Location parse(String line) throws BadLocationException {
    Field objectId = null;
    Field ts = null;
    Field lon = null;
    Field lat = null;
    Field tenant = null;
    try (JsonParser parser = FACTORY.createParser(line)) {
      if (parser.nextToken() != JsonToken.START_OBJECT) {
        parser.skipChildren(); // an array read whole: malformed, it is not JSON
        throw new BadLocationException(Reason.MALFORMED_JSON, null, "not a JSON object");
      }
      while (parser.nextToken() == JsonToken.FIELD_NAME) {
        String name = parser.currentName();
        JsonToken value = parser.nextToken();
        switch (name) {
          case "object_id" -> objectId = Field.of(parser, value);
          case "ts" -> ts = Field.of(parser, value);
          case "lon" -> lon = Field.of(parser, value);
          case "lat" -> lat = Field.of(parser, value);
          case "tenant" -> tenant = Field.of(parser, value);
          default -> parser.skipChildren();
        }
      }
    } catch (JsonProcessingException e) {
      throw new BadLocationException(Reason.MALFORMED_JSON, null, "not JSON: " + e.getOriginalMessage());
    } catch (IOException e) {
      throw new UncheckedIOException("reading a string cannot fail", e);
    }
    if (objectId == null || objectId.token != JsonToken.VALUE_STRING || objectId.text.isEmpty()) {
      throw new BadLocationException(Reason.MISSING_FIELD, null, "object_id must be a non-empty string");
    }
    if (objectId.text.length() > MAX_OBJECT_ID_LENGTH) {
      throw new BadLocationException(Reason.MISSING_FIELD, null,
          "object_id must be at most " + MAX_OBJECT_ID_LENGTH + " characters, got " + objectId.text.length());
    }
    String id = objectId.text;
    long time = timestamp(id, ts);
    double x = coordinate(id, lon, "lon", 180);
    double y = coordinate(id, lat, "lat", 90);
    if (tenant != null && tenant.token != JsonToken.VALUE_NULL && tenant.token != JsonToken.VALUE_STRING) {
      throw new BadLocationException(Reason.MISSING_FIELD, id, "tenant must be a string when present");
    }
    return new Location(id, time, x, y, tenant == null || tenant.token == JsonToken.VALUE_NULL ? null : tenant.text);
  }

  /**
   * A field's value as the checks need it: its token, its text if a string, its number if one
   * (an integer as a long, as the tree's {@code asLong} gave it, and as a double).
   */
  private record Field(JsonToken token, String text, long integer, double number) {
    static Field of(JsonParser parser, JsonToken token) throws IOException {
      return switch (token) {
        case VALUE_STRING -> new Field(token, parser.getText(), 0, 0);
        case VALUE_NUMBER_INT -> new Field(token, null, parser.getNumberType() == JsonParser.NumberType.BIG_INTEGER
            ? parser.getBigIntegerValue().longValue() : parser.getLongValue(), parser.getDoubleValue());
        case VALUE_NUMBER_FLOAT -> new Field(token, null, 0, parser.getDoubleValue());
        case START_OBJECT, START_ARRAY -> {
          parser.skipChildren();
          yield new Field(token, null, 0, 0);
        }
        default -> new Field(token, null, 0, 0);
      };
    }

    boolean isNumber() {
      return token == JsonToken.VALUE_NUMBER_INT || token == JsonToken.VALUE_NUMBER_FLOAT;
    }
  }

  private static long timestamp(String objectId, Field ts) throws BadLocationException {
    if (ts == null || ts.token == JsonToken.VALUE_NULL) {
      throw new BadLocationException(Reason.MISSING_FIELD, objectId, "ts is missing");
    }
    if (ts.token == JsonToken.VALUE_NUMBER_INT) {
      // An integer past a long's range would wrap into a plausible time.
      if (Math.abs(ts.number) >= 0x1p63) {
        throw new BadLocationException(Reason.BAD_TIMESTAMP, objectId, "ts " + ts.number + " is past any epoch milliseconds");
      }
      return ts.integer;
    }
    if (ts.token == JsonToken.VALUE_STRING) {
      try {
        return OffsetDateTime.parse(ts.text, DateTimeFormatter.ISO_DATE_TIME).toInstant().toEpochMilli();
      } catch (DateTimeException | ArithmeticException e) {
        // ArithmeticException: a year ISO-8601 allows that epoch milliseconds cannot hold.
        throw new BadLocationException(
            Reason.BAD_TIMESTAMP, objectId, "ts '" + ts.text + "' is not ISO-8601 with an offset");
      }
    }
    throw new BadLocationException(Reason.BAD_TIMESTAMP, objectId, "ts must be epoch millis or an ISO-8601 string");
  }

  private static double coordinate(String objectId, Field value, String field, double limit)
      throws BadLocationException {
    if (value == null || value.token == JsonToken.VALUE_NULL) {
      throw new BadLocationException(Reason.MISSING_FIELD, objectId, field + " is missing");
    }
    if (!value.isNumber()) {
      throw new BadLocationException(Reason.BAD_COORDINATE, objectId, field + " must be a number");
    }
    double v = value.number;
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

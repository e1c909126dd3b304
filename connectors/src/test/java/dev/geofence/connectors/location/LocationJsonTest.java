package dev.geofence.connectors.location;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.geofence.connectors.location.LocationJson.BadLocationException;
import dev.geofence.connectors.location.LocationJson.Reason;
import dev.geofence.connectors.model.Location;
import java.time.DateTimeException;
import java.time.OffsetDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

class LocationJsonTest {

  private static final ObjectMapper MAPPER = new ObjectMapper();

  @Test
  void aLocationLineIsReadWithItsOptionalTenant() throws Exception {
    assertThat(LocationJson.parse("{\"object_id\":\"o1\",\"ts\":1700000000000,\"lon\":13.4,\"lat\":52.5}"))
        .isEqualTo(new Location("o1", 1_700_000_000_000L, 13.4, 52.5, null));
    assertThat(LocationJson.parse("{\"tenant\":\"t\",\"lat\":-90,\"lon\":180,\"ts\":\"2026-12-03T18:00:00+01:00\",\"object_id\":\"o\"}"))
        .isEqualTo(new Location("o", OffsetDateTime.parse("2026-12-03T17:00:00Z").toInstant().toEpochMilli(), 180, -90, "t"));
    Location generated = new Location("v-7", 42, -0.5, 0.25, "acme");
    assertThat(LocationJson.parse(LocationJson.format(generated))).isEqualTo(generated);
  }

  @Test
  void eachWayALineCanBeWrongHasItsReason() throws Exception {
    assertRefused("{\"object_id\":\"o\",\"ts\":1,\"lon\":1", Reason.MALFORMED_JSON, null);
    assertRefused("[1, 2]", Reason.MALFORMED_JSON, null);
    assertRefused("{\"ts\":1,\"lon\":1,\"lat\":1}", Reason.MISSING_FIELD, null);
    assertRefused("{\"object_id\":\"o\",\"ts\":1.5,\"lon\":1,\"lat\":1}", Reason.BAD_TIMESTAMP, "o");
    assertRefused("{\"object_id\":\"o\",\"ts\":\"yesterday\",\"lon\":1,\"lat\":1}", Reason.BAD_TIMESTAMP, "o");
    // ISO-8601 years past what epoch milliseconds hold, and an integer past a long's range (which
    // wrapped into a plausible time): refused, where the first failed the task on every replay.
    assertRefused("{\"object_id\":\"o\",\"ts\":\"+292278995-01-01T00:00:00Z\",\"lon\":1,\"lat\":1}", Reason.BAD_TIMESTAMP, "o");
    assertRefused("{\"object_id\":\"o\",\"ts\":18446744073709551616,\"lon\":1,\"lat\":1}", Reason.BAD_TIMESTAMP, "o");
    // An id the output tables' indexes cannot hold failed every write of its batch, on every replay.
    String longest = "o".repeat(LocationJson.MAX_OBJECT_ID_LENGTH);
    assertThat(LocationJson.parse("{\"object_id\":\"" + longest + "\",\"ts\":1,\"lon\":1,\"lat\":1}").objectId).isEqualTo(longest);
    assertRefused("{\"object_id\":\"" + longest + "x\",\"ts\":1,\"lon\":1,\"lat\":1}", Reason.MISSING_FIELD, null);
    assertRefused("{\"object_id\":\"o\",\"ts\":1,\"lon\":181,\"lat\":1}", Reason.BAD_COORDINATE, "o");
    assertRefused("{\"object_id\":\"o\",\"ts\":1,\"lon\":1,\"lat\":\"1\"}", Reason.BAD_COORDINATE, "o");
    assertRefused("{\"object_id\":\"o\",\"ts\":1,\"lon\":1,\"lat\":1,\"tenant\":7}", Reason.MISSING_FIELD, "o");
  }

  /**
   * The line read as a stream of tokens decides as Jackson's tree model of the same line did (the
   * parser before this one, kept here as the oracle): the same location, or the same refusal with
   * the same reason, object id and message (for a syntax error, that it is one), over generated lines of every shape: fields in any
   * order, repeated, of every JSON type, out of range, with more digits than a double holds
   * (rounded alike), nested fields it skips, cut short, broken by a stray character, and other
   * roots than an object.
   */
  @Test
  void decidesAsTheTreeModelOnGeneratedLines() {
    Random random = new Random(20261203);
    Map<Reason, Integer> refused = new EnumMap<>(Reason.class);
    int read = 0;
    for (int i = 0; i < 20_000; i++) {
      String line = line(random);
      Object expected = outcome(() -> tree(line));
      Object actual = outcome(() -> LocationJson.parse(line));
      assertThat(actual).as("line %s", line).isEqualTo(expected);
      if (actual instanceof Location) {
        read++;
      } else {
        refused.merge(((Refusal) actual).reason(), 1, Integer::sum);
      }
    }
    // Every outcome is generated often enough to be compared.
    assertThat(read).isGreaterThan(1_000);
    assertThat(refused.keySet()).containsExactlyInAnyOrder(Reason.values());
    assertThat(refused.values()).allSatisfy(n -> assertThat(n).isGreaterThan(200));
  }

  private static void assertRefused(String line, Reason reason, String objectId) {
    assertThatThrownBy(() -> LocationJson.parse(line)).isInstanceOfSatisfying(BadLocationException.class, e -> {
      assertThat(e.reason()).isEqualTo(reason);
      assertThat(e.objectId()).isEqualTo(objectId);
    });
  }

  private record Refusal(Reason reason, String objectId, String message) {}

  private interface Parse {
    Location parse() throws BadLocationException;
  }

  private static Object outcome(Parse parse) {
    try {
      return parse.parse();
    } catch (BadLocationException e) {
      // Jackson words a syntax error in its own way for each way of reading: that it is one counts.
      String message = e.getMessage().startsWith("MALFORMED_JSON: not JSON: ") ? "MALFORMED_JSON: not JSON: ..." : e.getMessage();
      return new Refusal(e.reason(), e.objectId(), message);
    }
  }

  private static final List<String> FIELDS = List.of("object_id", "ts", "lon", "lat", "tenant");

  private static String line(Random random) {
    List<String> fields = new ArrayList<>();
    for (String name : FIELDS) {
      if (random.nextInt(25) != 0 && (!name.equals("tenant") || random.nextBoolean())) {
        fields.add(field(random, name));
      }
    }
    for (int extra = random.nextInt(3); extra > 0; extra--) {
      fields.add("\"speed\":" + value(random));
    }
    if (random.nextInt(5) == 0) {
      fields.add(field(random, FIELDS.get(random.nextInt(FIELDS.size())))); // a field repeated, with its own value
    }
    Collections.shuffle(fields, random);
    String line = "{" + String.join(random.nextBoolean() ? "," : " , ", fields) + "}";
    return switch (random.nextInt(25)) {
      case 0 -> line.substring(0, random.nextInt(line.length()));
      case 1 -> {
        int at = random.nextInt(line.length());
        yield line.substring(0, at) + "{}[]:,\"x1 ".charAt(random.nextInt(10)) + line.substring(at);
      }
      case 2 -> "[" + line + "]";
      case 3 -> value(random);
      case 4 -> line + " trailing";
      default -> line;
    };
  }

  private static String field(Random random, String name) {
    String value = switch (name) {
      case "object_id" -> random.nextInt(12) == 0 ? value(random) : "\"o-" + random.nextInt(1000) + "\"";
      case "ts" -> switch (random.nextInt(8)) {
        case 0 -> "\"2026-12-0" + (1 + random.nextInt(9)) + "T1" + random.nextInt(10) + ":00:00" + (random.nextBoolean() ? "Z" : "+02:00") + "\"";
        case 1 -> value(random);
        case 2 -> "123456789012345678901234567890";
        default -> Long.toString(1_700_000_000_000L + random.nextInt(1_000_000));
      };
      case "lon" -> coordinate(random, 180);
      case "lat" -> coordinate(random, 90);
      default -> random.nextInt(4) == 0 ? value(random) : "\"t" + random.nextInt(3) + "\"";
    };
    return "\"" + name + "\":" + value;
  }

  private static String coordinate(Random random, int limit) {
    return switch (random.nextInt(12)) {
      case 0 -> value(random);
      case 1 -> Double.toString((random.nextDouble() * 2 - 1) * limit * 1.5);
      case 2 -> "1e400";
      case 3 -> Integer.toString(random.nextInt(2 * limit + 1) - limit);
      case 4 -> digits(random, 1 + random.nextInt(2)) + "." + digits(random, 15 + random.nextInt(15)) + (random.nextBoolean() ? "" : "e-" + random.nextInt(3));
      default -> Double.toString((random.nextDouble() * 2 - 1) * limit);
    };
  }

  /** Decimal digits, more than a double holds: rounding them is the parser's. */
  private static String digits(Random random, int n) {
    StringBuilder digits = new StringBuilder();
    for (int i = 0; i < n; i++) {
      digits.append((char) ('0' + random.nextInt(10)));
    }
    return digits.toString();
  }

  /** A JSON value of any type. */
  private static String value(Random random) {
    return switch (random.nextInt(9)) {
      case 0 -> "null";
      case 1 -> "true";
      case 2 -> "\"\"";
      case 3 -> "\"a \\\"quoted\\\" \\u00e9 string\"";
      case 4 -> "{\"a\":[1,{\"b\":null}],\"c\":\"}\"}";
      case 5 -> "[1,2,[3]]";
      case 6 -> "-0.5e3";
      case 7 -> "[]";
      default -> Integer.toString(random.nextInt());
    };
  }

  // ---- the oracle: the parser of the releases before, on Jackson's tree model ---------------------

  private static Location tree(String line) throws BadLocationException {
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
    if (id.asText().length() > LocationJson.MAX_OBJECT_ID_LENGTH) {
      throw new BadLocationException(Reason.MISSING_FIELD, null,
          "object_id must be at most " + LocationJson.MAX_OBJECT_ID_LENGTH + " characters, got " + id.asText().length());
    }
    String objectId = id.asText();
    long ts = treeTimestamp(objectId, node.get("ts"));
    double lon = treeCoordinate(objectId, node, "lon", 180);
    double lat = treeCoordinate(objectId, node, "lat", 90);
    JsonNode tenant = node.get("tenant");
    if (tenant != null && !tenant.isNull() && !tenant.isTextual()) {
      throw new BadLocationException(Reason.MISSING_FIELD, objectId, "tenant must be a string when present");
    }
    return new Location(objectId, ts, lon, lat, tenant == null || tenant.isNull() ? null : tenant.asText());
  }

  private static long treeTimestamp(String objectId, JsonNode ts) throws BadLocationException {
    if (ts == null || ts.isNull()) {
      throw new BadLocationException(Reason.MISSING_FIELD, objectId, "ts is missing");
    }
    if (ts.isIntegralNumber()) {
      if (!ts.canConvertToLong()) {
        throw new BadLocationException(Reason.BAD_TIMESTAMP, objectId, "ts " + ts.asDouble() + " is past any epoch milliseconds");
      }
      return ts.asLong();
    }
    if (ts.isTextual()) {
      try {
        return OffsetDateTime.parse(ts.asText(), DateTimeFormatter.ISO_DATE_TIME).toInstant().toEpochMilli();
      } catch (DateTimeException | ArithmeticException e) {
        throw new BadLocationException(Reason.BAD_TIMESTAMP, objectId, "ts '" + ts.asText() + "' is not ISO-8601 with an offset");
      }
    }
    throw new BadLocationException(Reason.BAD_TIMESTAMP, objectId, "ts must be epoch millis or an ISO-8601 string");
  }

  private static double treeCoordinate(String objectId, JsonNode node, String field, double limit) throws BadLocationException {
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
}

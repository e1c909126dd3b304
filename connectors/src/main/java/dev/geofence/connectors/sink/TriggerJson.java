package dev.geofence.connectors.sink;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.geofence.connectors.model.GeofenceTrigger;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;

/**
 * A trigger as the JSON value of a Kafka record: the columns of {@code geofence_triggers}, named
 * alike, so one Flink SQL schema reads the topic and the table:
 *
 * <pre>{"trigger_id": "uuid", "object_id": "...", "fence_id": "...", "kind": "ENTER" | "EXIT" | "DWELL",
 *  "event_time": "2026-11-30T20:15:00.123Z", "lon": 1.5, "lat": 2.5, "fence_seq": 7,
 *  "tenant": "..." | null, "emitted_at": "2026-11-30T20:15:00.456Z",
 *  "cause": "location" | "fence-deleted" | "fence-reshaped" | "silence" | "loitering" | null}</pre>
 *
 * Times are UTC with exactly three fraction digits (what Flink's JSON format reads as {@code
 * TIMESTAMP_LTZ(3)} with {@code 'json.timestamp-format.standard' = 'ISO-8601'}); {@code lon} and
 * {@code lat} are null for a DWELL and for an EXIT caused by a fence delete or silence, as in the
 * table; {@code cause} is null only for a trigger restored from the state of a release without
 * causes. A DWELL, for example:
 *
 * <pre>{"trigger_id": "...", "object_id": "truck-7", "fence_id": "depot-3", "kind": "DWELL",
 *  "event_time": "2026-11-30T20:25:00.123Z", "lon": null, "lat": null, "fence_seq": 7,
 *  "tenant": null, "emitted_at": "2026-11-30T20:25:04.010Z", "cause": "loitering"}</pre>
 */
public final class TriggerJson {

  private static final ObjectMapper MAPPER = new ObjectMapper();
  private static final DateTimeFormatter UTC_MILLIS =
      DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").withZone(ZoneOffset.UTC);

  private TriggerJson() {}

  public static byte[] value(GeofenceTrigger t) {
    ObjectNode json = MAPPER.createObjectNode()
        .put("trigger_id", t.triggerId)
        .put("object_id", t.objectId)
        .put("fence_id", t.fenceId)
        .put("kind", t.kind.name())
        .put("event_time", time(t.eventTime));
    if (Double.isNaN(t.lon)) {
      json.putNull("lon").putNull("lat");
    } else {
      json.put("lon", t.lon).put("lat", t.lat);
    }
    json.put("fence_seq", t.fenceSeq).put("tenant", t.tenant).put("emitted_at", time(t.emittedAt))
        .put("cause", t.cause == null ? null : t.cause.label());
    try {
      return MAPPER.writeValueAsBytes(json);
    } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
      throw new IllegalStateException("a tree of strings and numbers always serializes", e);
    }
  }

  /** The record key: the object, so that one object's triggers keep their order in one partition. */
  public static byte[] key(GeofenceTrigger t) {
    return t.objectId.getBytes(StandardCharsets.UTF_8);
  }

  static String time(long epochMillis) {
    return UTC_MILLIS.format(Instant.ofEpochMilli(epochMillis));
  }
}

package dev.geofence.connectors.sink;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.geofence.connectors.model.GeofenceTrigger;
import dev.geofence.connectors.model.TriggerCause;
import dev.geofence.connectors.model.TriggerKind;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class TriggerJsonTest {

  private static final ObjectMapper JSON = new ObjectMapper();

  @Test
  void everyFieldReadsBackAsTheTableHasIt() throws Exception {
    SplittableRandom random = new SplittableRandom(7);
    for (int i = 0; i < 2000; i++) {
      long eventTime = random.nextLong(0, 4_102_444_800_000L); // to 2100
      long emittedAt = eventTime + random.nextInt(5000);
      String fence = "fence-" + random.nextInt(100);
      long fenceSeq = random.nextLong(1, 1 << 40);
      String tenant = random.nextBoolean() ? null : "tenant-ü";
      GeofenceTrigger t = switch (random.nextInt(10)) {
        case 0 -> GeofenceTrigger.exitOnDelete("o-" + i, "f \"" + i + "\"", eventTime, fenceSeq, emittedAt);
        case 1 -> new GeofenceTrigger("o-" + i, fence, TriggerKind.DWELL, TriggerCause.LOITERING, eventTime, Double.NaN, Double.NaN,
            fenceSeq, tenant, emittedAt);
        case 2 -> new GeofenceTrigger("o-" + i, fence, TriggerKind.EXIT, TriggerCause.SILENCE, eventTime, Double.NaN, Double.NaN,
            fenceSeq, tenant, emittedAt);
        // One in five without a cause: restored from the state of a release without causes.
        default -> new GeofenceTrigger("o-" + i, fence, random.nextBoolean() ? TriggerKind.ENTER : TriggerKind.EXIT,
            random.nextInt(5) == 0 ? null : TriggerCause.LOCATION, eventTime, random.nextDouble(-180, 180), random.nextDouble(-90, 90), fenceSeq, tenant, emittedAt);
      };

      JsonNode json = JSON.readTree(TriggerJson.value(t));
      assertThat(json.get("trigger_id").asText()).isEqualTo(t.triggerId);
      assertThat(json.get("object_id").asText()).isEqualTo(t.objectId);
      assertThat(json.get("fence_id").asText()).isEqualTo(t.fenceId);
      assertThat(json.get("kind").asText()).isEqualTo(t.kind.name());
      assertThat(Instant.parse(json.get("event_time").asText()).toEpochMilli()).isEqualTo(t.eventTime);
      assertThat(json.get("event_time").asText()).matches("\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d{3}Z");
      assertThat(Instant.parse(json.get("emitted_at").asText()).toEpochMilli()).isEqualTo(t.emittedAt);
      if (Double.isNaN(t.lon)) {
        assertThat(json.get("lon").isNull()).isTrue();
        assertThat(json.get("lat").isNull()).isTrue();
      } else {
        assertThat(json.get("lon").asDouble()).isEqualTo(t.lon);
        assertThat(json.get("lat").asDouble()).isEqualTo(t.lat);
      }
      assertThat(json.get("fence_seq").asLong()).isEqualTo(t.fenceSeq);
      assertThat(json.get("tenant").isNull() ? null : json.get("tenant").asText()).isEqualTo(t.tenant);
      assertThat(json.has("cause")).isTrue();
      assertThat(json.get("cause").isNull() ? null : json.get("cause").asText()).isEqualTo(t.cause == null ? null : t.cause.label());
      assertThat(new String(TriggerJson.key(t), StandardCharsets.UTF_8)).isEqualTo(t.objectId);
    }
  }

  /** The DWELL of the class's example, field by field as the docs show it. */
  @Test
  void aDwellSaysLoiteringAndHasNoPosition() throws Exception {
    long enteredAt = Instant.parse("2026-11-30T20:15:00.123Z").toEpochMilli();
    GeofenceTrigger dwell = new GeofenceTrigger("truck-7", "depot-3", TriggerKind.DWELL, TriggerCause.LOITERING,
        enteredAt + 600_000, Double.NaN, Double.NaN, 7, null, Instant.parse("2026-11-30T20:25:04.010Z").toEpochMilli());
    assertThat(new String(TriggerJson.value(dwell), StandardCharsets.UTF_8)).isEqualTo("{\"trigger_id\":\"" + dwell.triggerId + "\","
        + "\"object_id\":\"truck-7\",\"fence_id\":\"depot-3\",\"kind\":\"DWELL\",\"event_time\":\"2026-11-30T20:25:00.123Z\","
        + "\"lon\":null,\"lat\":null,\"fence_seq\":7,\"tenant\":null,\"emitted_at\":\"2026-11-30T20:25:04.010Z\","
        + "\"cause\":\"loitering\"}");
  }
}

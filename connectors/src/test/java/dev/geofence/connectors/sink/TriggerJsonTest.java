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
      GeofenceTrigger t = random.nextInt(10) == 0
          ? GeofenceTrigger.exitOnDelete("o-" + i, "f \"" + i + "\"", eventTime, random.nextLong(1, 1 << 40), emittedAt)
          : new GeofenceTrigger("o-" + i, "fence-" + random.nextInt(100), random.nextBoolean() ? TriggerKind.ENTER : TriggerKind.EXIT, TriggerCause.LOCATION,
              eventTime, random.nextDouble(-180, 180), random.nextDouble(-90, 90), random.nextLong(1, 1 << 40),
              random.nextBoolean() ? null : "tenant-ü", emittedAt);

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
      assertThat(new String(TriggerJson.key(t), StandardCharsets.UTF_8)).isEqualTo(t.objectId);
    }
  }
}

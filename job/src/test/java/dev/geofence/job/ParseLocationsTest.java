package dev.geofence.job;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.connectors.model.DeadLetter;
import dev.geofence.connectors.model.Location;
import dev.geofence.state.time.LocationTimePolicy;
import java.time.Duration;
import org.apache.flink.streaming.util.OneInputStreamOperatorTestHarness;
import org.apache.flink.streaming.util.ProcessFunctionTestHarnesses;
import org.junit.jupiter.api.Test;

class ParseLocationsTest {

  private static final long NOW = 1_764_500_000_000L;

  @Test
  void aLocationStampedBeyondTheSkewIsADeadLetterAndNotEmitted() throws Exception {
    ParseLocations parse = new ParseLocations(new LocationTimePolicy(Duration.ofMinutes(5), Duration.ofMinutes(1)));
    try (OneInputStreamOperatorTestHarness<String, Location> harness = ProcessFunctionTestHarnesses.forProcessFunction(parse)) {
      harness.setProcessingTime(NOW);
      harness.processElement(line("on-time", NOW - 10_000), 0);
      harness.processElement(line("ahead-within-skew", NOW + 60_000), 0);
      harness.processElement(line("2036", 2_100_000_000_000L), 0);
      harness.processElement(line("after-it", NOW + 1_000), 0);
      harness.processElement("{\"object_id\": \"broken\"", 0);

      assertThat(harness.extractOutputValues()).extracting(l -> l.objectId).containsExactly("on-time", "ahead-within-skew", "after-it");
      assertThat(harness.getSideOutput(ParseLocations.DEAD_LETTERS)).extracting(r -> r.getValue())
          .extracting(DeadLetter::toString)
          .satisfiesExactly(
              future -> assertThat(future).startsWith("ERROR location 2036@0 FUTURE_TIMESTAMP: stamped 2036-07-18T")
                  .endsWith("more than the maximum clock skew of 60000 ms ahead of 2025-11-30T10:53:20Z"),
              broken -> assertThat(broken).contains("MALFORMED_JSON"));
      DeadLetter future = harness.getSideOutput(ParseLocations.DEAD_LETTERS).peek().getValue();
      assertThat(future.eventTime).isEqualTo(2_100_000_000_000L);
      assertThat(future.payload).isEqualTo(line("2036", 2_100_000_000_000L));
    }
  }

  private static String line(String object, long ts) {
    return "{\"object_id\": \"" + object + "\", \"ts\": " + ts + ", \"lon\": 1.5, \"lat\": 2.5}";
  }
}

package dev.geofence.job;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.connectors.cdc.FenceSource;
import dev.geofence.connectors.cdc.FenceSourceOptions;
import dev.geofence.connectors.cdc.FenceTableColumns;
import dev.geofence.connectors.config.GeofenceOptions;
import dev.geofence.connectors.location.LocationSources;
import dev.geofence.connectors.location.MovingObjects;
import dev.geofence.connectors.model.Location;
import dev.geofence.connectors.sink.JdbcOutputs;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.apache.flink.api.common.eventtime.TimestampAssigner;
import org.apache.flink.api.common.eventtime.Watermark;
import org.apache.flink.api.common.eventtime.WatermarkGenerator;
import org.apache.flink.api.common.eventtime.WatermarkOutput;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.connector.jdbc.JdbcConnectionOptions;
import org.apache.flink.connector.jdbc.JdbcExecutionOptions;
import org.apache.flink.metrics.groups.UnregisteredMetricsGroup;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.graph.StreamNode;
import org.junit.jupiter.api.Test;

/** The job's graph as built, where its shape carries a guarantee. */
class GeofenceJobTest {

  /**
   * A generator's sequence numbers are its timeline; split over two readers, the second would
   * start at half of Long.MAX_VALUE and emit timestamps that overflow.
   */
  @Test
  void generatedLocationsAreReadByOneReaderAndOthersByAll() {
    assertThat(locationSourceParallelism(LocationSources.generator(new MovingObjects.Lines(new MovingObjects(10, 0, 0, 10, 10, 0, 1000))))).isEqualTo(1);
    assertThat(locationSourceParallelism(LocationSources.files("/tmp/locations", Duration.ofSeconds(1)))).isEqualTo(3);
  }

  /**
   * The location watermark trails the newest location by the configured out-of-orderness (the
   * least a location waits for its trigger), and by one second unless configured.
   */
  @Test
  void theLocationWatermarkTrailsTheNewestLocationByTheOutOfOrderness() {
    assertThat(watermarkAfter(JobSettings.defaults(), 10_000, 4_000)).isEqualTo(8_999);
    assertThat(watermarkAfter(JobSettings.builder().locationOutOfOrderness(Duration.ofMillis(200)).build(), 10_000, 4_000))
        .isEqualTo(9_799);
    assertThat(watermarkAfter(JobSettings.builder().locationOutOfOrderness(Duration.ZERO).build(), 10_000)).isEqualTo(9_999);
  }

  private static long watermarkAfter(JobSettings settings, long... times) {
    WatermarkStrategy<Location> strategy = GeofenceJob.locationTime(settings);
    WatermarkGenerator<Location> generator = strategy.createWatermarkGenerator(UnregisteredMetricsGroup::new);
    TimestampAssigner<Location> assigner = strategy.createTimestampAssigner(UnregisteredMetricsGroup::new);
    List<Long> emitted = new ArrayList<>();
    WatermarkOutput output = new WatermarkOutput() {
      @Override
      public void emitWatermark(Watermark watermark) {
        emitted.add(watermark.getTimestamp());
      }

      @Override
      public void markIdle() {}

      @Override
      public void markActive() {}
    };
    for (long time : times) {
      Location location = new Location("o", time, 1, 1, null);
      generator.onEvent(location, assigner.extractTimestamp(location, Long.MIN_VALUE), output);
    }
    generator.onPeriodicEmit(output);
    return emitted.get(emitted.size() - 1);
  }

  private static int locationSourceParallelism(Source<String, ?, ?> locations) {
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
    env.setParallelism(3);
    FenceSourceOptions source = FenceSourceOptions.builder().url("jdbc:postgresql://localhost:5432/fences").username("u").build();
    JdbcConnectionOptions sink = new JdbcConnectionOptions.JdbcConnectionOptionsBuilder()
        .withUrl("jdbc:postgresql://localhost:5432/fences").withDriverName("org.postgresql.Driver").build();
    JdbcExecutionOptions batches = JdbcExecutionOptions.defaults();
    GeofenceJob.build(env,
        new GeofenceJob.Endpoints(FenceSource.create(source), locations,
            JdbcOutputs.triggers(sink, batches), JdbcOutputs.presence(sink, batches), JdbcOutputs.deadLetters(sink, batches),
            JdbcOutputs.hydrationHistory(sink, batches, GeofenceOptions.HYDRATION_RETENTION.defaultValue()),
            JdbcOutputs.heartbeats(sink, FenceSource.heartbeatSql(FenceTableColumns.defaults())), Duration.ofSeconds(1), source),
        JobSettings.defaults());
    return env.getStreamGraph().getStreamNodes().stream()
        .filter(node -> node.getOperatorName().contains("Location lines"))
        .mapToInt(StreamNode::getParallelism).findFirst().orElseThrow();
  }
}

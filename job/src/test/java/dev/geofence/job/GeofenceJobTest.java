package dev.geofence.job;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.connectors.cdc.FenceSource;
import dev.geofence.connectors.cdc.FenceSourceOptions;
import dev.geofence.connectors.cdc.FenceTableColumns;
import dev.geofence.connectors.config.GeofenceOptions;
import dev.geofence.connectors.location.LocationSources;
import dev.geofence.connectors.location.MovingObjects;
import dev.geofence.connectors.sink.JdbcOutputs;
import java.time.Duration;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.connector.jdbc.JdbcConnectionOptions;
import org.apache.flink.connector.jdbc.JdbcExecutionOptions;
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
    assertThat(locationSourceParallelism(LocationSources.generator(new MovingObjects(10, 0, 0, 10, 10, 0, 1000), 10))).isEqualTo(1);
    assertThat(locationSourceParallelism(LocationSources.files("/tmp/locations", Duration.ofSeconds(1)))).isEqualTo(3);
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

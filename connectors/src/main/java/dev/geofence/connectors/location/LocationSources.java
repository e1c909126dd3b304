package dev.geofence.connectors.location;

import java.time.Duration;
import org.apache.flink.api.common.serialization.SimpleStringSchema;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.connector.file.src.FileSource;
import org.apache.flink.connector.file.src.reader.TextLineInputFormat;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.core.fs.Path;

/**
 * The location sources, all emitting JSON lines in the form {@link LocationJson} reads, so that
 * every source shares one parser and one dead-letter path.
 */
public final class LocationSources {

  private LocationSources() {}

  /**
   * JSON lines from a file, or from every file of a directory, watched for new files at the given
   * interval. A file is read once, when it appears; write it elsewhere and move it in.
   */
  public static Source<String, ?, ?> files(String path, Duration watchInterval) {
    return FileSource.forRecordStreamFormat(new TextLineInputFormat(), new Path(path))
        .monitorContinuously(watchInterval)
        .build();
  }

  /**
   * JSON lines from a Kafka topic, from the committed offsets (earliest when there are none). A
   * record with no value (a tombstone) carries no location and is skipped, as a blank line is.
   */
  public static Source<String, ?, ?> kafka(String bootstrapServers, String topic, String groupId) {
    return KafkaSource.<String>builder()
        .setBootstrapServers(bootstrapServers)
        .setTopics(topic)
        .setGroupId(groupId)
        .setStartingOffsets(OffsetsInitializer.committedOffsets(org.apache.kafka.clients.consumer.OffsetResetStrategy.EARLIEST))
        .setValueOnlyDeserializer(new ValueLines())
        .build();
  }

  /** A record's value as a line; none for a record with no value, which {@link SimpleStringSchema} fails the task on. */
  private static final class ValueLines extends SimpleStringSchema {
    private static final long serialVersionUID = 1L;

    @Override
    public String deserialize(byte[] message) {
      // Null: Flink's DeserializationSchema collects nothing for it.
      return message == null ? null : super.deserialize(message);
    }
  }

  /**
   * A fleet reporting in real time, for benchmarks; see {@link Fleet}. Not rate-limited: the fleet
   * paces itself to its locations' times.
   */
  public static Source<String, ?, ?> fleet(Fleet fleet) {
    return new DataGeneratorSource<>(fleet, Long.MAX_VALUE, RateLimiterStrategy.noOp(), Types.STRING);
  }

  /**
   * Moving objects for the demo and benchmarks; see {@link MovingObjects.Lines}. Not rate-limited:
   * the lines pace themselves to their locations' times.
   */
  public static Source<String, ?, ?> generator(MovingObjects.Lines lines) {
    return new DataGeneratorSource<>(lines, Long.MAX_VALUE, RateLimiterStrategy.noOp(), Types.STRING);
  }
}

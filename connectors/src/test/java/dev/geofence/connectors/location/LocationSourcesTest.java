package dev.geofence.connectors.location;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.connectors.kafka.KafkaBroker;
import dev.geofence.connectors.model.Location;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.util.CloseableIterator;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Each location source delivers the JSON lines it was given, read by a real Flink job. */
class LocationSourcesTest {

  @TempDir Path dir;

  private static final MovingObjects OBJECTS = new MovingObjects(7, 0, 0, 10, 10, 1_700_000_000_000L, 1000);

  @Test
  void kafkaTopicDeliversEveryLine() throws Exception {
    List<String> lines = lines(200);
    try (KafkaBroker kafka = KafkaBroker.start()) {
      Properties producer = kafka.clientProperties();
      try (KafkaProducer<String, String> out = new KafkaProducer<>(producer, new StringSerializer(), new StringSerializer())) {
        for (String line : lines) {
          out.send(new ProducerRecord<>("locations", line)).get();
          if (line.equals(lines.get(100))) {
            // A record with no value (a tombstone) is skipped; it failed the task on every replay.
            out.send(new ProducerRecord<>("locations", "o-1", null)).get();
          }
        }
      }
      assertThat(read(LocationSources.kafka(kafka.bootstrapServers(), "locations", "test"), lines.size())).containsExactlyElementsOf(lines);
    }
  }

  @Test
  void watchedDirectoryDeliversFilesAsTheyArrive() throws Exception {
    List<String> lines = lines(50);
    Path inbox = Files.createDirectories(dir.resolve("inbox"));
    Files.write(inbox.resolve("a.jsonl"), lines.subList(0, 20));
    Files.write(inbox.resolve("b.jsonl"), lines.subList(20, 50));
    assertThat(read(LocationSources.files(inbox.toString(), Duration.ofMillis(100)), lines.size()))
        .containsExactlyInAnyOrderElementsOf(lines);
  }

  @Test
  void generatorIsAPureFunctionOfTheSequence() throws Exception {
    List<String> expected = new ArrayList<>();
    for (long n = 0; n < 30; n++) {
      expected.add(OBJECTS.line(n));
    }
    assertThat(read(LocationSources.generator(new MovingObjects.Lines(OBJECTS)), 30)).containsExactlyInAnyOrderElementsOf(expected);
    for (String line : expected) {
      Location l = LocationJson.parse(line);
      assertThat(l.lon).isBetween(0.0, 10.0);
      assertThat(l.lat).isBetween(0.0, 10.0);
    }
  }

  /**
   * The timeline is never moved, ahead of the wall clock or not: each line is emitted as numbered
   * once the clock reaches its stamp, so a replay emits what the first run did.
   */
  @Test
  void aFixedTimelineEmitsEachLineAsNumberedWhenItsTimeComes() throws Exception {
    MovingObjects soon = new MovingObjects(7, 0, 0, 10, 10, System.currentTimeMillis() + 700, 1000);
    MovingObjects.Lines lines = new MovingObjects.Lines(soon);
    assertThat(lines.map(3L)).isEqualTo(soon.line(3));
    assertThat(System.currentTimeMillis()).isGreaterThanOrEqualTo(soon.location(3).timestamp);
    MovingObjects.Lines replay = new MovingObjects.Lines(soon);
    for (long n = 3; n < 10; n++) {
      assertThat(replay.map(n)).isEqualTo(soon.line(n));
    }
  }

  private static List<String> lines(int n) {
    List<String> lines = new ArrayList<>();
    for (long i = 0; i < n; i++) {
      lines.add(OBJECTS.line(i));
    }
    return lines;
  }

  private static List<String> read(Source<String, ?, ?> source, int count) throws Exception {
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
    env.setParallelism(1);
    List<String> result = new ArrayList<>();
    try (CloseableIterator<String> it = env.fromSource(source, WatermarkStrategy.noWatermarks(), "locations").executeAndCollect()) {
      while (result.size() < count && it.hasNext()) {
        result.add(it.next());
      }
    }
    return result;
  }
}

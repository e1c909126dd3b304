package dev.geofence.connectors.kafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.stream.Collectors;
import kafka.testkit.KafkaClusterTestKit;
import kafka.testkit.TestKitNodes;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A real single-node Kafka (KRaft, broker and controller in one) inside the test run, from Kafka's
 * own test kit; shared by the tests of every module that talks to Kafka.
 */
public final class KafkaBroker implements AutoCloseable {

  private final KafkaClusterTestKit cluster;

  private KafkaBroker(KafkaClusterTestKit cluster) {
    this.cluster = cluster;
  }

  public static KafkaBroker start() throws Exception {
    KafkaClusterTestKit cluster = new KafkaClusterTestKit.Builder(
        new TestKitNodes.Builder().setCoResident(true).setNumBrokerNodes(1).setNumControllerNodes(1).build())
        // One broker: the internal topics, transactions' included, must do with one replica.
        .setConfigProp("offsets.topic.replication.factor", "1")
        .setConfigProp("transaction.state.log.replication.factor", "1")
        .setConfigProp("transaction.state.log.min.isr", "1")
        .setConfigProp("group.initial.rebalance.delay.ms", "0")
        .build();
    try {
      cluster.format();
      cluster.startup();
      cluster.waitForReadyBrokers();
    } catch (Exception e) {
      cluster.close();
      throw e;
    }
    return new KafkaBroker(cluster);
  }

  public String bootstrapServers() {
    return cluster.clientProperties().getProperty("bootstrap.servers");
  }

  public Properties clientProperties() {
    return cluster.clientProperties();
  }

  public void createTopic(String name, int partitions) throws Exception {
    try (Admin admin = Admin.create(cluster.clientProperties())) {
      admin.createTopics(List.of(new NewTopic(name, partitions, (short) 1))).all().get();
    }
  }

  /**
   * Every record value of {@code topic} now, in partition order: with {@code committedOnly}, as a
   * {@code read_committed} consumer sees them (up to the last stable offset, aborted transactions
   * left out), else everything written, aborted transactions included.
   */
  public List<String> values(String topic, boolean committedOnly) {
    Properties config = cluster.clientProperties();
    config.setProperty("isolation.level", committedOnly ? "read_committed" : "read_uncommitted");
    config.setProperty("enable.auto.commit", "false");
    List<String> values = new ArrayList<>();
    try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(config, new StringDeserializer(), new StringDeserializer())) {
      Set<TopicPartition> partitions = consumer.partitionsFor(topic).stream()
          .map(p -> new TopicPartition(topic, p.partition())).collect(Collectors.toSet());
      consumer.assign(partitions);
      consumer.seekToBeginning(partitions);
      // For read_committed the end offsets are the last stable offsets.
      Map<TopicPartition, Long> end = consumer.endOffsets(partitions);
      long deadline = System.currentTimeMillis() + 30_000;
      while (partitions.stream().anyMatch(p -> consumer.position(p) < end.get(p))) {
        if (System.currentTimeMillis() > deadline) {
          throw new AssertionError("could not read " + topic + " to its end offsets " + end);
        }
        for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
          values.add(r.value());
        }
      }
    }
    return values;
  }

  @Override
  public void close() throws Exception {
    cluster.close();
  }
}

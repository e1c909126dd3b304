package dev.geofence.connectors.kafka;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
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
 * A real single-node Kafka (KRaft, broker and controller in one) for the tests of every module that
 * talks to Kafka: inside the test run, from Kafka's own test kit ({@link #start()}), or in a JVM
 * of its own that can be stopped and started again in place ({@link #startProcess}).
 */
public final class KafkaBroker implements AutoCloseable {

  /** One broker: the internal topics, transactions' included, must do with one replica. */
  private static final Map<String, String> ONE_NODE = Map.of(
      "offsets.topic.replication.factor", "1",
      "transaction.state.log.replication.factor", "1",
      "transaction.state.log.min.isr", "1",
      "group.initial.rebalance.delay.ms", "0");
  private static final Duration READY_PATIENCE = Duration.ofMinutes(2);

  private final String bootstrapServers;
  private final AutoCloseable server;
  /** The server when it runs in a JVM of its own, else null. */
  private final BrokerProcess process;

  private KafkaBroker(String bootstrapServers, AutoCloseable server, BrokerProcess process) {
    this.bootstrapServers = bootstrapServers;
    this.server = server;
    this.process = process;
  }

  /** A broker inside this JVM, from Kafka's test kit; it cannot be restarted. */
  public static KafkaBroker start() throws Exception {
    KafkaClusterTestKit.Builder builder = new KafkaClusterTestKit.Builder(
        new TestKitNodes.Builder().setCoResident(true).setNumBrokerNodes(1).setNumControllerNodes(1).build());
    ONE_NODE.forEach(builder::setConfigProp);
    KafkaClusterTestKit cluster = builder.build();
    try {
      cluster.format();
      cluster.startup();
      cluster.waitForReadyBrokers();
    } catch (Exception e) {
      cluster.close();
      throw e;
    }
    return new KafkaBroker(cluster.clientProperties().getProperty("bootstrap.servers"), cluster, null);
  }

  /**
   * A broker in a JVM of its own, its log directory under {@code dir}, on free ports kept for
   * every start: {@link #stop()} and {@link #startAgain()} restart it in place.
   */
  public static KafkaBroker startProcess(Path dir) throws Exception {
    BrokerProcess process = BrokerProcess.start(dir, ONE_NODE.entrySet().stream().map(e -> e.getKey() + "=" + e.getValue()).toList());
    KafkaBroker broker = new KafkaBroker("localhost:" + process.port(), process, process);
    try {
      broker.awaitReady();
    } catch (Exception e) {
      process.close();
      throw e;
    }
    return broker;
  }

  /** Stops the broker's process with SIGTERM, as an operator does, and waits until it has exited. */
  public void stop() throws InterruptedException {
    restartable().stop();
  }

  /** Starts the stopped broker again on its log directory and ports, and waits until clients reach it. */
  public void startAgain() throws Exception {
    restartable().startAgain();
    awaitReady();
  }

  private BrokerProcess restartable() {
    if (process == null) {
      throw new IllegalStateException("a broker of the test kit cannot restart: start it with KafkaBroker.startProcess");
    }
    return process;
  }

  /** Until the broker answers a client: it has registered with its controller and serves metadata. */
  private void awaitReady() throws Exception {
    long deadline = System.nanoTime() + READY_PATIENCE.toNanos();
    try (Admin admin = Admin.create(clientProperties())) {
      while (true) {
        try {
          if (!admin.describeCluster().nodes().get(5, TimeUnit.SECONDS).isEmpty()) {
            return;
          }
        } catch (ExecutionException | TimeoutException e) {
          // not up yet
        }
        if (!process.isAlive()) {
          throw new IllegalStateException("the Kafka server exited while starting:\n" + process.logTail());
        }
        if (System.nanoTime() > deadline) {
          throw new IllegalStateException("the Kafka server did not answer within " + READY_PATIENCE + ":\n" + process.logTail());
        }
        Thread.sleep(200);
      }
    }
  }

  public String bootstrapServers() {
    return bootstrapServers;
  }

  public Properties clientProperties() {
    Properties properties = new Properties();
    properties.setProperty("bootstrap.servers", bootstrapServers);
    return properties;
  }

  public void createTopic(String name, int partitions) throws Exception {
    try (Admin admin = Admin.create(clientProperties())) {
      admin.createTopics(List.of(new NewTopic(name, partitions, (short) 1))).all().get();
    }
  }

  /**
   * Every record value of {@code topic} now, in partition order: with {@code committedOnly}, as a
   * {@code read_committed} consumer sees them (up to the last stable offset, aborted transactions
   * left out), else everything written, aborted transactions included.
   */
  public List<String> values(String topic, boolean committedOnly) {
    Properties config = clientProperties();
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
    server.close();
  }
}

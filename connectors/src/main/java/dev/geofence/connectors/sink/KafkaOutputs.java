package dev.geofence.connectors.sink;

import dev.geofence.connectors.model.GeofenceTrigger;
import java.time.Duration;
import java.util.Properties;
import org.apache.flink.api.common.serialization.SerializationSchema;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;

/**
 * The Kafka sink of triggers: exactly once, through Kafka transactions that commit with each
 * checkpoint. A consumer reading with {@code isolation.level=read_committed} sees every trigger
 * once, after the checkpoint that covers it, also across failures and restores; one reading
 * uncommitted data may also see triggers of transactions that a failure aborted.
 */
public final class KafkaOutputs {

  /**
   * Default transaction timeout: the broker's default {@code transaction.max.timeout.ms}, the most
   * it accepts. A transaction stays open from one checkpoint to the next and through a recovery,
   * so this bounds the checkpoint interval plus the time to restart.
   */
  public static final Duration DEFAULT_TRANSACTION_TIMEOUT = Duration.ofMinutes(15);

  private KafkaOutputs() {}

  /**
   * @param transactionalIdPrefix unique per job among all writers to the Kafka cluster, and kept
   *     across restores of the same job, so that a restored job can abort its predecessor's
   *     lingering transactions
   */
  public static Sink<GeofenceTrigger> triggers(
      String bootstrapServers, String topic, String transactionalIdPrefix, Duration transactionTimeout) {
    require(bootstrapServers, "bootstrap servers");
    require(topic, "topic");
    require(transactionalIdPrefix, "transactional id prefix");
    if (transactionTimeout.isNegative() || transactionTimeout.isZero()) {
      throw new IllegalArgumentException("the Kafka transaction timeout must be positive, got " + transactionTimeout);
    }
    Properties producer = new Properties();
    producer.setProperty("transaction.timeout.ms", Long.toString(transactionTimeout.toMillis()));
    return KafkaSink.<GeofenceTrigger>builder()
        .setBootstrapServers(bootstrapServers)
        .setKafkaProducerConfig(producer)
        .setDeliveryGuarantee(DeliveryGuarantee.EXACTLY_ONCE)
        .setTransactionalIdPrefix(transactionalIdPrefix)
        .setRecordSerializer(KafkaRecordSerializationSchema.<GeofenceTrigger>builder()
            .setTopic(topic)
            .setKeySerializationSchema((SerializationSchema<GeofenceTrigger>) TriggerJson::key)
            .setValueSerializationSchema((SerializationSchema<GeofenceTrigger>) TriggerJson::value)
            .build())
        .build();
  }

  private static void require(String value, String what) {
    if (value == null || value.isBlank()) {
      throw new IllegalArgumentException("the Kafka triggers sink needs a " + what);
    }
  }
}

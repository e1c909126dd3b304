package dev.geofence.connectors.sink;

import dev.geofence.connectors.model.GeofenceTrigger;
import java.io.IOException;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import org.apache.flink.api.common.serialization.SerializationSchema;
import org.apache.flink.api.connector.sink2.Committer;
import org.apache.flink.api.connector.sink2.CommitterInitContext;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.StatefulSinkWriter;
import org.apache.flink.api.connector.sink2.SupportsCommitter;
import org.apache.flink.api.connector.sink2.SupportsWriterState;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.connector.kafka.sink.TwoPhaseCommittingStatefulSink;
import org.apache.flink.core.io.SimpleVersionedSerializer;
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

  /**
   * The Kafka triggers sink of a standby instance (a blue/green deploy's new one): restored
   * without the writer state of the savepoint it starts from. That state names the running
   * instance's transactional id prefix, and the Kafka writer aborts the lingering transactions of a
   * recovered prefix that differs from its own, which here would fence the running instance's open
   * ones. The standby's own prefix (which must differ from the running one's) it still cleans up.
   */
  public static Sink<GeofenceTrigger> forStandby(Sink<GeofenceTrigger> kafkaSink) {
    if (!(kafkaSink instanceof TwoPhaseCommittingStatefulSink<GeofenceTrigger, ?, ?> kafka)) {
      throw new IllegalArgumentException("a standby's triggers topic needs a Kafka sink, got " + kafkaSink.getClass().getName());
    }
    return ownTransactionsOnly(kafka);
  }

  private static <S, C> Sink<GeofenceTrigger> ownTransactionsOnly(TwoPhaseCommittingStatefulSink<GeofenceTrigger, S, C> kafka) {
    return new OwnTransactionsOnly<>(kafka);
  }

  private static final class OwnTransactionsOnly<S, C>
      implements Sink<GeofenceTrigger>, SupportsCommitter<C>, SupportsWriterState<GeofenceTrigger, S> {

    private static final long serialVersionUID = 1L;

    private final TwoPhaseCommittingStatefulSink<GeofenceTrigger, S, C> kafka;

    OwnTransactionsOnly(TwoPhaseCommittingStatefulSink<GeofenceTrigger, S, C> kafka) {
      this.kafka = kafka;
    }

    @Override
    @Deprecated
    public SinkWriter<GeofenceTrigger> createWriter(InitContext context) throws IOException {
      return kafka.createWriter(context);
    }

    @Override
    public SinkWriter<GeofenceTrigger> createWriter(WriterInitContext context) throws IOException {
      return kafka.createWriter(context);
    }

    @Override
    public StatefulSinkWriter<GeofenceTrigger, S> restoreWriter(WriterInitContext context, Collection<S> recovered)
        throws IOException {
      return kafka.restoreWriter(context, List.of());
    }

    @Override
    public SimpleVersionedSerializer<S> getWriterStateSerializer() {
      return kafka.getWriterStateSerializer();
    }

    @Override
    public Committer<C> createCommitter(CommitterInitContext context) throws IOException {
      return kafka.createCommitter(context);
    }

    @Override
    public SimpleVersionedSerializer<C> getCommittableSerializer() {
      return kafka.getCommittableSerializer();
    }
  }

  private static void require(String value, String what) {
    if (value == null || value.isBlank()) {
      throw new IllegalArgumentException("the Kafka triggers sink needs a " + what);
    }
  }
}

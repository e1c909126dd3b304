package dev.geofence.connectors.sink;

import dev.geofence.connectors.model.GeofenceTrigger;
import dev.geofence.connectors.model.TriggerKind;
import java.io.IOException;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ScheduledFuture;
import org.apache.flink.api.common.operators.ProcessingTimeService;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.connector.jdbc.JdbcConnectionOptions;
import org.apache.flink.connector.jdbc.JdbcExecutionOptions;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The sink of {@code geofence_presence}: an ENTER upserts the row of (object, fence), an EXIT
 * deletes it, and a DWELL changes nothing. A batch is first reduced to the last ENTER or EXIT per
 * (object, fence), which alone decides the row (each sets or removes all of it), and is then
 * written as two statements over arrays in one transaction: one DELETE of the exits and one
 * multi-row upsert of the entries.
 * Flink's JDBC sink cannot do this: it executes one statement per element, in order, so an
 * ordered ENTER/EXIT stream costs a statement per row (a CTE, which the driver cannot rewrite
 * into a multi-row statement).
 *
 * <p>At least once, like the other sinks: every checkpoint flushes what waits, and a replay
 * rewrites rows to the same state. A write goes when {@link JdbcExecutionOptions#getBatchSize()}
 * rows wait, when the oldest has waited {@link JdbcExecutionOptions#getBatchIntervalMs()} (timers
 * on the task thread, so the writer needs no lock), or at a checkpoint; a failed write is retried
 * {@link JdbcExecutionOptions#getMaxRetries()} times on a new connection, then fails the job.
 */
final class PresenceSink implements Sink<GeofenceTrigger> {

  private static final long serialVersionUID = 1L;

  static final String DELETE_EXITS =
      "DELETE FROM geofence_presence p USING unnest(?::text[], ?::text[]) AS x(object_id, fence_id)"
          + " WHERE p.object_id = x.object_id AND p.fence_id = x.fence_id";

  static final String UPSERT_ENTRIES =
      "INSERT INTO geofence_presence (object_id, fence_id, entered_at, fence_seq, tenant)"
          + " SELECT * FROM unnest(?::text[], ?::text[], ?::timestamptz[], ?::bigint[], ?::text[])"
          + " ON CONFLICT (object_id, fence_id) DO UPDATE SET entered_at = excluded.entered_at,"
          + " fence_seq = excluded.fence_seq, tenant = excluded.tenant";

  private final JdbcConnectionOptions connection;
  private final JdbcExecutionOptions execution;

  PresenceSink(JdbcConnectionOptions connection, JdbcExecutionOptions execution) {
    this.connection = connection;
    this.execution = execution;
  }

  @Override
  public SinkWriter<GeofenceTrigger> createWriter(WriterInitContext context) {
    return new Writer(connection, execution, context.getProcessingTimeService());
  }

  @Override
  @Deprecated
  public SinkWriter<GeofenceTrigger> createWriter(InitContext context) {
    return new Writer(connection, execution, context.getProcessingTimeService());
  }

  /** The (object, fence) a presence row is keyed by. */
  private record Key(String objectId, String fenceId) {}

  static final class Writer implements SinkWriter<GeofenceTrigger> {

    private static final Logger LOG = LoggerFactory.getLogger(Writer.class);

    private final JdbcConnectionOptions options;
    private final JdbcExecutionOptions execution;
    private final ProcessingTimeService time;
    /** The last ENTER or EXIT of each (object, fence) since the last write. */
    private final Map<Key, GeofenceTrigger> waiting = new LinkedHashMap<>();
    private int received;
    private ScheduledFuture<?> timer;
    private Connection connection;

    Writer(JdbcConnectionOptions options, JdbcExecutionOptions execution, ProcessingTimeService time) {
      this.options = options;
      this.execution = execution;
      this.time = time;
    }

    @Override
    public void write(GeofenceTrigger trigger, Context context) throws IOException {
      // A DWELL says the object is still inside: the row its ENTER wrote stays as it is, and the
      // ENTER or EXIT waiting for the key still decides it (a DWELL after an EXIT brings no row back).
      if (trigger.kind == TriggerKind.DWELL) {
        return;
      }
      waiting.put(new Key(trigger.objectId, trigger.fenceId), trigger);
      received++;
      // Counted as received, not as distinct keys: a batch's size bounds how long rows wait too.
      if (received >= execution.getBatchSize()) {
        flush(false);
      } else if (timer == null && execution.getBatchIntervalMs() > 0) {
        timer = time.registerTimer(time.getCurrentProcessingTime() + execution.getBatchIntervalMs(), t -> {
          timer = null;
          flush(false);
        });
      }
    }

    @Override
    public void flush(boolean endOfInput) throws IOException {
      if (waiting.isEmpty()) {
        return;
      }
      for (int attempt = 0; ; attempt++) {
        try {
          writeWaiting();
          break;
        } catch (SQLException e) {
          closeConnection();
          if (attempt >= execution.getMaxRetries()) {
            throw new IOException("writing " + waiting.size() + " presence rows failed after " + (attempt + 1) + " attempts", e);
          }
          LOG.warn("Writing {} presence rows failed (attempt {} of {}), trying again on a new connection: {}",
              waiting.size(), attempt + 1, execution.getMaxRetries() + 1, e.getMessage());
          try {
            Thread.sleep(1000L * (attempt + 1));
          } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted while retrying a presence write", interrupted);
          }
        }
      }
      waiting.clear();
      received = 0;
    }

    private void writeWaiting() throws SQLException {
      List<String> exitObjects = new ArrayList<>();
      List<String> exitFences = new ArrayList<>();
      List<String> objects = new ArrayList<>();
      List<String> fences = new ArrayList<>();
      List<Timestamp> since = new ArrayList<>();
      List<Long> seqs = new ArrayList<>();
      List<String> tenants = new ArrayList<>();
      for (GeofenceTrigger t : waiting.values()) {
        if (t.kind == TriggerKind.EXIT) {
          exitObjects.add(t.objectId);
          exitFences.add(t.fenceId);
        } else {
          objects.add(t.objectId);
          fences.add(t.fenceId);
          since.add(new Timestamp(t.eventTime));
          seqs.add(t.fenceSeq);
          tenants.add(t.tenant);
        }
      }
      Connection c = connection();
      try {
        if (!exitObjects.isEmpty()) {
          try (PreparedStatement s = c.prepareStatement(DELETE_EXITS)) {
            s.setArray(1, c.createArrayOf("text", exitObjects.toArray()));
            s.setArray(2, c.createArrayOf("text", exitFences.toArray()));
            s.executeUpdate();
          }
        }
        if (!objects.isEmpty()) {
          try (PreparedStatement s = c.prepareStatement(UPSERT_ENTRIES)) {
            s.setArray(1, c.createArrayOf("text", objects.toArray()));
            s.setArray(2, c.createArrayOf("text", fences.toArray()));
            s.setArray(3, c.createArrayOf("timestamptz", since.toArray()));
            s.setArray(4, c.createArrayOf("bigint", seqs.toArray()));
            s.setArray(5, c.createArrayOf("text", tenants.toArray()));
            s.executeUpdate();
          }
        }
        c.commit();
      } catch (SQLException e) {
        try {
          c.rollback();
        } catch (SQLException broken) {
          e.addSuppressed(broken);
        }
        throw e;
      }
    }

    private Connection connection() throws SQLException {
      if (connection == null) {
        connection = JdbcOutputs.connect(options);
        connection.setAutoCommit(false);
      }
      return connection;
    }

    private void closeConnection() {
      if (connection != null) {
        try {
          connection.close();
        } catch (SQLException e) {
          LOG.debug("Closing a failed presence connection", e);
        }
        connection = null;
      }
    }

    @Override
    public void close() throws Exception {
      if (timer != null) {
        timer.cancel(false);
      }
      closeConnection();
    }
  }
}

package dev.geofence.connectors.sink;

import dev.geofence.connectors.model.DeadLetter;
import dev.geofence.connectors.model.GeofenceTrigger;
import dev.geofence.connectors.model.HydrationEpisode;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.sql.Types;
import java.time.Duration;
import java.util.Locale;
import java.util.Properties;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.connector.jdbc.JdbcConnectionOptions;
import org.apache.flink.connector.jdbc.JdbcExecutionOptions;
import org.apache.flink.connector.jdbc.JdbcStatementBuilder;
import org.apache.flink.connector.jdbc.core.datastream.sink.JdbcSink;

/**
 * JDBC sinks for the output tables of {@code docker/sql/sink/geofence-outputs.sql}: triggers,
 * presence, dead letters, hydration history, and the source's heartbeat row. Every
 * statement is an upsert (or a delete) on the table's key, so the at-least-once delivery of a
 * replay after a restore rewrites rows instead of duplicating them. Triggers and dead letters are
 * single-row INSERTs, which the PostgreSQL driver sends as multi-row ones when the URL has {@code
 * reWriteBatchedInserts} ({@link #withBatchedInserts}); presence has a writer of its own.
 */
public final class JdbcOutputs {

  static final String UPSERT_TRIGGER =
      "INSERT INTO geofence_triggers (trigger_id, object_id, fence_id, kind, event_time, lon, lat, fence_seq, tenant, emitted_at,"
          + " cause) VALUES (?::uuid, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (trigger_id) DO NOTHING";

  static final String UPSERT_DEAD_LETTER =
      "INSERT INTO geofence_dead_letters (letter_id, source, key, seq, severity, reason, detail, payload, event_time, recorded_at)"
          + " VALUES (?::uuid, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (letter_id) DO NOTHING";

  /**
   * An upsert on the episode's key that also prunes rows past the retention period, so the table
   * keeps itself in bounds without a job of its own.
   */
  static final String UPSERT_HYDRATION_EPISODE =
      "WITH pruned AS (DELETE FROM hydration_history WHERE installed_at < now() - ?::interval)"
          + " INSERT INTO hydration_history (job_name, job_id, subtask, attempt, key_group_start, key_group_end, start_mode,"
          + " restored_from, installed_at, restored_at, indexed_at, hydrated_at, restored_lsn, restored_commit_time,"
          + " edits_replayed, edits_coalesced, gap_check, gap_reason, buckets_reread, reread_reason, fences_loaded, fences_expected,"
          + " checksum_match, peak_heap_bytes, catchup_backlog, catchup_path, catchup_reason, catchup_replay_estimate_ms,"
          + " catchup_read_estimate_ms, catchup_load_estimate_ms)"
          + " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
          + " ON CONFLICT (job_name, subtask, installed_at) DO UPDATE SET job_id = excluded.job_id, attempt = excluded.attempt,"
          + " key_group_start = excluded.key_group_start, key_group_end = excluded.key_group_end, start_mode = excluded.start_mode,"
          + " restored_from = excluded.restored_from, restored_at = excluded.restored_at, indexed_at = excluded.indexed_at,"
          + " hydrated_at = excluded.hydrated_at, restored_lsn = excluded.restored_lsn,"
          + " restored_commit_time = excluded.restored_commit_time, edits_replayed = excluded.edits_replayed,"
          + " edits_coalesced = excluded.edits_coalesced, gap_check = excluded.gap_check, gap_reason = excluded.gap_reason,"
          + " buckets_reread = excluded.buckets_reread, reread_reason = excluded.reread_reason,"
          + " fences_loaded = excluded.fences_loaded, fences_expected = excluded.fences_expected,"
          + " checksum_match = excluded.checksum_match, peak_heap_bytes = excluded.peak_heap_bytes,"
          + " catchup_backlog = excluded.catchup_backlog, catchup_path = excluded.catchup_path,"
          + " catchup_reason = excluded.catchup_reason, catchup_replay_estimate_ms = excluded.catchup_replay_estimate_ms,"
          + " catchup_read_estimate_ms = excluded.catchup_read_estimate_ms,"
          + " catchup_load_estimate_ms = excluded.catchup_load_estimate_ms";

  private JdbcOutputs() {}

  /** Hydration episodes, one row per (job name, subtask, installed at); older rows are pruned. */
  public static Sink<HydrationEpisode> hydrationHistory(
      JdbcConnectionOptions connection, JdbcExecutionOptions execution, Duration retention) {
    String interval = interval(retention);
    return sink(UPSERT_HYDRATION_EPISODE, (s, e) -> bindEpisode(s, e, interval), connection, execution);
  }

  /** A retention as a PostgreSQL interval, to the millisecond (500 ms stays 500 ms). */
  static String interval(Duration retention) {
    if (retention.toMillis() < 1) {
      throw new IllegalArgumentException("the hydration history retention must be at least 1 ms, got " + retention.toMillis() + " ms");
    }
    // Seconds with a fraction: a milliseconds field overflows PostgreSQL's at about 25 days.
    long millis = retention.toMillis();
    return String.format(Locale.ROOT, "%d.%03d seconds", millis / 1000, millis % 1000);
  }

  public static Sink<GeofenceTrigger> triggers(JdbcConnectionOptions connection, JdbcExecutionOptions execution) {
    return sink(UPSERT_TRIGGER, JdbcOutputs::bindTrigger, connection, execution);
  }

  /** Presence rows: each batch reduced to the last ENTER or EXIT per (object, fence); see {@link PresenceSink}. */
  public static Sink<GeofenceTrigger> presence(JdbcConnectionOptions connection, JdbcExecutionOptions execution) {
    return new PresenceSink(connection, execution);
  }

  /**
   * How the output sinks batch their writes: a write goes when {@code batchSize} rows wait, when
   * the oldest has waited {@code interval} (never, if zero), or at a checkpoint.
   */
  public static JdbcExecutionOptions batches(int batchSize, Duration interval) {
    if (batchSize < 1) {
      throw new IllegalArgumentException("the sink batch size must be at least 1, got " + batchSize);
    }
    if (interval.isNegative()) {
      throw new IllegalArgumentException("the sink batch interval must not be negative, got " + interval.toMillis() + " ms");
    }
    return JdbcExecutionOptions.builder().withBatchSize(batchSize).withBatchIntervalMs(interval.toMillis()).build();
  }

  /**
   * A PostgreSQL URL with the driver's {@code reWriteBatchedInserts} on, unless the URL sets it
   * itself: a batch of single-row INSERTs then travels as multi-row INSERTs, a round trip and a
   * plan per many rows instead of per row. Other URLs are returned as they are.
   */
  public static String withBatchedInserts(String url) {
    if (!url.startsWith("jdbc:postgresql:") || url.toLowerCase(Locale.ROOT).contains("rewritebatchedinserts=")) {
      return url;
    }
    return url + (url.contains("?") ? "&" : "?") + "reWriteBatchedInserts=true";
  }

  /** A connection to the output database as {@code options} describe it, outside Flink's JDBC sinks. */
  public static Connection connect(JdbcConnectionOptions options) throws SQLException {
    Properties properties = new Properties();
    properties.putAll(options.getProperties());
    options.getUsername().ifPresent(user -> properties.setProperty("user", user));
    options.getPassword().ifPresent(password -> properties.setProperty("password", password));
    return DriverManager.getConnection(options.getDbURL(), properties);
  }

  public static Sink<DeadLetter> deadLetters(JdbcConnectionOptions connection, JdbcExecutionOptions execution) {
    return sink(UPSERT_DEAD_LETTER, JdbcOutputs::bindDeadLetter, connection, execution);
  }

  private static <T> Sink<T> sink(
      String sql, JdbcStatementBuilder<T> binder, JdbcConnectionOptions connection, JdbcExecutionOptions execution) {
    return JdbcSink.<T>builder().withExecutionOptions(execution).withQueryStatement(sql, binder).buildAtLeastOnce(connection);
  }

  /**
   * Writes the source's heartbeat row once per element: the job feeds it a tick per heartbeat
   * interval, so the fence stream carries a commit time even while no fence changes.
   */
  public static Sink<Long> heartbeats(JdbcConnectionOptions sourceDatabase, String heartbeatSql) {
    return sink(heartbeatSql, (statement, tick) -> { }, sourceDatabase,
        JdbcExecutionOptions.builder().withBatchSize(1).withMaxRetries(3).build());
  }

  static void bindEpisode(PreparedStatement s, HydrationEpisode e, String retention) throws SQLException {
    int i = 1;
    s.setString(i++, retention);
    s.setString(i++, e.jobName);
    s.setString(i++, e.jobId);
    s.setInt(i++, e.subtask);
    s.setInt(i++, e.attempt);
    s.setInt(i++, e.keyGroupStart);
    s.setInt(i++, e.keyGroupEnd);
    s.setString(i++, e.startMode == null ? null : e.startMode.label());
    s.setString(i++, e.restoredFrom);
    s.setTimestamp(i++, new Timestamp(e.installedAt));
    setTime(s, i++, e.restoredAt);
    setTime(s, i++, e.indexedAt);
    setTime(s, i++, e.hydratedAt);
    s.setString(i++, e.restoredLsn);
    setTime(s, i++, e.restoredCommitTime);
    s.setLong(i++, e.editsReplayed);
    s.setLong(i++, e.editsCoalesced);
    s.setString(i++, e.gapCheck == null ? null : e.gapCheck.label());
    s.setString(i++, e.gapReason);
    s.setLong(i++, e.bucketsReread);
    s.setString(i++, e.rereadReason);
    s.setLong(i++, e.fencesLoaded);
    s.setObject(i++, e.fencesExpected, Types.BIGINT);
    s.setObject(i++, e.checksumMatch, Types.BOOLEAN);
    s.setLong(i++, e.peakHeapBytes);
    s.setObject(i++, e.catchupBacklog, Types.BIGINT);
    s.setString(i++, e.catchupPath);
    s.setString(i++, e.catchupReason);
    s.setObject(i++, e.catchupReplayEstimateMs, Types.BIGINT);
    s.setObject(i++, e.catchupReadEstimateMs, Types.BIGINT);
    s.setObject(i, e.catchupLoadEstimateMs, Types.BIGINT);
  }

  private static void setTime(PreparedStatement s, int index, long millis) throws SQLException {
    if (millis == 0) {
      s.setNull(index, Types.TIMESTAMP);
    } else {
      s.setTimestamp(index, new Timestamp(millis));
    }
  }

  static void bindTrigger(PreparedStatement s, GeofenceTrigger t) throws SQLException {
    s.setString(1, t.triggerId);
    s.setString(2, t.objectId);
    s.setString(3, t.fenceId);
    s.setString(4, t.kind.name());
    s.setTimestamp(5, new Timestamp(t.eventTime));
    setDouble(s, 6, t.lon);
    setDouble(s, 7, t.lat);
    s.setLong(8, t.fenceSeq);
    s.setString(9, t.tenant);
    s.setTimestamp(10, new Timestamp(t.emittedAt));
    s.setString(11, t.cause == null ? null : t.cause.label());
  }

  static void bindDeadLetter(PreparedStatement s, DeadLetter d) throws SQLException {
    s.setString(1, d.letterId);
    s.setString(2, d.source);
    s.setString(3, d.key);
    s.setLong(4, d.seq);
    s.setString(5, d.severity);
    s.setString(6, d.reason);
    s.setString(7, d.detail);
    s.setString(8, d.payload);
    setTime(s, 9, d.eventTime);
    s.setTimestamp(10, new Timestamp(d.recordedAt));
  }

  private static void setDouble(PreparedStatement s, int index, double value) throws SQLException {
    if (Double.isNaN(value)) {
      s.setNull(index, Types.DOUBLE);
    } else {
      s.setDouble(index, value);
    }
  }
}

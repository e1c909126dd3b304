package dev.geofence.connectors.cdc;

import java.util.Properties;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.cdc.connectors.base.options.StartupOptions;
import org.apache.flink.cdc.connectors.postgres.source.PostgresSourceBuilder.PostgresIncrementalSource;

/**
 * The Flink CDC Postgres incremental source of fence changes: the logical replication stream
 * through {@code pgoutput} and a named slot, for the fences, tombstones, bucket fingerprint and
 * heartbeat tables. It never snapshots the tables: a fresh start streams from the slot (created
 * if missing), and each subtask of the fence index reads its own buckets of the table itself, in
 * parallel, once the slot exists; the stream then redelivers what the reads saw (ignored by seq),
 * and nothing committed after them is lost. A restored source resumes from its offset.
 *
 * <p>The job writes the heartbeat row itself ({@link #heartbeatSql}, on a timer of its own) and
 * reads it back here: Debezium's {@code heartbeat.action.query} would do the same, but only after
 * the stream has carried a first message, which an idle fence table never sends.
 */
public final class FenceSource {

  private FenceSource() {}

  /** The heartbeat row write: its commit time advances the fence clock while fences are idle. */
  public static String heartbeatSql(FenceTableColumns columns) {
    return "INSERT INTO " + columns.qualified(columns.heartbeatTable()) + " (id, beat_at) VALUES (1, now())"
        + " ON CONFLICT (id) DO UPDATE SET beat_at = excluded.beat_at";
  }

  /** Flink CDC's Postgres source of the fence tables, which never logs the password (see {@link PasswordSafeSource}). */
  public static Source<FenceChange, ?, ?> create(FenceSourceOptions options) {
    FenceTableColumns columns = options.columns();
    String schema = columns.schema();
    Properties debezium = new Properties();
    // The migration creates the publication. Debezium's "filtered" mode would narrow it to one
    // table at a time during the snapshot (FLINK-38907), and FOR ALL TABLES needs a superuser.
    debezium.setProperty("publication.autocreate.mode", "disabled");
    debezium.setProperty("publication.name", options.publicationName());
    // A restored source asks for the slot while PostgreSQL may still count it active for the job
    // before (its walsender not yet gone): Debezium retries, by default after 10 s, which was most
    // of a deploy's restore. Asked every 200 ms instead, with the same half minute of patience.
    debezium.setProperty("slot.retry.delay.ms", "200");
    debezium.setProperty("slot.max.retries", "150");
    // Debezium waits this long whenever it finds no change queued, and the stream is mostly
    // heartbeats, so its default of 500 ms was a share of every trigger's delay that only this wait
    // made (bench/run job, fleet at 10,000 locations/s, 200 ms lags: p99 1.89 s, 0.90 s at 50 ms).
    debezium.setProperty("poll.interval.ms", "50");
    // The job reads a delete from its tombstone row (ADR 0012). The tombstone Debezium sends after a delete,
    // for Kafka's log compaction, is of no use here: Flink CDC logs each one at INFO as an
    // "unknown element", a kilobyte of log per deleted fence, and counts it in the source's
    // numRecordsInErrors, which then grows with every delete as if records were lost. Flink CDC's
    // MySQL and Oracle sources turn them off the same way; its Postgres source does not.
    debezium.setProperty("tombstones.on.delete", "false");
    // A fence's own dwell delay is an interval column: as microseconds (Debezium's default, said
    // here because the deserializer reads that and the rebuilds' reads compute the same number).
    debezium.setProperty("interval.handling.mode", "numeric");
    // Whatever the user passed through wins,
    debezium.putAll(options.debeziumProperties());
    // except the value Debezium puts in place of a column an update left unchanged and PostgreSQL
    // keeps out of line (a geometry over about 2 KB), which the deserializer recognises.
    debezium.setProperty("unavailable.value.placeholder", FenceChangeDeserializer.UNCHANGED);
    return new PasswordSafeSource<>(PostgresIncrementalSource.<FenceChange>builder()
        .hostname(options.hostname())
        .port(options.port())
        .database(options.database())
        .schemaList(schema)
        .tableList(schema + "." + columns.fencesTable(), schema + "." + columns.bucketStatsTable(),
            schema + "." + columns.heartbeatTable(), schema + "." + columns.tombstonesTable())
        .username(options.username())
        .password(options.password())
        .slotName(options.slotName())
        .decodingPluginName("pgoutput")
        .startupOptions(StartupOptions.committed())
        .heartbeatInterval(options.heartbeatInterval())
        // Confirm a position to the slot only three checkpoints after it completed (the SQL
        // connector's default; the builder's is 0), so a restore of a recent checkpoint can still
        // replay from the slot.
        .lsnCommitCheckpointsDelay(3)
        .debeziumProperties(debezium)
        .deserializer(new FenceChangeDeserializer(columns))
        .build());
  }
}

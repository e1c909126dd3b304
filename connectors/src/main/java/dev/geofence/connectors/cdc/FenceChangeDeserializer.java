package dev.geofence.connectors.cdc;

import dev.geofence.connectors.config.GeofenceOptions;
import io.debezium.time.MicroDuration;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Objects;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.cdc.debezium.DebeziumDeserializationSchema;
import org.apache.flink.util.Collector;
import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.source.SourceRecord;

/**
 * Reads Debezium's Postgres change records for the fences table (its columns as {@link
 * FenceTableColumns} maps them), its tombstones, the bucket fingerprints and the heartbeat table
 * into {@link FenceChange}s. (The incremental source keeps Debezium's own heartbeat events to
 * itself, so the heartbeat is a real row the job writes and this reads back; see {@link
 * FenceSource}.) The geometry is passed on still encoded: PostGIS {@code geometry} arrives as a
 * struct holding EWKB, {@code bytea} as bytes, text as a string.
 *
 * <p>A delete is read from the tombstone the migration writes in the same transaction, which holds
 * its version ({@code old seq + 1}); the fence row's delete record is skipped, so the job works
 * under any replica identity of the fences table (the migration sets its primary key: no old row
 * in the WAL for any update).
 */
public final class FenceChangeDeserializer implements DebeziumDeserializationSchema<FenceChange> {

  private static final long serialVersionUID = 1L;

  /**
   * What Debezium gives for a {@code bytea} or text column an update left unchanged and PostgreSQL
   * keeps out of line ({@link FenceSource} sets it; a PostGIS geometry comes as null instead): the
   * logical decoding of such an update carries no value for the column under the replica identity
   * the migration sets, only that it is unchanged.
   */
  static final String UNCHANGED = "__debezium_unavailable_value";

  private static final byte[] UNCHANGED_BYTES = UNCHANGED.getBytes(StandardCharsets.UTF_8);

  private final FenceTableColumns columns;

  public FenceChangeDeserializer(FenceTableColumns columns) {
    this.columns = Objects.requireNonNull(columns);
  }

  @Override
  public void deserialize(SourceRecord record, Collector<FenceChange> out) {
    if (!(record.value() instanceof Struct)) {
      return; // a tombstone message for compaction: carries nothing
    }
    Struct value = (Struct) record.value();
    Struct source = value.getStruct("source");
    String table = source.getString("table");
    String op = value.getString("op");
    boolean snapshot = "r".equals(op);
    long lsn = snapshot ? 0 : optionalLong(source, "lsn");
    long commitTime = snapshot ? 0 : optionalLong(source, "ts_ms");

    if (columns.tombstonesTable().equals(table)) {
      // A fence's delete is read from its tombstone, written in the delete's own transaction with
      // the delete's version: the fence row's own delete carries only the primary key under the
      // replica identity the migration sets (no old row in the WAL or the stream for any update),
      // so its seq is not there. A re-delete of a re-created id updates the tombstone. In a
      // snapshot, the tombstones tell the versions of fences deleted before the job began.
      Struct row = value.getStruct("after");
      if (row != null) {
        FenceChange change = new FenceChange();
        change.kind = FenceChange.Kind.FENCE;
        change.delete = true;
        change.snapshot = snapshot;
        change.fenceId = row.getString("id");
        change.seq = row.getInt64("seq");
        change.lsn = lsn;
        change.commitTime = commitTime;
        out.collect(change);
      }
      return;
    }
    if (columns.heartbeatTable().equals(table)) {
      // The stream has reached its commit time; its horizon, if the migration gave the table one,
      // bounds what a restore of the state at this position must read again.
      if (!snapshot) {
        Struct row = value.getStruct("after");
        boolean hasHorizon = row != null && row.schema().field("horizon") != null && row.get("horizon") != null;
        out.collect(FenceChange.heartbeat(commitTime, lsn, hasHorizon ? row.getInt64("horizon") : 0));
      }
      return;
    }
    if (columns.bucketStatsTable().equals(table)) {
      Struct row = value.getStruct("after");
      if (row == null) {
        return;
      }
      FenceChange change = new FenceChange();
      change.kind = FenceChange.Kind.BUCKET_STATS;
      change.bucket = row.getInt32("bucket");
      // The row's version, carried as its seq: a rebuilt bucket ignores older fingerprints.
      change.seq = row.schema().field("version") == null ? 0 : row.getInt64("version");
      change.fenceCount = row.getInt64("fence_count");
      change.checksum = row.getInt64("checksum");
      change.lsn = lsn;
      change.commitTime = commitTime;
      change.snapshot = snapshot;
      out.collect(change);
      return;
    }
    if (!columns.fencesTable().equals(table)) {
      return;
    }
    FenceChange change = new FenceChange();
    change.kind = FenceChange.Kind.FENCE;
    change.lsn = lsn;
    change.commitTime = commitTime;
    change.snapshot = snapshot;
    if ("d".equals(op)) {
      return; // the delete arrives as its tombstone (above)
    }
    Struct after = value.getStruct("after");
    change.fenceId = after.get(columns.id()).toString();
    change.seq = ((Number) after.get(columns.seq())).longValue();
    readGeometry(after, change);
    // An update's geometry that is absent (the placeholder, or null: a PostGIS geometry) is one the
    // update did not change; the job keeps the one in force. An insert always carries it.
    change.geometryUnchanged = "u".equals(op) && (change.geometryBytes == null && change.geometryText == null
        || Arrays.equals(change.geometryBytes, UNCHANGED_BYTES) || UNCHANGED.equals(change.geometryText));
    if (change.geometryUnchanged) {
      change.geometryBytes = null;
      change.geometryText = null;
    }
    if (columns.tenant() != null && after.schema().field(columns.tenant()) != null) {
      Object tenant = after.get(columns.tenant());
      change.tenant = tenant == null ? null : tenant.toString();
    }
    readDwellDelay(after, change);
    out.collect(change);
  }

  /**
   * The fence's own dwell delay, where the table has the column: an interval, which Debezium
   * delivers as microseconds (its interval.handling.mode numeric, which {@link FenceSource} sets).
   */
  private void readDwellDelay(Struct row, FenceChange change) {
    Field field = columns.dwellDelay() == null ? null : row.schema().field(columns.dwellDelay());
    if (field == null) {
      return;
    }
    Schema schema = field.schema();
    if (schema.type() != Schema.Type.INT64 || !MicroDuration.SCHEMA_NAME.equals(schema.name())) {
      throw new IllegalStateException("the fences table " + columns.fencesTable() + " has a dwell delay column '"
          + columns.dwellDelay() + "' that arrives as " + schema.type() + (schema.name() == null ? "" : " " + schema.name())
          + ", not as an interval's microseconds (" + MicroDuration.SCHEMA_NAME + "): it must be of type interval, read with"
          + " Debezium's interval.handling.mode numeric (option " + GeofenceOptions.DWELL_DELAY_COLUMN.key()
          + ", or --dwell-delay-column)");
    }
    Long micros = (Long) row.get(field);
    change.dwellDelay = micros == null ? null : FenceChange.dwellDelayOfMicros(micros);
  }

  private void readGeometry(Struct row, FenceChange change) {
    Field field = row.schema().field(columns.geometry());
    if (field == null) {
      throw new IllegalStateException(
          "the fences table " + columns.fencesTable() + " has no geometry column '" + columns.geometry() + "' (option "
              + GeofenceOptions.GEOMETRY_COLUMN.key() + ", or --geometry-column)");
    }
    Object geometry = row.get(field);
    if (geometry instanceof Struct) {
      // io.debezium.data.geometry.Geometry: {wkb: EWKB bytes, srid}
      change.geometryBytes = bytes(((Struct) geometry).get("wkb"));
    } else if (geometry instanceof String) {
      change.geometryText = (String) geometry;
    } else if (geometry != null) {
      change.geometryBytes = bytes(geometry);
    }
  }

  private static byte[] bytes(Object value) {
    if (value instanceof ByteBuffer) {
      ByteBuffer buffer = ((ByteBuffer) value).duplicate();
      byte[] bytes = new byte[buffer.remaining()];
      buffer.get(bytes);
      return bytes;
    }
    return (byte[]) value;
  }

  private static long optionalLong(Struct struct, String field) {
    if (struct.schema().field(field) == null) {
      return 0;
    }
    Object value = struct.get(field);
    return value == null ? 0 : ((Number) value).longValue();
  }

  @Override
  public TypeInformation<FenceChange> getProducedType() {
    return TypeInformation.of(FenceChange.class);
  }
}

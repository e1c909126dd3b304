package dev.geofence.connectors.cdc;

import dev.geofence.connectors.config.GeofenceOptions;
import java.io.Serializable;
import java.util.Objects;
import java.util.regex.Pattern;
import org.apache.flink.configuration.ReadableConfig;

/**
 * Names of the source tables and of the fences table's columns, as configured. Every name is
 * checked to be a plain SQL identifier, since some of them end up in SQL the job runs.
 * Immutable and serializable.
 */
public final class FenceTableColumns implements Serializable {

  private static final long serialVersionUID = 1L;
  private static final Pattern IDENTIFIER = Pattern.compile("[A-Za-z_][A-Za-z0-9_]{0,62}");

  private final String schema;
  private final String fencesTable;
  private final String heartbeatTable;
  private final String bucketStatsTable;
  private final String tombstonesTable;
  private final String id;
  private final String seq;
  private final String geometry;
  private final String tenant;
  private final String dwellDelay;

  private FenceTableColumns(Builder b) {
    this.schema = identifier("schema", b.schema);
    this.fencesTable = identifier("fences table", b.fencesTable);
    this.heartbeatTable = identifier("heartbeat table", b.heartbeatTable);
    this.bucketStatsTable = identifier("bucket stats table", b.bucketStatsTable);
    this.tombstonesTable = identifier("tombstones table", b.tombstonesTable);
    this.id = identifier("id column", b.id);
    this.seq = identifier("seq column", b.seq);
    this.geometry = identifier("geometry column", b.geometry);
    this.tenant = b.tenant == null ? null : identifier("tenant column", b.tenant);
    this.dwellDelay = b.dwellDelay == null ? null : identifier("dwell delay column", b.dwellDelay);
  }

  static String identifier(String what, String name) {
    Objects.requireNonNull(name, what);
    if (!IDENTIFIER.matcher(name).matches()) {
      throw new IllegalArgumentException(
          "the " + what + " '" + name + "' is not a plain SQL identifier (letters, digits and _, at most 63)");
    }
    return name;
  }

  /** A configured name for SQL: checked to be a plain identifier, quoted to keep its case. */
  public static String quote(String identifier) {
    return '"' + identifier + '"';
  }

  /** One of the configured tables, in the configured schema, for SQL. */
  public String qualified(String table) {
    return quote(schema) + "." + quote(table);
  }

  public static FenceTableColumns defaults() {
    return builder().build();
  }

  /**
   * The fences table and its column mapping as configured ({@link GeofenceOptions#FENCES_TABLE},
   * {@link GeofenceOptions#ID_COLUMN}, {@link GeofenceOptions#GEOMETRY_COLUMN}, {@link
   * GeofenceOptions#TENANT_COLUMN}, {@link GeofenceOptions#DWELL_DELAY_COLUMN}); the other tables are the migration's.
   */
  public static FenceTableColumns from(ReadableConfig config) {
    return builder().fencesTable(config.get(GeofenceOptions.FENCES_TABLE)).id(config.get(GeofenceOptions.ID_COLUMN))
        .geometry(config.get(GeofenceOptions.GEOMETRY_COLUMN)).tenant(config.get(GeofenceOptions.TENANT_COLUMN))
        .dwellDelay(config.get(GeofenceOptions.DWELL_DELAY_COLUMN)).build();
  }

  public static Builder builder() {
    return new Builder();
  }

  public String schema() {
    return schema;
  }

  public String fencesTable() {
    return fencesTable;
  }

  public String heartbeatTable() {
    return heartbeatTable;
  }

  /** The deleted fences' last seqs, {@code fence_tombstones}. */
  public String tombstonesTable() {
    return tombstonesTable;
  }

  /** The per-bucket fingerprints, {@code fence_bucket_stats}. */
  public String bucketStatsTable() {
    return bucketStatsTable;
  }

  public String id() {
    return id;
  }

  public String seq() {
    return seq;
  }

  public String geometry() {
    return geometry;
  }

  /** The tenant column, or null when fences have no tenant. */
  public String tenant() {
    return tenant;
  }

  /** The column of each fence's own dwell delay (an interval), or null when fences have none. */
  public String dwellDelay() {
    return dwellDelay;
  }

  @Override
  public boolean equals(Object o) {
    if (!(o instanceof FenceTableColumns)) {
      return false;
    }
    FenceTableColumns that = (FenceTableColumns) o;
    return schema.equals(that.schema) && fencesTable.equals(that.fencesTable)
        && heartbeatTable.equals(that.heartbeatTable)
        && bucketStatsTable.equals(that.bucketStatsTable)
        && tombstonesTable.equals(that.tombstonesTable)
        && id.equals(that.id) && seq.equals(that.seq) && geometry.equals(that.geometry)
        && Objects.equals(tenant, that.tenant) && Objects.equals(dwellDelay, that.dwellDelay);
  }

  @Override
  public int hashCode() {
    return Objects.hash(schema, fencesTable, heartbeatTable, bucketStatsTable, tombstonesTable, id, seq, geometry, tenant,
        dwellDelay);
  }

  @Override
  public String toString() {
    return schema + "." + fencesTable + "(" + id + ", " + seq + ", " + geometry + ", " + tenant + ", " + dwellDelay + "), "
        + schema + "." + bucketStatsTable;
  }

  /** Builder of {@link FenceTableColumns}; defaults match the shipped migration. */
  public static final class Builder {
    private String schema = "public";
    private String fencesTable = GeofenceOptions.FENCES_TABLE.defaultValue();
    private String heartbeatTable = "fence_heartbeat";
    private String bucketStatsTable = "fence_bucket_stats";
    private String tombstonesTable = "fence_tombstones";
    private String id = GeofenceOptions.ID_COLUMN.defaultValue();
    private String seq = "seq";
    private String geometry = GeofenceOptions.GEOMETRY_COLUMN.defaultValue();
    private String tenant = GeofenceOptions.TENANT_COLUMN.defaultValue();
    private String dwellDelay = GeofenceOptions.DWELL_DELAY_COLUMN.defaultValue();

    private Builder() {}

    public Builder schema(String schema) {
      this.schema = schema;
      return this;
    }

    public Builder fencesTable(String fencesTable) {
      this.fencesTable = fencesTable;
      return this;
    }

    public Builder heartbeatTable(String heartbeatTable) {
      this.heartbeatTable = heartbeatTable;
      return this;
    }

    public Builder id(String id) {
      this.id = id;
      return this;
    }

    public Builder seq(String seq) {
      this.seq = seq;
      return this;
    }

    public Builder geometry(String geometry) {
      this.geometry = geometry;
      return this;
    }

    /** The tenant column; null when fences have none (a table without the column has none either). */
    public Builder tenant(String tenant) {
      this.tenant = tenant;
      return this;
    }

    /**
     * The column of each fence's own dwell delay; null when fences have none (a table without the
     * column has none either), and the job's holds for every fence.
     */
    public Builder dwellDelay(String dwellDelay) {
      this.dwellDelay = dwellDelay;
      return this;
    }

    public FenceTableColumns build() {
      return new FenceTableColumns(this);
    }
  }
}

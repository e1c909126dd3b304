package dev.geofence.connectors.config;

import dev.geofence.state.geom.GeometryFormat;
import java.util.List;

/**
 * The flags of the fence database that both the job's {@code run} and the savepoint tools take,
 * declared once for both command lines.
 */
public final class SourceFlags {

  public static final Flag SOURCE_URL = Flag.text("source-url", "URL", GeofenceOptions.SOURCE_URL).asRequired();
  public static final Flag SOURCE_USER = Flag.text("source-user", "USER", GeofenceOptions.SOURCE_USER).asRequired();
  public static final Flag FENCES_TABLE = Flag.text("fences-table", "NAME", GeofenceOptions.FENCES_TABLE);
  public static final Flag ID_COLUMN = Flag.text("id-column", "NAME", GeofenceOptions.ID_COLUMN);
  public static final Flag GEOMETRY_COLUMN = Flag.text("geometry-column", "NAME", GeofenceOptions.GEOMETRY_COLUMN);
  public static final Flag TENANT_COLUMN = Flag.text("tenant-column", "NAME", GeofenceOptions.TENANT_COLUMN);
  public static final Flag DWELL_DELAY_COLUMN = Flag.text("dwell-delay-column", "NAME", GeofenceOptions.DWELL_DELAY_COLUMN);
  public static final Flag GEOMETRY_FORMAT = Flag.choice("geometry-format", GeofenceOptions.GEOMETRY_FORMAT, GeometryFormat.class);
  public static final Flag SLOT = Flag.text("slot", "NAME", GeofenceOptions.SLOT);

  private SourceFlags() {}

  /** The fences table and its column mapping ({@link dev.geofence.connectors.cdc.FenceTableColumns#from}). */
  public static List<Flag> table() {
    return List.of(FENCES_TABLE, ID_COLUMN, GEOMETRY_COLUMN, TENANT_COLUMN, DWELL_DELAY_COLUMN);
  }
}

package dev.geofence.state.geom;

/**
 * How a fence geometry column arrives from the source, and so which of {@link FenceGeometryReader}'s
 * readers decodes it: bytes are always read as (E)WKB; text as WKT (EWKT) unless the column holds
 * GeoJSON.
 */
public enum GeometryFormat {
  /** EWKB/WKB bytes: a PostGIS geometry column, or bytea. */
  WKB,
  /** WKT or EWKT text. */
  WKT,
  /** GeoJSON text. */
  GEOJSON
}
